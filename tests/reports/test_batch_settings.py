"""The settings-and-root-causes summary of the batch index: what it says, and when it says
nothing (too few runs on a side, no difference, a cause of one run)."""
from tracelab.reports.batch_settings import associations


def _runs(rows):
    return [dict(zip(("lr", "data_version", "root_cause"), r)) for r in rows]


def sweep(high: int = 10, low: int = 20, hits_high: int = 9, hits_low: int = 0):
    rows = [(0.1 * (1 + i % 3), "2024-05", "loss-oscillation" if i < hits_high else None)
            for i in range(high)]
    rows += [(0.001 * (1 + i % 5), "2024-05", "loss-oscillation" if i < hits_low else None)
             for i in range(low)]
    return _runs(rows)


def test_a_numeric_split_with_counts():
    found = associations(sweep(), ["lr", "data_version"])
    assert [a.text for a in found] == [
        "loss-oscillation in 9 of 10 runs with lr ≥ 0.1, in 0 of 20 below"]
    assert found[0].gap == 0.9 and found[0].runs == 30


def test_a_text_value_only_in_some_runs():
    rows = _runs([(0.01, "2024-06", "input-collapse")] * 4 + [(0.01, "2024-05", None)] * 12)
    assert [a.text for a in associations(rows, ["lr", "data_version"])] == [
        "input-collapse only in runs with data_version = 2024-06 (4 of 4; 0 of 12 others)"]


def test_quiet_when_a_side_is_too_small():
    rows = _runs([(1.0, "x", "loss-oscillation")] * 2 + [(0.01, "x", None)] * 20)
    assert associations(rows, ["lr"]) == []  # 2 runs above any threshold: below min_side
    assert associations(rows, ["lr"], min_side=2) != []


def test_quiet_when_the_setting_does_not_separate_the_runs():
    assert associations(sweep(hits_high=5, hits_low=10), ["lr"]) == []  # 50% on both sides


def test_quiet_for_a_cause_of_one_run_and_for_settings_nobody_set():
    rows = _runs([(0.1, None, "dead-units")] + [(0.001, None, None)] * 9)
    assert associations(rows, ["lr", "data_version"]) == []
