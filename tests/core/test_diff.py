"""`tracelab diff`: real tiny runs that differ in one flag, and in-memory runs for the details."""
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tracelab.app import engine
from tracelab.app.cli import main
from tracelab.app.diff import against_baseline, diff_runs
from tracelab.reports.diff_report import diff_text
from tracelab.app.engine import all_rules
from tracelab.core.config import Config
from tracelab.core.run import Run, open_run
from tracelab.core.schema import Needs

sys.path.insert(0, str(Path(__file__).parent))
from _archive_runs import train_run  # noqa: E402


@pytest.fixture(scope="module")
def trio(tmp_path_factory):
    """Reference, same run with another seed, same run with TF32 matmul allowed."""
    root = tmp_path_factory.mktemp("diff")
    base = train_run(root / "base", seed=0, steps=30)
    seeded = train_run(root / "seed1", seed=1, steps=30)
    # torch.backends.cuda.matmul.allow_tf32 = True, as the Recorder records it
    tf32 = train_run(root / "tf32", seed=0, steps=30,
                     environment={"tf32_matmul": True, "float32_matmul_precision": "high"})
    return base, seeded, tf32


def test_a_different_seed_is_pointed_at(trio):
    base, seeded, _ = trio
    d = diff_runs(open_run(base), open_run(seeded))
    assert [c.label for c in d.causes] == ["environment.seed"]
    assert (d.causes[0].a, d.causes[0].b) == (0, 1)
    assert d.loss.first_step == 0  # another initialization: apart from the first step
    assert d.layers and all(layer.first_step == 0 for layer in d.layers)
    text = diff_text(d)
    assert "The runs differ in one setting:\n  environment.seed: 0 → 1" in text


def test_a_numerics_flag_is_pointed_at_even_when_the_numbers_agree(trio):
    base, _, tf32 = trio
    d = diff_runs(open_run(base), open_run(tf32))
    assert [c.label for c in d.causes] == ["environment.tf32_matmul"]
    assert (d.causes[0].a, d.causes[0].b) == (False, True)
    assert "float32_matmul_precision 'highest' → 'high'" in d.causes[0].note
    # On the CPU TF32 changes nothing: the same seed gives the same losses, bit for bit.
    assert d.loss.first_step is None and d.loss.max_rel_diff == 0.0
    assert all(layer.first_step is None and layer.median_ratio == 1.0 for layer in d.layers)
    assert not d.only_a and not d.only_b


def test_identical_setups_have_no_cause(trio):
    base, _, _ = trio
    d = diff_runs(open_run(base), open_run(base))
    assert d.causes == [] and d.loss.first_step is None
    assert "No difference in config, flags, optimizer, versions or model." in diff_text(d)


def _frames(loss, grad_scale=1.0, lr=0.1, seed=0, shift=0.0):
    steps = np.arange(len(loss))
    scalars = pd.DataFrame({"step": steps, "split": "train", "name": "loss", "value": loss})
    tensors = pd.concat([pd.DataFrame({
        "step": steps, "kind": "grad", "name": name,
        "norm": base * (grad_scale if name == "fc2.weight" else 1.0) * (1 + 0.01 * steps)})
        for name, base in (("fc1.weight", 0.5), ("fc2.weight", 0.2))], ignore_index=True)
    rng = np.random.default_rng(seed)
    inputs = pd.DataFrame({"step": np.repeat(steps[::10], 2), "split": "train",
                           "feature": ["x0", "x1"] * len(steps[::10]), "dtype": "float32",
                           "count": 32, "mean": [0.0 + shift, 1.0] * len(steps[::10]),
                           "std": 1.0, "min": -3.0, "max": 3.0, "n_unique": 32})
    samples = pd.DataFrame({"split": "train", "feature": ["x0"] * 200 + ["x1"] * 200,
                            "step": 0, "value": np.concatenate([rng.normal(shift, 1, 200),
                                                                rng.normal(1, 1, 200)])})
    meta = {"config": {"lr": lr, "batch_size": 32},
            "environment": {"torch": "2.3.0", "tf32_matmul": False, "seed": 0,
                            "seed_set": True, "hostname": "node-a"}}
    return meta, dict(scalars=scalars, tensors=tensors, inputs=inputs, samples=samples)


