"""Findings become diagnoses: one finding per defect, root causes first, symptoms under them."""
import json

import pandas as pd

from tracelab.app.diagnose import diagnose, merge, unique_ids
from tracelab.core.findings import ERROR, INFO, WARNING, Diagnosis, Finding, json_text
from tracelab.core.run import Run

MODULES = [{"path": p, "type": t} for p, t in
           (("0", "Linear"), ("1", "Sigmoid"), ("2", "Linear"), ("3", "ReLU"), ("4", "Linear"))]


def _run() -> Run:
    loss = pd.DataFrame({"step": range(300), "split": "train", "name": "loss",
                         "value": 1.0, "wall_time": 0.0})
    return Run.from_frames({"model": {"modules": MODULES}}, scalars=loss)


def _f(rule, subject, steps, severity=WARNING, evidence=None, fix="fix it", code="TL999"):
    return Finding(rule, code, severity, subject, steps, f"{rule} in {subject}",
                   evidence or {}, fix)


def _collapse(feature, steps=(150, 299)):
    return _f("input-collapse", feature, steps, ERROR, {"int_frac": 1.0},
              "Find the cast to whole numbers.")


def test_one_rules_findings_with_one_cause_and_step_range_merge_into_one():
    [merged] = merge([_collapse(f"f{i}") for i in range(64)])
    assert merged.subject == "64 features" and merged.steps == (150, 299)
    assert merged.message.startswith("64 features show the same at steps 150-299")
    assert merged.evidence["subjects"][:2] == ["f0", "f1"]
    assert merged.evidence["per_subject"]["f63"] == {"int_frac": 1.0,
                                                     "message": "input-collapse in f63"}


def test_findings_at_other_steps_or_with_another_fix_stay_separate():
    other_fix = _f("input-collapse", "f2", (150, 299), ERROR, fix="Something else.")
    found = merge([_collapse("f0"), _collapse("f1", steps=(40, 299)), other_fix])
    assert sorted(f.subject for f in found) == ["f0", "f1", "f2"]
    # Rules not declared mergeable never merge (each loss spike is its own event).
    assert len(merge([_f("loss-spike", "loss", (5, 5)), _f("loss-spike", "loss", (5, 5))])) == 2


def test_ids_are_stable_and_unique():
    twice = [_f("loss-spike", "loss", (5, 9)), _f("loss-spike", "loss", (5, 9))]
    ids = [f.id for f in unique_ids(twice)]
    assert ids == ["TL999:loss:5-9", "TL999:loss:5-9#2"]
    assert [f.id for f in unique_ids(list(twice))] == ids


def test_the_root_cause_comes_first_with_its_symptoms_and_its_own_fix():
    findings = [
        _f("metric-stagnation", "val/acc", (24, 299), ERROR, fix="Check the labels."),
        _f("loss-plateau", "loss", (0, 299), fix="Lower the learning rate."),
        _f("update-ratio", "2.weight", (0, 299), evidence={"worst_ratio": 1e-9},
           fix="Raise the learning rate of these layers."),
        _f("vanishing-gradients", "0.weight", (0, 299), fix="Use ReLU or residuals."),
        _f("overfitting", "test loss", (10, 20)),
    ]
    found, diagnoses = diagnose(_run(), findings)
    first = diagnoses[0]
    assert first.finding.rule == "vanishing-gradients" and first.fix == "Use ReLU or residuals."
    assert [e.rule for e in first.explains] == ["update-ratio", "loss-plateau",
                                                "metric-stagnation"]
    assert ("TL999:0.weight:0-299", "TL999:2.weight:0-299") in [lk[:2] for lk in first.links]
    # Nothing explains the overfitting (another split, other steps): its own diagnosis.
    assert [d.finding.rule for d in diagnoses[1:]] == ["overfitting"]
    assert len(found) == 5 and len({f.id for f in found}) == 5


def test_a_symptom_on_other_layers_or_steps_is_not_explained():
    findings = [_f("vanishing-gradients", "2.weight", (0, 299)),
                _f("update-ratio", "0.weight", (0, 299), evidence={"worst_ratio": 1e-9})]
    _, diagnoses = diagnose(_run(), findings)
    assert len(diagnoses) == 2 and all(not d.explains for d in diagnoses)


def test_a_spike_on_an_unprofiled_batch_says_what_to_record():
    spike = _f("loss-spike", "loss", (150, 160), evidence={"cause": "unprofiled"})
    burst = _f("exploding-gradients", "0.weight", (150, 200))
    _, [d] = diagnose(_run(), [spike, burst])
    assert d.finding.rule == "loss-spike" and [e.rule for e in d.explains] == [
        "exploding-gradients"]
    assert any("step 150" in b and "input_every=1" in b for b in d.basis)
    assert d.level != "high"


