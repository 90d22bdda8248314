"""Contract tests over the whole rule registry (every rule, whoever wrote it)."""
import inspect
import re
from pathlib import Path

import pytest

from tracelab.analyzers import RULES
from tracelab.core.causes import Link
from tracelab.core.rules import DOC_SECTIONS, Plot, Unseen
from tracelab.core.run import Run
from tracelab.core.schema import REQUIREMENTS, Requirement

SPECS = [r.spec for r in RULES]
IDS = [s.name for s in SPECS]
NAMES = {s.name for s in SPECS}




def test_names_and_codes_are_unique():
    names = [s.name for s in SPECS]
    codes = [s.code for s in SPECS]
    assert len(set(names)) == len(names), names
    assert len(set(codes)) == len(codes), codes


def test_the_list_is_ordered_by_code():
    codes = [s.code for s in SPECS]
    assert codes == sorted(codes)


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_name_and_code_format(spec):
    assert re.fullmatch(r"[a-z]+(-[a-z]+)*", spec.name), spec.name
    assert re.fullmatch(r"TL\d{3}", spec.code), spec.code


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_file_function_and_name_agree(spec):
    snake = spec.name.replace("-", "_")
    assert spec.func.__name__ == snake
    assert Path(inspect.getsourcefile(spec.func)).stem == snake
    assert inspect.getmodule(spec.func).__name__ == f"tracelab.analyzers.{snake}"


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_docstring_has_every_section(spec):
    doc = spec.doc
    assert doc.startswith(f"{spec.name}: "), doc.splitlines()[0]
    assert spec.summary
    lines = [line.strip() for line in doc.splitlines()]
    for section in DOC_SECTIONS:
        assert section in lines, f"{spec.name}: no '{section}' section"
        body = lines[lines.index(section) + 1] if lines.index(section) + 1 < len(lines) else ""
        assert body, f"{spec.name}: section '{section}' is empty"


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_requires_are_schema_requirements(spec):
    assert isinstance(spec.requires, tuple)
    for req in spec.requires:
        assert isinstance(req, Requirement) and req in REQUIREMENTS


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_thresholds_are_keyword_only_with_plain_defaults(spec):
    params = list(inspect.signature(spec.func).parameters.values())
    positional = 2 if spec.reads else 1  # the run, and the chains of a rule that reads findings
    for p in params[:positional]:
        assert p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    for p in params[positional:]:
        assert p.kind is p.KEYWORD_ONLY, f"{spec.name}.{p.name} must be keyword-only"
        if p.name == "baseline":
            assert p.default is None
            continue
        assert p.default is not p.empty, f"{spec.name}.{p.name} needs a default"
        assert isinstance(p.default, (int, float, bool, str, tuple)), (spec.name, p.name)
        assert p.annotation is not p.empty, f"{spec.name}.{p.name} needs a type annotation"


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_every_rule_returns_nothing_on_an_empty_run(spec):
    # The engine refuses an empty run, so call the rule directly.
    run = Run.from_frames()
    assert spec.func(run, *([[]] if spec.reads else [])) == []


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_every_rule_returns_nothing_on_a_run_with_only_metadata(spec):
    meta = {"model": {"type": "Net", "modules": [{"path": "fc", "type": "Linear"}],
                      "parameters": [{"name": "fc.weight", "shape": [2, 3],
                                      "requires_grad": True, "in_optimizer": True}]},
            "config": {"num_classes": 2}, "environment": {"python": "3.11"}}
    assert spec.func(Run.from_frames(meta), *([[]] if spec.reads else [])) == []


MALFORMED_METAS = [
    {"model": {"modules": None, "parameters": None}, "optimizers": [], "loss_fn": "CE"},
    {"model": {"modules": ["fc", 3, {"path": "fc"}, {"type": "LSTM", "config": None}]},
     "optimizers": {"0": None, "1": {"groups": None}}, "module_shapes": {"fc": None}},
    {"model": {"modules": []}, "optimizers": {"0": {"groups": [None, {"lr": "x", "params": 1}]}},
     "schedulers": [1], "outputs": None},
    {"model": {"parameters": [{"name": "fc.weight", "shape": None, "requires_grad": True},
                              {"name": "fc.bias", "shape": "2", "values": [1]}]},
     "optimizers": [{"type": "SGD", "groups": [{"lr": 0.1, "params": ["fc.weight"]}]}]},
]


@pytest.mark.parametrize("meta", MALFORMED_METAS, ids=range(len(MALFORMED_METAS)))
@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_every_rule_reads_a_malformed_summary_without_raising(spec, meta):
    """A meta.json edited by hand or written by another tool, its top-level fields of the right
    type (the reader refuses others in one line): the rule finds what it can."""
    run = Run.from_frames(meta)
    assert isinstance(run.available, frozenset) and isinstance(run.module_types(), dict)
    assert isinstance(spec.func(run, *([[]] if spec.reads else [])), list)


# -- what each rule declares about the others --------------------------------------------------
@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_every_declared_link_names_registered_rules(spec):
    for link in spec.links:
        assert isinstance(link, Link) and link.why, link
        assert spec.name in (link.cause, *link.effects), f"{spec.name} declares another's link"
        unknown = ({link.cause} | set(link.effects)) - NAMES
        assert not unknown, f"{spec.name}: a link names {sorted(unknown)}, no registered rule"
        assert link.cause not in link.effects, link


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_what_a_rule_reads_and_declares_is_well_formed(spec):
    assert set(spec.reads) <= NAMES - {spec.name}, spec.reads
    assert isinstance(spec.plot, Plot)
    assert spec.merge is None or (isinstance(spec.merge, str) and spec.merge.strip())
    assert spec.unseen is None or isinstance(spec.unseen, Unseen)


def test_no_two_rules_declare_the_same_link():
    seen = [(lk.cause, e) + (lk.why,) for s in SPECS for lk in s.links for e in lk.effects]
    assert len(seen) == len(set(seen))