def test_divergence_step_layers_drift_and_findings_in_memory():
    loss = 2.0 * np.exp(-np.arange(200) / 60) + 0.1
    bad = loss.copy()
    bad[120:] = loss[120:] * (1 + 0.2 * np.arange(80) / 80)
    bad[190:] = np.nan  # B ends in NaN: a finding only B has
    meta_a, fa = _frames(loss)
    meta_b, fb = _frames(bad, grad_scale=8.0, lr=0.4, shift=3.0)
    meta_b["environment"] = {**meta_b["environment"], "torch": "2.4.0", "hostname": "node-b"}
    d = diff_runs(Run.from_frames(meta_a, **fa), Run.from_frames(meta_b, **fb))
    assert [c.label for c in d.causes] == ["config.lr"]
    ranks = {c.label: c.rank for c in d.changes}
    assert ranks["environment.torch"] == 1 and ranks["environment.hostname"] == 2
    assert d.loss.first_step == 121  # bad[120] equals loss[120] exactly
    assert d.layers[0].name == "fc2.weight" and d.layers[0].median_ratio == pytest.approx(8.0)
    assert d.layers[1].first_step is None
    moved = {(f.split, f.feature): f.why for f in d.features}
    assert list(moved) == [("train", "x0")] and "mean moved 3 stds" in moved[("train", "x0")]
    assert any(f.code == "TL104" for f in d.only_b) and not d.only_a
    if any(s.name == "train-val-mismatch" for s in all_rules()):  # its baseline mode
        assert "train-val-mismatch" in d.drift_note and "with A as baseline" in d.drift_note
        assert ("TL301", "train (vs baseline)") in [(f.code, f.subject) for f in d.drift]
    else:
        assert d.drift_note == "no data rule with a baseline mode is installed"
    json.dumps(d.to_dict(), default=str)


def test_runs_without_environment_or_common_series():
    a = Run.from_frames({"config": {}}, scalars=pd.DataFrame(
        {"step": [0, 1], "split": "train", "name": "loss", "value": [1.0, 0.5]}))
    b = Run.from_frames({"config": {"extra": 1}}, scalars=pd.DataFrame(
        {"step": [5, 6], "split": "train", "name": "acc", "value": [0.1, 0.2]}))
    d = diff_runs(a, b)
    assert [c.text() for c in d.causes] == ["config.extra: (absent) → 1"]
    assert d.series == [] and d.layers == []
    assert any("environment of A was not recorded" in n for n in d.notes)
    assert "no series in common" in diff_text(d)


def test_cli_diff_with_html_and_json(trio, tmp_path, capsys):
    base, seeded, _ = trio
    html, js = tmp_path / "diff.html", tmp_path / "diff.json"
    assert main(["diff", str(base), str(seeded), "--html", str(html), "--json", str(js)]) == 0
    out = capsys.readouterr().out
    assert "environment.seed: 0 → 1" in out and "train/loss: diverge at step 0" in out
    page = html.read_text()
    assert "<code>environment.seed</code>: 0 → 1" in page and "<svg" in page
    assert json.loads(js.read_text())["causes"] == ["environment.seed"]
    assert main(["diff", str(base), str(base)]) == 2
    assert "same run" in capsys.readouterr().err
    assert main(["diff", str(base), str(tmp_path / "missing")]) == 2


def _drifted_pair():
    loss = 2.0 * np.exp(-np.arange(200) / 60) + 0.1
    meta_a, fa = _frames(loss)
    meta_b, fb = _frames(loss * 1.3, shift=3.0, seed=1)
    return Run.from_frames(meta_a, **fa), Run.from_frames(meta_b, **fb)


def _constant_pair():
    a, _ = _drifted_pair()
    meta, frames = _frames(2.0 * np.exp(-np.arange(200) / 60) + 0.1)
    frames["inputs"] = frames["inputs"].assign(std=0.0, min=1.0, max=1.0, mean=1.0, n_unique=1)
    frames["samples"] = frames["samples"].assign(value=1.0)
    return a, Run.from_frames(meta, **frames)


DATA_RULES = [s.name for s in all_rules() if s.uses_baseline
              and any(r in (Needs.INPUTS, Needs.SAMPLES) for r in s.requires)]


