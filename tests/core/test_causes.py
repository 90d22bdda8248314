"""The causal links the rules declare, walked one by one: each joins a cause to its effect when
the evidence agrees, and not when the steps do not line up or the subject differs."""
import itertools

import pytest

from tracelab.app.diagnose import link_order
from tracelab.app.engine import all_rules
from tracelab.core import causes
from tracelab.core.causes import holds
from tracelab.core.findings import WARNING, Finding

LINKS = link_order(all_rules())
LR_TOO_HIGH = "learning-rate-too-high"

ORDER = ["0", "1", "2", "3", "4"]
# The evidence variants a rule's findings may carry; links with an evidence check need one.
VARIANTS = {
    "loss-spike": [{"cause": "unprofiled"}, {"cause": "grad_spike"},
                   {"cause": "input_outlier"}, {"cause": "lr_increase"}],
    "nonfinite-values": [{"source": "input"}, {"source": "loss"}],
    "update-ratio": [{"worst_ratio": 1e-6}, {"worst_ratio": 0.5},
                     {"worst_ratio": 1e-6, "layers": 5, "of_layers": 5}],
    "loss-input-contract": [{"bound": 1.46}, {"bound": 0.0}],
    "optimizer-step-missing": [{}, {"cause": "other_model"}],
    "missing-zero-grad": [{}, {"share": 1.0}],
    "clip-misuse": [{"kind": "too_small", "update_ratio": 1e-4, "factor": 30.0},
                    {"kind": "after_step"}],
    "param-not-in-optimizer": [{"holds_watched": True}, {"holds_watched": False}],
    "dead-units": [{"dead_frac": 0.9, "dead_frac_first": 0.0},
                   {"dead_frac": 0.9, "dead_frac_first": 0.9}],
    "target-problems": [{}, {"cause": "targets_unaligned", "late_loss_to_constant": 1.0}],
    LR_TOO_HIGH: [{}, {"votes": ["constant", "updates"]}],
    "input-collapse": [{}, {"whole_input": True}],
}
# place -> (cause subject, cause evidence, joining effect subject, differing effect subject)
PLACES = {
    "any": ("loss", {}, "loss", None),
    "feature": ("hour", {}, "hour", "amount"),
    "split": ("val", {"split": "val"}, "val/acc", "test/acc"),
    "same": ("2", {}, "2", "4"),
    "downstream": ("2", {}, "3", "0"),
    "upstream": ("2", {}, "1", "4"),
}


def _finding(rule, subject, steps, evidence):
    return Finding(rule, "TL999", WARNING, subject, steps, f"{rule} on {subject}", evidence)


def _pairs():
    for i, link in enumerate(LINKS):
        for effect in link.effects:
            yield pytest.param(link, effect, id=f"{i}:{link.cause}->{effect}")


def _joined(link, effect_rule, subject=None, steps=(100, 200)):
    """The first cause/effect pair of this link that joins, with the effect at `steps`."""
    c_subject, c_extra, e_subject, _ = PLACES[link.place]
    for c_ev, e_ev in itertools.product(VARIANTS.get(link.cause, [{}]),
                                        VARIANTS.get(effect_rule, [{}])):
        cause = _finding(link.cause, c_subject, (100, 200), {**c_ev, **c_extra})
        effect = _finding(effect_rule, e_subject, (100, 200), e_ev)
        if holds(link, cause, effect, ORDER):
            moved = _finding(effect_rule, subject or e_subject, steps, e_ev)
            return cause, effect, moved
    return None


@pytest.mark.parametrize("link,effect", list(_pairs()))
def test_link_joins_when_the_evidence_agrees(link, effect):
    assert _joined(link, effect) is not None, "no evidence variant makes this link hold"


@pytest.mark.parametrize("link,effect", list(_pairs()))
def test_link_does_not_join_when_the_steps_do_not_line_up(link, effect):
    cause, _, early = _joined(link, effect, steps=(0, 50))  # the effect ended before the cause
    assert not holds(link, cause, early, ORDER)


@pytest.mark.parametrize("link,effect", [p for p in _pairs() if p.values[0].place != "any"])
def test_link_does_not_join_when_the_subject_differs(link, effect):
    other = PLACES[link.place][3]
    cause, _, elsewhere = _joined(link, effect, subject=other)
    assert not holds(link, cause, elsewhere, ORDER)


def test_evidence_checks_keep_input_causes_apart_from_the_learning_rate():
    lr = _finding(LR_TOO_HIGH, "learning rate", (0, 300), {})
    lr_link = next(lk for lk in LINKS if lk.cause == LR_TOO_HIGH)
    bad_batch = _finding("loss-spike", "loss", (150, 160), {"cause": "input_outlier"})
    big_updates = _finding("update-ratio", "0.weight", (0, 300), {"worst_ratio": 0.3})
    tiny_updates = _finding("update-ratio", "0.weight", (0, 300), {"worst_ratio": 1e-7})
    assert not holds(lr_link, lr, bad_batch)
    assert holds(lr_link, lr, big_updates) and not holds(lr_link, lr, tiny_updates)


def test_a_gradient_burst_and_a_loss_spike_explain_each_other_by_their_order():
    spike_link = next(lk for lk in LINKS if lk.cause == "loss-spike")
    burst_link = next(lk for lk in LINKS if lk.cause == "exploding-gradients")
    burst = _finding("exploding-gradients", "0.weight", (150, 300), {})
    unseen = _finding("loss-spike", "loss", (150, 160), {"cause": "unprofiled"})
    blamed = _finding("loss-spike", "loss", (150, 160), {"cause": "grad_spike"})
    assert holds(spike_link, unseen, burst) and not holds(burst_link, burst, unseen)
    assert holds(burst_link, burst, blamed) and not holds(spike_link, blamed, burst)


def test_links_name_known_rules_and_no_rule_explains_itself():
    known = {s.name for s in all_rules()}
    for link in LINKS:
        assert link.cause in known and set(link.effects) <= known, link
        assert link.cause not in link.effects and link.why
        assert link.timing in ("first", "overlap") and link.place in PLACES
    assert all(set(s.reads) <= known for s in all_rules())


def test_merged_subjects_are_what_a_link_compares():
    merged = _finding("input-collapse", "2 features", (150, 299),
                      {"subjects": ["hour", "minute"]})
    mismatch = _finding("train-val-mismatch", "val", (150, 299),
                        {"split": "val", "worst": [{"feature": "minute"}]})
    other = _finding("train-val-mismatch", "val", (150, 299),
                     {"split": "val", "worst": [{"feature": "amount"}]})
    assert causes.link_between(LINKS, merged, mismatch) is not None
    assert causes.link_between(LINKS, merged, other) is None


def test_a_cause_s_links_apply_before_those_of_the_rules_it_explains():
    first = {}
    for i, link in enumerate(LINKS):
        first.setdefault(link.cause, i)
    explains = {}
    for link in LINKS:
        explains.setdefault(link.cause, set()).update(link.effects)

    def reaches(a, b, seen=()):
        return b in explains.get(a, ()) or any(reaches(c, b, (*seen, a))
                                               for c in explains.get(a, ()) if c not in seen)
    for link in LINKS:
        for effect in link.effects:
            if effect in first and not reaches(effect, link.cause):  # not a loop
                assert first[link.cause] < first[effect], (link.cause, effect)
