"""benchmarks/calibrate_rules.py: the scoring of hand-made diagnoses, the command line on
recorded folders, and (slow) the whole path on a small set of real tiny trainings."""
from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import pytest

from _benchmarks import load
from tracelab.core.findings import Diagnosis, Finding, RootCause, RuleError

cal = load("calibrate_rules")
CAUSES = cal.load_causes()
BENCHMARKS = Path(cal.__file__).resolve().parent


def finding(rule: str, severity: str = "warning") -> Finding:
    return Finding(rule, "TL999", severity, "layer", (10, 20), f"{rule} fired")


def diagnosis(*roots: RootCause, errors=()) -> Diagnosis:
    found = [f for d in roots for f in (d.finding, *d.explains)]
    return Diagnosis(run=None, findings=found, skipped=[], errors=list(errors),
                     diagnoses=list(roots))


def label(cause=None, family="cnn") -> dict:
    return {"family": family, "healthy": cause is None, "cause": cause, "optimizer": "sgd"}


def scored(cause, *roots, family="cnn", errors=()):
    return cal.score("r", label(cause, family), diagnosis(*roots, errors=errors), CAUSES)


# -- scoring on hand-made diagnoses ---------------------------------------------------------------
def test_the_first_diagnosis_at_warning_or_above_is_the_one_judged():
    r = scored("lr-too-high", RootCause(finding("loss-plateau", "info")),
               RootCause(finding("update-ratio")), RootCause(finding("dead-units", "error")))
    assert (r.first, r.rank, r.top1, r.found, r.verdict) == ("update-ratio", 1, True, True, "hit")


def test_a_cause_ranked_second_counts_for_recall_only():
    r = scored("dead-units", RootCause(finding("loss-spike")), RootCause(finding("dead-units")))
    assert (r.first, r.rank, r.top1, r.found, r.verdict) == \
        ("loss-spike", 2, False, True, "found #2")


def test_a_cause_explained_by_another_diagnosis_counts_for_recall_only():
    r = scored("dead-units", RootCause(finding("loss-spike"), explains=(finding("dead-units"),)))
    assert (r.rank, r.named, r.top1, r.found, r.verdict) == \
        (None, True, False, True, "found (explained)")


def test_a_cause_named_at_info_only_is_a_miss():
    r = scored("dead-units", RootCause(finding("dead-units", "info")))
    assert (r.first, r.found, r.alarms, r.verdict) == (None, False, (), "miss")


def test_a_rule_not_registered_yet_is_a_miss_not_an_error():
    r = scored("clip-misuse", RootCause(finding("update-ratio")))
    assert (r.first, r.found, r.verdict) == ("update-ratio", False, "miss")


def test_a_healthy_run_with_a_warning_is_a_false_alarm_listing_its_rules():
    quiet = scored(None, RootCause(finding("loss-plateau", "info")))
    loud = scored(None, RootCause(finding("loss-spike"), explains=(finding("dead-units"),)),
                  errors=[RuleError("overfitting", "TL1", "KeyError: 'val'")])
    assert (quiet.false_alarm, quiet.verdict, quiet.top1, quiet.found) == (False, "ok", False,
                                                                            False)
    assert (loud.false_alarm, loud.verdict, loud.alarms) == (True, "FALSE ALARM",
                                                             ("dead-units", "loss-spike"))
    assert loud.rule_errors == ("overfitting: KeyError: 'val'",)


def test_a_run_that_was_not_analyzed_counts_against_the_figures():
    faulty = cal.unanalyzed("f", label("dead-units"), "TraceError: no steps")
    healthy = cal.unanalyzed("h", label(None), "TraceError: no steps")
    assert (faulty.top1, faulty.found, faulty.verdict) == (False, False, "miss")
    assert (healthy.false_alarm, healthy.verdict) == (True, "FALSE ALARM")


