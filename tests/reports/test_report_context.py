"""The report's content as data: header, findings, plots chosen, sections (no HTML bytes)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from report_data import EVIL, synthetic_diagnosis, synthetic_run
from tracelab.core.findings import Diagnosis, Finding
from tracelab.reports import fmt
from tracelab.reports.context import build_context
from tracelab.app.engine import all_rules
from tracelab.core.rules import Plot
from tracelab.reports.finding_plots import PLOTS, finding_figure, generic, mentioned
from tracelab.reports.chart import Chart
from tracelab.reports.plots import binned, envelope
from tracelab.core.run import Run
from tracelab.core.schema import REQUIREMENTS, Needs

# The rule names fixed by the project (issue 3 and the rule codes list).
RULE_NAMES = {
    "loss-oscillation", "loss-spike", "loss-plateau", "nonfinite-values", "overfitting",
    "metric-stagnation", "run-aborted", "vanishing-gradients", "exploding-gradients",
    "dead-units", "saturated-activations", "frozen-parameters", "update-ratio",
    "collapsed-outputs", "train-val-mismatch", "input-collapse", "unnormalized-inputs",
    "nondeterminism-risk", "gpu-unused", "input-pipeline-bound", "rank-divergence",
    "loss-collapse", "missing-zero-grad", "eval-in-train-mode", "target-problems",
    "amp-overflow", "train-val-overlap",
    "loss-input-contract", "shape-broadcast", "train-in-eval-mode", "batchnorm-small-batch",
    "wrong-batch-axis", "loss-below-bound", "clip-misuse", "lr-schedule", "weight-decay-too-high",
    "optimizer-step-missing", "param-not-in-optimizer", "datetime-units", "data-leak"}


@pytest.fixture(scope="module")
def ctx():
    return build_context(synthetic_diagnosis(failed=True), plots=False)


def test_header_states_failure_with_exception_and_steps(ctx):
    run = ctx["run"]
    assert run["name"] == "synthetic-mlp"
    assert run["state"] == "failed" and not run["ok"]
    assert run["detail"] == ("at step 399 with RuntimeError: CUDA error: <device-side assert> "
                             "& friends")  # raw here; the template escapes it
    assert run["traceback"].startswith("Traceback")
    assert (run["first_step"], run["last_step"], run["steps_text"]) == (0, 399, "0–399")
    assert run["logged_steps"] == 400
    assert run["duration"] == "13.0 s"
    highlights = dict(run["highlights"])
    assert highlights["seed"] == "not set by the script"
    assert highlights["device"] == "CPU only (CUDA unavailable)"
    assert highlights["model"] == "MLP, 6,144 parameters"
    assert highlights["optimizer"] == "SGD, lr 0.1"
    assert highlights["commit"] == "0123456789ab"
    assert "recording cost" not in highlights  # not recorded by this run's meta


def test_header_shows_what_recording_cost():
    run = synthetic_run(steps=120)
    run.meta["recorder"] = {"every": 1, "cost": {"steps": 400, "training_thread_s": 0.5,
                                                 "writer_cpu_s": 1.2}}
    step_time = float(run.scalar("step_time").median())
    header = build_context(Diagnosis(run, [], [], []), plots=False)["run"]
    assert dict(header["highlights"])["recording cost"] == (
        f"1.25 ms per step on the training thread ({0.125 / step_time:.1f}% of the median "
        "step), 3.00 ms writer CPU")


def test_killed_run_says_where_it_stopped():
    run = synthetic_run(steps=120)
    run.meta["status"] = {"state": "killed", "last_step": 119}
    run.meta.pop("end_time")
    header = build_context(Diagnosis(run, [], [], []), plots=False)["run"]
    assert header["detail"] == "killed after step 119, no exception recorded"
    assert header["duration"].startswith("≥ ")  # from the last wall time, a lower bound


def test_verdict_and_severity_counts(ctx):
    assert ctx["verdict"] == {"worst": "error", "label": "Error",
                              "text": "2 errors, 2 warnings, 1 info",
                              "counts": {"error": 2, "warning": 2, "info": 1}, "errors": 1}
    assert [(s["key"], s["count"]) for s in ctx["severities"]] == [
        ("error", 2), ("warning", 2), ("info", 1)]


def test_findings_follow_the_diagnoses_and_carry_everything_a_reader_needs(ctx):
    fs = ctx["findings"]
    # Each root cause, then what it explains: the vanishing gradients explain the chance
    # accuracy, which shows its cause instead of a fix of its own.
    assert [f["rule"] for f in fs] == ["vanishing-gradients", "metric-stagnation", "dead-units",
                                       "train-val-mismatch", "nondeterminism-risk"]
    assert [f["id"] for f in fs] == [f"finding-{i}" for i in range(1, 6)]
    stagnation = fs[1]
    assert stagnation["cause"] == {"n": 1, "rule": "vanishing-gradients",
                                   "subject": "layers.0.weight (+1 more)",
                                   "anchor": "finding-1"}
    assert stagnation["fix"] == "" and fs[0]["cause"] is None and fs[0]["fix"]
    dead = next(f for f in fs if f["rule"] == "dead-units")
    assert dead["code"] == "TL203" and dead["subject"] == "act0"
    assert dead["steps_text"] == "steps 199–399" and dead["steps"] == [199, 399]
    assert dead["fix"].startswith("Lower the learning rate")
    assert [(e["key"], e["text"]) for e in dead["evidence"]] == [
        ("dead frac", "0.85"), ("dead frac first", "0.05"), ("recordings", "20")]
    assert dead["plot"]["function"] == "activation_dead_frac" and dead["plot"]["uri"] is None
    info = next(f for f in fs if f["rule"] == "nondeterminism-risk")
    assert info["steps_text"] == "—" and info["plot"]["function"] is None


def test_diagnoses_name_the_root_cause_its_chain_and_fix(ctx):
    first, *rest = ctx["diagnoses"]
    assert first["rule"] == "vanishing-gradients" and first["anchor"] == "finding-1"
    assert first["severity"] == "error" and first["fix"].startswith("Use ReLU-family")
    assert [(c["rule"], c["anchor"]) for c in first["chain"]] == [
        ("metric-stagnation", "finding-2")]
    assert first["chain"][0]["why"] and first["level"] in ("high", "medium", "low")
    assert [d["n"] for d in rest] == [2, 3, 4] and all(not d["chain"] for d in rest)


def test_list_of_records_evidence_becomes_a_table(ctx):
    mismatch = next(f for f in ctx["findings"] if f["rule"] == "train-val-mismatch")
    worst = next(e for e in mismatch["evidence"] if e["key"] == "worst")
    assert worst["table"] == {"columns": ["feature", "ks", "w over std", "p value", "method"],
                              "rows": [["age", "0.52", "1.7", "1e-09", "ks"]]}


def test_rule_explanation_comes_from_the_rule_docstring(ctx):
    from tracelab.app.engine import find_rule
    dead = next(f for f in ctx["findings"] if f["rule"] == "dead-units")
    spec = find_rule("dead-units")
    assert spec is not None
    assert dead["doc"]["summary"] == spec.summary
    headings = [s["heading"] for s in dead["doc"]["sections"]]
    assert headings[:2] == ["What it detects", "Why it matters"]


def test_unknown_rule_renders_without_doc_and_uses_the_generic_plot():
    run = synthetic_run(steps=100)
    f = Finding("my-custom-rule", "X001", "warning", "layers.2.weight", (10, 20), "odd.", {}, "")
    ctx = build_context(Diagnosis(run, [f], [], []), plots=False)
    assert ctx["findings"][0]["doc"] == {"summary": "", "sections": []}
    assert ctx["findings"][0]["plot"]["function"] == "generic"


def test_sections_environment_config_recorded_skipped_errors(ctx):
    repro = {k: (v, note) for k, v, note in ctx["environment"]["reproducibility"]}
    assert repro["seed_set"] == ("no", "the script did not seed torch; runs will differ")
    assert repro["cudnn_deterministic"] == ("no", "")  # a CPU-only run: cuDNN does not matter
    assert repro["seed"] == ("1234", "")  # a seed is an identifier: no digit grouping
    system = {k: v for k, v, _ in ctx["environment"]["system"]}
    assert system["python"] == "3.11.9"
    assert dict(ctx["config"]) == {"lr": "0.1", "batch_size": "32", "model.width": "64",
                                   "model.act": "relu", "note": "baseline"}
    recorded = dict(ctx["recorded"]["rows"])
    assert recorded["gradient stats"] == "6 tensors at 400 steps"
    assert recorded["activation stats"] == "4 tensors at 40 steps"
    assert recorded["inputs (val)"] == "4 features at 8 steps"
    # The fixture predates the batch and loop checks: the report lists them as not recorded.
    new = [Needs.BATCHES, Needs.TARGETS, Needs.CLASSES, Needs.GRAD_RESETS, Needs.EVAL_MODES,
           Needs.AMP, Needs.FINGERPRINTS]
    missing = ctx["recorded"]["missing"]
    # ... and the facts added since (what enters the loss, the training steps' modes, ...).
    later = [r.label for r in REQUIREMENTS[REQUIREMENTS.index(Needs.FINGERPRINTS) + 1:]]
    assert missing == [r.label for r in new] + [label for label in later if label in missing]
    assert {Needs.OUTPUTS.label, Needs.TRAIN_MODES.label, Needs.MODULE_SHAPES.label,
            Needs.MODULE_CONFIG.label} <= set(missing)
    assert ctx["skipped"] == [{"rule": "rank-divergence", "code": "TL501",
                               "reason": "not recorded: a second rank"}]
    assert ctx["errors"][0]["rule"] == "loss-spike"
    assert ctx["model"]["parameters"] == 6144 and ctx["model"]["optimizer"] == "SGD"


def test_input_tables_per_split_show_datetimes_as_dates(ctx):
    tables = {t["split"]: t for t in ctx["overview"]["inputs"]}
    assert list(tables) == ["train", "val"]
    rows = {r["feature"]: r for r in tables["val"]["rows"]}
    assert rows["age"]["mean"] == "1" and rows["age"]["max"] == "1.5"
    assert rows["income"]["max"] == "1,000"
    assert rows["day"]["resolution"] == "D" and rows["day"]["distinct"] == "7 (max 7)"
    assert rows["day"]["min"] == "1970-01-01" and rows["day"]["std"] == "0.3 s"
    assert rows["age"]["resolution"] == ""


def test_overview_lists_its_plots_and_renders_them_as_svg_data_uris():
    d = synthetic_diagnosis(steps=120)
    assert [p["function"] for p in build_context(d, plots=False)["overview"]["plots"]] == [
        "curves_figure", "grad_norm_figure", "update_ratio_figure", "activation_figure",
        "timing_figure"]
    ctx = build_context(d)
    plotted = [f["plot"] for f in ctx["findings"] if f["plot"]["function"]]
    for p in ctx["overview"]["plots"] + plotted:
        assert p["uri"].startswith("data:image/svg+xml;base64,"), p


def test_a_run_with_only_a_loss_gets_only_the_curves():
    sc = pd.DataFrame({"step": range(50), "split": "train", "name": "loss",
                       "value": np.linspace(2, 1, 50)})
    ctx = build_context(Diagnosis(Run.from_frames(scalars=sc), [], [], []))
    assert [p["function"] for p in ctx["overview"]["plots"]] == ["curves_figure"]
    assert ctx["overview"]["inputs"] == []
    assert "gradient stats" in ctx["recorded"]["missing"]


def test_a_plot_that_breaks_costs_the_plot_not_the_report(monkeypatch):
    d = synthetic_diagnosis(steps=60)

    def broken(diagnosis, finding):
        raise ValueError("odd data")
    monkeypatch.setitem(PLOTS, Plot.DEAD_FRACTION, broken)  # the dead-units plot
    monkeypatch.setattr("tracelab.reports.finding_plots.generic", broken)
    monkeypatch.setattr("tracelab.reports.context.OVERVIEW", ())  # not under test: save time
    dead = next(f for f in build_context(d)["findings"] if f["rule"] == "dead-units")
    assert dead["plot"]["uri"] is None
    assert dead["plot"]["note"] == "plot unavailable (ValueError: odd data)"


# -- plots by the kind each rule declares ---------------------------------------------------------
SPECS = {s.name: s for s in all_rules()}


def test_every_registered_rule_has_an_explicit_plot_entry():
    assert set(SPECS) >= RULE_NAMES | {"learning-rate-too-high"}  # a new rule adds no line here
    assert set(PLOTS) == set(Plot)  # every kind a rule may declare is drawn (or None)
    assert {s.plot for s in SPECS.values()} <= set(PLOTS)


def _finding_for(rule: str, run: Run) -> Finding:
    names = run.names("grad")
    subjects = {"dead-units": "act0", "saturated-activations": "act3",
                "collapsed-outputs": "act3", "train-val-mismatch": "val",
                "input-collapse": "day", "unnormalized-inputs": "income",
                "metric-stagnation": "val/acc", "overfitting": "val loss",
                "rank-divergence": "rank 1"}
    evidence = {"overfitting": {"best_step": 150}, "metric-stagnation": {"chance": 0.5},
                "train-val-mismatch": {"worst": [{"feature": "age", "ks": 0.5}]}}
    return Finding(rule, "TL000", "warning", subjects.get(rule, names[0]), (100, 140),
                   f"about '{names[1]}'.", evidence.get(rule, {}), "fix it.")


@pytest.mark.parametrize("rule", sorted(SPECS))
def test_each_rule_plot_draws_on_a_plausible_run(rule):
    d = synthetic_diagnosis(steps=200)
    fn = PLOTS[SPECS[rule].plot]
    fig, note = finding_figure(d, _finding_for(rule, d.run))
    if fn is None:
        assert fig is None and note == ""
    else:
        assert isinstance(fig, Chart) and note == "", note
        assert fig.spec()["panels"]


def test_generic_plot_draws_the_named_tensors():
    d = synthetic_diagnosis(steps=80)
    f = Finding("x", "X1", "info", "layers.3.weight", (10, 20), "", {}, "")
    panels = generic(d, f).spec()["panels"]
    labels = [s["label"] for p in panels if p["legend"] for s in p["series"]]
    assert "layers.3.weight" in labels


def test_mentioned_matches_whole_names_from_subject_evidence_and_message():
    f = Finding("r", "X1", "info", "fc1.weight (+2 more)", None,
                "Layers 'fc2.weight', conv.bias: tiny.", {"worst": [{"feature": "fc3"}]}, "")
    cands = ["fc1", "fc1.weight", "fc2.weight", "conv.bias", "fc3", "fc4.weight"]
    assert mentioned(f, cands) == ["fc1.weight", "fc3", "fc2.weight", "conv.bias"]
    assert mentioned(f, cands, message=False) == ["fc1.weight", "fc3"]
    f2 = Finding("r", "X1", "info", "val/acc", None, "", {}, "")
    assert mentioned(f2, ["acc", "val", "loss"]) == ["val", "acc"]


def test_mentioned_takes_bare_numbers_only_as_the_subject_or_quoted():
    # A Sequential's modules are named 0, 1, 2...: counts in a message must not match them.
    modules = [str(i) for i in range(12)]
    f = Finding("r", "X1", "info", "3", None, "8 of 11 layers; '5' too, after 300 steps.", {},
                "")
    assert mentioned(f, modules) == ["3", "5"]
    rank = Finding("r", "X1", "info", "rank 1", None, "", {}, "")
    assert mentioned(rank, modules) == []


# -- data shaping and formatting -----------------------------------------------------------------
def test_envelope_downsamples_but_keeps_a_one_step_spike():
    s = pd.Series(np.ones(10_000), index=np.arange(10_000))
    s.iloc[7_777] = 50.0
    e = envelope(s, max_points=500)
    assert len(e) == 500
    assert e["hi"].max() == 50.0 and e["mean"].max() < 50.0 and e["lo"].min() == 1.0


def test_heatmap_bins_mark_nonfinite_and_group_many_rows():
    wide = pd.DataFrame(np.ones((1000, 3)), columns=["a", "b", "c"])
    wide.iloc[10, 1] = np.inf
    matrix, edges, names = binned(wide, max_cols=100)
    assert matrix.shape == (3, 100) and names == ["a", "b", "c"]
    assert np.isnan(matrix[1, 1]) and np.isfinite(np.delete(matrix[1], 1)).all()
    many = pd.DataFrame(np.ones((10, 250)), columns=[f"l{i}" for i in range(250)])
    matrix, _, names = binned(many, max_rows=100)
    assert matrix.shape[0] == len(names) == 84 and names[0] == "l0 (+2)"


@pytest.mark.parametrize("value, text", [
    (None, "—"), (True, "yes"), (12345, "12,345"), (0.5, "0.5"), (1.2e-7, "1.2e-07"),
    (123456.0, "123,456"), (3.14159, "3.142"), (float("nan"), "NaN"), (float("inf"), "∞"),
    ([1, 2.5], "1, 2.5"), ({"a": 1}, "a=1")])
def test_number_formatting(value, text):
    assert fmt.value(value) == text


@pytest.mark.parametrize("seconds, text", [
    (4.25, "4.2 s"), (75, "1 min 15 s"), (3 * 3600 + 5 * 60, "3 h 05 min"),
    (3 * 86400 + 7200, "3 d 2 h"), (None, "—")])
def test_duration(seconds, text):
    assert fmt.duration(seconds) == text


def test_parse_doc_sections_lists_and_code_spans():
    doc = ("x-rule: it detects things.\n\n"
           "What it detects\n    A ``loss`` that\n    wobbles `fast`.\n\n"
           "How to fix\n    - lower the LR\n    - add warm-up, or\n      a schedule\n")
    parsed = fmt.parse_doc(doc)
    assert parsed["summary"] == "it detects things."
    assert parsed["sections"][0] == {"heading": "What it detects", "blocks": [
        {"kind": "p", "items": [[(False, "A "), (True, "loss"), (False, " that wobbles "),
                                 (True, "fast"), (False, ".")]]}]}
    assert parsed["sections"][1]["blocks"] == [{"kind": "ul", "items": [
        [(False, "lower the LR")], [(False, "add warm-up, or a schedule")]]}]


def test_context_keeps_run_strings_raw_for_the_renderer_to_escape():
    ctx = build_context(synthetic_diagnosis(evil=True), plots=False)
    assert ctx["run"]["name"] == f"run {EVIL}"
    assert ("note", EVIL) in ctx["config"]


def test_a_run_that_went_nonfinite_renders_every_plot():
    run = synthetic_run(steps=120)
    sc, tn = run.scalars, run.tensors
    sc.loc[(sc["name"] == "loss") & (sc["step"] >= 90), "value"] = np.nan
    tn.loc[(tn["kind"] == "grad") & (tn["step"] >= 88), "norm"] = np.inf
    tn.loc[(tn["kind"] == "grad") & (tn["step"] >= 88), "inf_count"] = 3
    f = Finding("nonfinite-values", "TL104", "error", "layers.0.weight", (88, 119),
                "The first NaN/Inf appeared at step 88 in the gradient of 'layers.0.weight'.",
                {"step": 88}, "Clip gradients.")
    ctx = build_context(Diagnosis(Run.from_frames(run.meta, scalars=sc, tensors=tn,
                                                  inputs=run.inputs), [f], [], [], rules=SPECS))
    assert ctx["findings"][0]["plot"]["function"] == "nonfinite_values"
    assert ctx["findings"][0]["plot"]["uri"].startswith("data:image/svg+xml")
    assert all(p["uri"] and not p["note"] for p in ctx["overview"]["plots"])


def test_cuda_flags_get_notes_only_when_cuda_was_there():
    from tracelab.reports.context import environment
    flags = {"cudnn_benchmark": True, "tf32_matmul": True, "seed_set": True}
    notes = {k: n for k, _, n in environment({**flags, "cuda_available": True})["reproducibility"]}
    assert notes == {"seed_set": "", "cudnn_benchmark": "cuDNN picks algorithms by timing: "
                     "results may vary", "tf32_matmul": "matmuls run in TF32 (lower precision "
                     "than FP32)"}
    cpu = environment({**flags, "cuda_available": False})["reproducibility"]
    assert all(n == "" for _, _, n in cpu)