def test_json_holds_the_diagnoses_and_every_finding_has_an_id():
    findings = [_f("loss-plateau", "loss", (0, 299)),
                _f("metric-stagnation", "val/acc", (24, 299), INFO)]
    run = _run()
    found, diagnoses = diagnose(run, findings)
    data = json.loads(json_text(Diagnosis(run, found, [], [], diagnoses=diagnoses).to_dict()))
    ids = {f["id"] for f in data["findings"]}
    [d] = data["diagnoses"]
    assert {"rule", "code", "subject", "steps", "message", "fix", "confidence",
            "explains"} <= set(d)
    assert d["rule"] == "loss-plateau" and d["explains"] == ["TL999:val/acc:24-299"]
    assert set(d["explains"]) <= ids and 0 < d["confidence"] <= 1


def test_agreeing_symptoms_name_a_too_high_learning_rate_with_numbers():
    findings = [
        _f("loss-oscillation", "loss", (200, 299), evidence={"p10": 0.9, "p90": 4.7}),
        _f("update-ratio", "4.weight", (0, 299), evidence={"worst_ratio": 0.14},
           fix="Lower the learning rate."),
        _f("dead-units", "3", (150, 290), evidence={"dead_frac": 0.9},
           fix="Lower the LR or use LeakyReLU."),
    ]
    found, [d] = diagnose(_run(), findings)
    assert d.finding.rule == "learning-rate-too-high" and d.finding.code == "TL208"
    assert "0.14 of the weights' norm per step, 140x the usual 1e-3" in d.finding.message
    assert "swinging between 0.9 and 4.7" in d.finding.message
    assert {e.rule for e in d.explains} == {"loss-oscillation", "update-ratio", "dead-units"}
    assert d.fix.startswith("Lower the learning rate") and d.level == "high"
    assert d.finding in found  # it is a finding too, with an id the JSON can name


def test_a_lone_spike_and_its_gradient_burst_do_not_make_a_learning_rate_diagnosis():
    spike = _f("loss-spike", "loss", (150, 160), evidence={"cause": "unprofiled",
                                                          "spikes_total": 1})
    burst = _f("exploding-gradients", "0.weight", (150, 200), evidence={"peak_norm": 40.0})
    dead = _f("dead-units", "3", (10, 290), evidence={"dead_frac": 0.6})
    _, diagnoses = diagnose(_run(), [spike, burst, dead])
    assert "learning-rate-too-high" not in {d.finding.rule for d in diagnoses}
    # A spike blamed on its input batch is no learning-rate symptom at all.
    bad_batch = _f("loss-spike", "loss", (150, 160), evidence={"cause": "input_outlier"})
    oscillation = _f("loss-oscillation", "loss", (200, 299))
    _, diagnoses = diagnose(_run(), [bad_batch, oscillation])
    roots = {d.finding.rule for d in diagnoses}
    assert "learning-rate-too-high" not in roots and "loss-spike" in roots


def test_the_skipped_rules_say_each_kind_of_missing_data_once():
    import io

    from tracelab.core.findings import Skipped, skipped_reasons
    from tracelab.reports.text import print_diagnosis
    skipped = [Skipped("a", "TL1", "not recorded: weight stats"),
               Skipped("b", "TL2", "not recorded: update stats, weight stats"),
               Skipped("c", "TL3", "not recorded: GradScaler scale"),
               Skipped("d", "TL4", "disabled in tracelab.toml")]
    assert skipped_reasons(s.reason for s in skipped) == (
        "not recorded: GradScaler scale, update stats, weight stats; disabled in tracelab.toml")
    out = io.StringIO()
    print_diagnosis(Diagnosis(_run(), [], skipped, []), out)
    line = out.getvalue().splitlines()[-1]
    assert line == ("  skipped 4 rules (not recorded: GradScaler scale, update stats, weight "
                    "stats; disabled in tracelab.toml): a, b, c, d"), line
    assert skipped_reasons([]) == ""
    # A kind of data whose advice holds commas stays one item, wherever it is listed.
    rows = "rows of tabular inputs with their target (step(inputs=..., targets=...))"
    assert skipped_reasons([f"not recorded: {rows}, target profiles (step(targets=...))",
                            f"not recorded: class counts, {rows}"]) == (
        f"not recorded: class counts, {rows}, target profiles (step(targets=...))")