def test_the_summary_counts_per_family_and_overall():
    runs = [scored("dead-units", RootCause(finding("dead-units")), family="mlp"),         # hit
            scored("dead-units", RootCause(finding("loss-spike")),
                   RootCause(finding("dead-units")), family="mlp"),                       # recall
            scored("nonfinite-values", RootCause(finding("loss-spike")), family="rnn"),   # miss
            scored(None, family="mlp"),                                                   # ok
            scored(None, RootCause(finding("overfitting")), family="rnn"),                # alarm
            scored(None, RootCause(finding("overfitting", "info")), family="rnn")]        # ok
    summary = cal.summarize(runs)
    assert list(summary) == ["mlp", "rnn", "overall"]
    assert summary["mlp"] == {"faulty": 2, "top1": 1, "recall": 2, "healthy": 1,
                              "false_alarms": 0}
    assert summary["rnn"] == {"faulty": 1, "top1": 0, "recall": 0, "healthy": 2,
                              "false_alarms": 1}
    assert summary["overall"] == {"faulty": 3, "top1": 1, "recall": 2, "healthy": 3,
                                  "false_alarms": 1}
    assert [cal.fraction(1, 3), cal.fraction(0, 0)] == ["1/3 (33 %)", "-"]


def test_labels_are_checked_before_scoring():
    labels = {"a": label("no-such-cause"), "b": {**label(None), "cause": "dead-units"},
              "c": {"family": "cnn"}, "d": label("dead-units")}
    problems = cal.check_labels(labels, CAUSES)
    assert len(problems) == 3
    assert problems[0].startswith("a: unknown cause key 'no-such-cause'")
    assert problems[1].startswith("b: healthy is True but cause is 'dead-units'")
    assert problems[2] == "c: LABEL lacks healthy, cause"


def test_the_cause_map_is_the_table_of_causes_md():
    table = {}
    for line in (BENCHMARKS / "calibration" / "CAUSES.md").read_text().splitlines():
        m = re.fullmatch(r"\| ([a-z0-9-]+) \| .* \| ([a-z0-9, -]+) \|", line)
        if m and m.group(1) != "key":
            table[m.group(1)] = tuple(r.strip() for r in m.group(2).split(","))
    assert table and CAUSES == table


# -- the command line on recorded folders (no training) -------------------------------------------
def recorded(folder: Path, labels: dict) -> Path:
    folder.mkdir()
    (folder / "labels.json").write_text(json.dumps(labels))
    return folder


def test_recorded_runs_are_scored_without_recording_and_only_filters(tmp_path, capsys):
    runs = recorded(tmp_path / "runs", {"a01": label("dead-units"), "a02": label(None)})
    out = tmp_path / "scores.json"
    code = cal.main(["--set", "tuning", "--runs", str(runs), "--only", "a01", "--json",
                     str(out), "--root", str(tmp_path / "nowhere")])
    assert code == 1  # the run folder is absent: not analyzed
    result = json.loads(out.read_text())["sets"]["tuning"]
    assert [r["name"] for r in result["runs"]] == ["a01"]
    assert result["runs"][0]["verdict"] == "miss" and "no run recorded" in \
        result["runs"][0]["error"]
    assert result["summary"]["overall"] == {"faulty": 1, "top1": 0, "recall": 0, "healthy": 0,
                                            "false_alarms": 0}
    assert "SEALED" not in capsys.readouterr().out