@pytest.mark.parametrize("pair", [_drifted_pair, _constant_pair])
def test_each_run_is_analyzed_once_with_the_three_analyses_results(pair, monkeypatch):
    a, b = pair()
    calls = []
    real = engine.analyze
    monkeypatch.setattr(engine, "analyze", lambda run, **kw: calls.append(run) or real(run, **kw))
    d = diff_runs(a, b)
    assert calls == [a, b]
    monkeypatch.undo()
    # What analyzing B twice (on its own, then its data rules against A) gives.
    drift = engine.analyze(b, baseline=a, select=DATA_RULES).findings
    fa, fb = engine.analyze(a).findings, engine.analyze(b).findings
    key = lambda f: (f.rule, f.subject)  # noqa: E731
    assert d.drift == drift and d.drift
    assert d.only_b == [f for f in fb if key(f) not in {key(g) for g in fa}]
    assert d.only_a == [f for f in fa if key(f) not in {key(g) for g in fb}]


@pytest.mark.parametrize("pair", [_drifted_pair, _constant_pair])
def test_a_runs_own_data_findings_do_not_depend_on_a_baseline(pair):
    """The diff takes B's own findings from its analysis against A: what the data rules find
    comparing with the baseline must come on top of, never change, what they find alone."""
    a, b = pair()
    alone = engine.analyze(b, select=DATA_RULES).findings
    against = engine.analyze(b, baseline=a, select=DATA_RULES).findings
    assert [f for f in against if not against_baseline(f)] == alone
    assert any(against_baseline(f) for f in against)
    assert not any(against_baseline(f) for f in alone)


def test_the_diff_thresholds_come_from_the_config():
    a, b = _drifted_pair()
    assert [f.feature for f in diff_runs(a, b).features] == ["x0"]
    assert diff_runs(a, b).loss.first_step == 0
    lenient = Config.from_mapping({"diff": {"mean_shift": 5.0, "rtol": 0.5}}, "tracelab.toml")
    d = diff_runs(a, b, config=lenient)
    assert d.features == [] and d.loss.first_step is None and d.rtol == 0.5
    assert diff_runs(a, b, config=lenient, rtol=1e-4).loss.first_step == 0  # the argument wins
    narrow = Config.from_mapping({"diff": {"std_ratio_min": 0.99, "std_ratio_max": 1.0}}, "t")
    assert [f.feature for f in diff_runs(a, a, config=narrow).features] == []
    spread = Config.from_mapping({"diff": {"std_ratio_min": 2.0, "std_ratio_max": 3.0}}, "t")
    assert {f.feature for f in diff_runs(a, a, config=spread).features} == {"x0", "x1"}
    few = Config.from_mapping({"diff": {"unique_min": 100}}, "t")
    assert diff_runs(a, a, config=few).features == []


def test_cli_diff_reads_the_diff_table_and_the_options_override_it(trio, tmp_path, capsys):
    base, seeded, _ = trio
    config = tmp_path / "tracelab.toml"
    config.write_text("[diff]\nrtol = 1e3\natol = 1e3\n")
    js = tmp_path / "diff.json"
    assert main(["diff", str(base), str(seeded), "--config", str(config), "--json", str(js)]) == 0
    out = json.loads(js.read_text())
    assert (out["rtol"], out["atol"]) == (1e3, 1e3)
    assert out["series"][0]["first_step"] is None  # everything within a tolerance of 1000
    assert main(["diff", str(base), str(seeded), "--config", str(config), "--json", str(js),
                 "--rtol", "1e-4", "--atol", "0"]) == 0
    out = json.loads(js.read_text())
    assert (out["rtol"], out["atol"]) == (1e-4, 0.0) and out["series"][0]["first_step"] == 0
    capsys.readouterr()


def test_diff_help_documents_the_table(capsys):
    with pytest.raises(SystemExit):
        main(["diff", "--help"])
    text = capsys.readouterr().out
    assert "[tool.tracelab.diff]" in text
    for name in ("rtol", "atol", "mean_shift", "std_ratio_min", "std_ratio_max", "unique_min",
                 "unique_ratio"):
        assert f"  {name} = " in text