# -- a rule declared in one place ---------------------------------------------------------------
def test_a_new_rule_brings_its_links_merge_noun_and_reading_with_it():
    from tracelab.app.engine import all_rules
    from tracelab.core.causes import explained_by, explains
    from tracelab.core.rules import rule

    seen = []

    @rule(name="stuck-loader", code="TL998", merge="loader",
          links=(explains("loss-plateau", why="the same batch every step teaches nothing new",
                          timing="overlap"),
                 explained_by("input-collapse", why="a collapsed feature makes batches alike",
                              timing="overlap")))
    def stuck_loader(run):
        return []

    @rule(name="spike-reader", code="TL997", reads=("loss-spike", "exploding-gradients"))
    def spike_reader(run, chains):
        seen.extend(chains)
        return [spike_reader.finding(WARNING, "loop", (150, 200), "read.", {}, "fix the loop")]

    rules = [*all_rules(), stuck_loader.spec, spike_reader.spec]
    stuck = [_f("stuck-loader", f"loader {i}", (0, 299)) for i in range(3)]
    collapse = _collapse("hour", (0, 299))
    plateau = _f("loss-plateau", "loss", (0, 299))
    spike = _f("loss-spike", "loss", (150, 160), evidence={"cause": "unprofiled"})
    burst = _f("exploding-gradients", "0.weight", (150, 200))
    found, diagnoses = diagnose(_run(), [*stuck, collapse, plateau, spike, burst], rules)
    merged = next(f for f in found if f.rule == "stuck-loader")
    assert merged.subject == "3 loaders" and len(found) == 6  # and the reader's finding
    root = next(d for d in diagnoses if d.finding.rule == "input-collapse")
    assert [e.rule for e in root.explains] == ["stuck-loader", "loss-plateau"]
    # The reader saw the chain from the spike to the burst, and nothing else.
    assert [(c.root.rule, [e.rule for e in c.explains]) for c in seen] == [
        ("loss-spike", ["exploding-gradients"])]
    assert any(f.rule == "spike-reader" for f in found)
    # Left out of the rule list, a reading rule does not run.
    found, _ = diagnose(_run(), [spike, burst], [stuck_loader.spec, *all_rules()])
    assert not any(f.rule == "spike-reader" for f in found)


def _premised_rules(verdict):
    """The registered rules and two of our own: `sure-cause`, whose fix presumes a fact the
    premise judges as `verdict`, and `weak-cause`, which presumes nothing."""
    from tracelab.app.engine import all_rules
    from tracelab.core.causes import Premise
    from tracelab.core.rules import rule

    judged = []

    def judge(run, finding):
        judged.append(finding.id)
        return verdict

    @rule(name="sure-cause", code="TL996", presumes=(Premise("the loop lacks a call", judge),))
    def sure_cause(run):
        return []

    @rule(name="weak-cause", code="TL995")
    def weak_cause(run):
        return []

    return [*all_rules(), sure_cause.spec, weak_cause.spec], judged


def test_a_diagnosis_whose_fix_a_recorded_fact_contradicts_is_never_first():
    from tracelab.core.causes import contradicted
    rules, judged = _premised_rules(contradicted("the loop calls it on every step"))
    sure = _f("sure-cause", "optimizer", (0, 299), ERROR, fix="Add the call.", code="TL996")
    weak = _f("weak-cause", "loss", (100, 120), INFO, fix="Look at the loss.", code="TL995")
    run = _run()
    found, diagnoses = diagnose(run, [sure, weak], rules)
    assert [d.finding.rule for d in diagnoses] == ["weak-cause", "sure-cause"]
    last = diagnoses[-1]
    assert judged == [sure.id]
    assert last.contradicted == ("the loop calls it on every step",)
    assert "contradicted by the recorded facts: the loop calls it on every step" in last.basis
    assert last.fix.startswith("Probably not this: the loop calls it on every step.")
    assert "Add the call." in last.fix
    # Ranked last by the contradiction itself, not by a confidence it still keeps above the
    # other's.
    assert last.confidence > diagnoses[0].confidence
    assert diagnoses[0].contradicted == () and diagnoses[0].fix == "Look at the loss."
    data = Diagnosis(run, found, [], [], diagnoses=diagnoses).to_dict()
    assert data["diagnoses"][1]["contradicted"] == ["the loop calls it on every step"]


def test_a_premise_the_facts_agree_with_or_cannot_decide_keeps_the_rank():
    from tracelab.core.causes import HOLDS, unknown
    sure = _f("sure-cause", "optimizer", (0, 299), ERROR, fix="Add the call.", code="TL996")
    weak = _f("weak-cause", "loss", (100, 120), INFO, fix="Look at the loss.", code="TL995")
    rules, _ = _premised_rules(HOLDS)
    _, diagnoses = diagnose(_run(), [sure, weak], rules)
    assert [d.finding.rule for d in diagnoses] == ["sure-cause", "weak-cause"]
    assert diagnoses[0].fix == "Add the call." and not diagnoses[0].contradicted
    rules, _ = _premised_rules(unknown("which calls the loop makes",
                                       "pass optimizer= to the Recorder"))
    _, diagnoses = diagnose(_run(), [sure, weak], rules)
    assert [d.finding.rule for d in diagnoses] == ["sure-cause", "weak-cause"]
    assert "not recorded: which calls the loop makes; pass optimizer= to the Recorder" in \
        diagnoses[0].basis
    assert diagnoses[0].fix == "Add the call."
