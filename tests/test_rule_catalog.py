"""`tracelab rules` and `explain` read the rules from their sources: the same list as imported."""
import subprocess
import sys

from tracelab.app import rule_catalog
from tracelab.app.engine import all_rules


def test_catalog_matches_the_imported_registry():
    read = rule_catalog._read()
    imported = all_rules()
    assert [r.name for r in read] == [s.name for s in imported]
    for r, s in zip(read, imported):
        assert (r.code, r.summary, r.doc) == (s.code, s.summary, s.doc)
        assert [(n.key, n.label) for n in r.requires] == [(q.key, q.label) for q in s.requires]
        assert r.thresholds() == s.thresholds()


def test_find_rule_by_name_and_code():
    assert rule_catalog.find_rule("loss-spike").name == "loss-spike"
    code = rule_catalog.find_rule("loss-spike").code
    assert rule_catalog.find_rule(code.lower()).name == "loss-spike"
    assert rule_catalog.find_rule("no-such-rule") is None


def test_rules_command_imports_neither_pandas_nor_the_rules():
    code = ("import sys; from tracelab.app.cli import main; main(['rules']); "
            "print(sorted(m for m in ('pandas', 'pyarrow', 'numpy', 'scipy', 'matplotlib', "
            "'tracelab.analyzers') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert "TL" in out and out.strip().splitlines()[-1] == "[]"