@pytest.mark.parametrize("argv,message", [
    (["--set", "tuning"], "no such runner"),
    (["--set", "tuning", "--set", "sealed", "--runs", "DIR"], "name the set: --runs SET=DIR"),
    (["--set", "tuning", "--runs", "sealed=DIR"], "sealed is not among the sets given"),
    (["--set", "tuning", "--runs", "RUNS", "--only", "z99"], "no scenario named z99"),
    (["--set", "tuning", "--runs", "BAD"], "unknown cause key 'lr-way-too-high'"),
])
def test_bad_input_is_one_line(tmp_path, capsys, argv, message):
    recorded(tmp_path / "RUNS", {"a01": label(None)})
    recorded(tmp_path / "BAD", {"a01": label("lr-way-too-high")})
    argv = [str(tmp_path / a) if a in ("RUNS", "BAD") else a for a in argv]
    assert cal.main([*argv, "--root", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and err.count("\n") == 1


def test_the_sealed_set_is_announced_loudly(tmp_path, capsys):
    runs = recorded(tmp_path / "runs", {"s01": label(None)})
    cal.main(["--set", "sealed", "--runs", str(runs), "--root", str(tmp_path)])
    assert capsys.readouterr().out.count("SEALED SET: it is scored once") == 2


# -- the whole path on real tiny trainings --------------------------------------------------------
RUNNER = '''
import json, sys
from pathlib import Path
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
out = Path(sys.argv[1])
only = sys.argv[sys.argv.index("--only") + 1:] if "--only" in sys.argv else None
labels = {}
for name in ("f01", "h01"):
    if only is None or name in only:
        module = __import__(name)
        labels[name] = module.LABEL
        module.run(str(out / name), seed=0)
(out / "labels.json").write_text(json.dumps(labels))
'''

SCENARIO = '''
import sys
from pathlib import Path
sys.path.insert(0, {benchmarks!r})
from calibration_synthetic import train
LABEL = {{"family": "mlp", "optimizer": "adam", "loss_reduction": "mean",
          "healthy": {healthy}, "cause": {cause!r}, "source": "synthetic", "bug_source": None}}
def run(run_dir, seed=0):
    train({scenario!r}, Path(run_dir), steps=120, seed=seed)
'''


@pytest.mark.slow
def test_a_small_set_is_recorded_analyzed_and_scored(tmp_path):
    import tracelab
    from tracelab.core.findings import Severity
    pytest.importorskip("torch", reason="the recorder needs torch (extra 'torch')")
    folder = tmp_path / "sets" / "tuning"
    folder.mkdir(parents=True)
    (folder / "run_all.py").write_text(textwrap.dedent(RUNNER))
    for name, scenario, cause in [("h01", "mlp-adam", None),
                                  ("f01", "mlp-adam-nan-input", "nonfinite-values")]:
        (folder / f"{name}.py").write_text(SCENARIO.format(
            benchmarks=str(BENCHMARKS), healthy=cause is None, cause=cause, scenario=scenario))
    runs, out = tmp_path / "runs", tmp_path / "scores.json"
    argv = ["--set", "tuning", "--root", str(tmp_path / "sets"), "--runs", str(runs),
            "--json", str(out)]
    assert cal.main(argv) == 0
    result = json.loads(out.read_text())["sets"]["tuning"]
    by_name = {r["name"]: r for r in result["runs"]}
    assert sorted(by_name) == ["f01", "h01"] and result["runs_dir"] == str(runs)

    # Each run's score is what the engine says of it, read here independently.
    for name, r in by_name.items():
        d = tracelab.analyze(runs / name)
        ranked = [x.finding.rule for x in d.diagnoses if x.worst is not Severity.INFO]
        alarms = sorted({f.rule for f in d.findings if f.severity is not Severity.INFO})
        assert (r["first"], r["alarms"]) == ((ranked or [None])[0], alarms)
    faulty, healthy = by_name["f01"], by_name["h01"]
    assert (faulty["first"], faulty["verdict"], faulty["top1"]) == ("nonfinite-values", "hit",
                                                                     True)
    assert healthy["false_alarm"] == bool(healthy["alarms"])
    assert result["summary"]["mlp"] == result["summary"]["overall"] == {
        "faulty": 1, "top1": 1, "recall": 1, "healthy": 1,
        "false_alarms": int(healthy["false_alarm"])}

    # The recorded folder is scored again as it is; --only keeps one run.
    assert cal.main([*argv, "--only", "h01"]) == 0
    again = json.loads(out.read_text())["sets"]["tuning"]
    assert [r["name"] for r in again["runs"]] == ["h01"] and again["runs"][0] == healthy
