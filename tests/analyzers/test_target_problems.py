"""target-problems: labels the loss does not expect, sorted data, badly scaled targets."""
import numpy as np
import pandas as pd
from dynamics_frames import model_meta, scalar_rows

from tracelab.core.run import Run
from tracelab.analyzers.target_problems import target_problems


def _targets(batches, *, dtype="int64", split="train", count=32):
    """batches: (min, max, n_unique, mean, std, int_frac) per profiled step."""
    rows = [{"step": 10 * i, "split": split, "feature": "target", "dtype": dtype, "count": count,
             "min": lo, "max": hi, "n_unique": nu, "mean": m, "std": s, "int_frac": f,
             "nan_count": 0, "inf_count": 0}
            for i, (lo, hi, nu, m, s, f) in enumerate(batches)]
    return pd.DataFrame(rows)


def _run(targets, loss=None, meta=None):
    scalars = scalar_rows("loss", loss if loss is not None else np.linspace(1, 0.3, 100))
    return Run.from_frames(meta, targets=targets, scalars=scalars)


def test_minus_one_labels_with_a_negative_loss_are_an_error():
    tg = _targets([(-1, 1, 2, 0.0, 1.0, 1.0)] * 10)
    [f] = target_problems(_run(tg, np.linspace(0.7, -2.0, 100)))
    assert f.code == "TL604" and f.severity.value == "error" and "{-1, 1}" in f.message
    assert "(y + 1) / 2" in f.fix


def test_minus_one_labels_with_a_margin_loss_stay_quiet():
    tg = _targets([(-1, 1, 2, 0.0, 1.0, 1.0)] * 10)
    assert target_problems(_run(tg, np.linspace(1.0, 0.2, 100))) == []


def test_class_indices_past_the_output_layer():
    meta = model_meta([("fc.weight", (16, 20)), ("fc.bias", (16,)), ("out.weight", (10, 16)),
                       ("out.bias", (10,))])
    tg = _targets([(1, 10, 9, 5.5, 2.8, 1.0)] * 10)
    [f] = target_problems(_run(tg, meta=meta))
    assert f.severity.value == "error" and "10 outputs (valid indices 0..9)" in f.message
    ok = _targets([(0, 9, 9, 4.5, 2.8, 1.0)] * 10)
    assert target_problems(_run(ok, meta=meta)) == []


def test_sorted_batches_of_one_or_two_classes():
    tg = _targets([(c, c, 1, c, 0.0, 1.0) for c in (0, 0, 1, 1, 2, 2, 3, 3)] +
                  [(1, 2, 2, 1.5, 0.5, 1.0), (2, 3, 2, 2.5, 0.5, 1.0)])
    [f] = target_problems(_run(tg))
    assert f.severity.value == "warning" and "10 of 10 train batches" in f.message
    assert "shuffle=True" in f.fix


def test_shuffled_multiclass_binary_and_tiny_batches_stay_quiet():
    shuffled = _targets([(0, 3, 4, 1.5, 1.1, 1.0)] * 10)
    binary = _targets([(0, 0, 1, 0.0, 0.0, 1.0), (1, 1, 1, 1.0, 0.0, 1.0)] * 5)
    tiny = _targets([(c, c, 1, c, 0.0, 1.0) for c in (0, 1, 2, 3)] * 3, count=4)
    for tg in (shuffled, binary, tiny):
        assert [f for f in target_problems(_run(tg)) if f.severity.value != "info"] == []


def test_regression_targets_far_from_unit_scale():
    big = _targets([(800, 9000, 32, 5000.0, 1400.0, 0.0)] * 10, dtype="float32")
    [f] = target_problems(_run(big))
    assert f.severity.value == "warning" and "Standardize" in f.fix
    unit = _targets([(-2, 2, 32, 0.1, 0.9, 0.0)] * 10, dtype="float32")
    counts = _targets([(0, 900, 30, 300.0, 200.0, 1.0)] * 10, dtype="float32")  # integer counts
    assert target_problems(_run(unit)) == [] and [
        f for f in target_problems(_run(counts)) if f.severity.value != "info"] == []


def test_imbalance_is_information_only():
    tg = _targets([(0, 1, 2, 0.05, 0.2, 1.0)] * 10)
    [f] = target_problems(_run(tg))
    assert f.severity.value == "info" and "5.0%" in f.message


def _classes(counts, split="train", steps=10):
    """counts: {label: count} per profiled batch, the same for `steps` batches."""
    return pd.DataFrame([{"step": 10 * i, "split": split, "target": "target", "label": k,
                          "count": n} for i in range(steps) for k, n in counts.items()])


def test_multiclass_imbalance_is_information_with_the_val_balance():
    tg = _targets([(0, 4, 5, 1.0, 1.0, 1.0)] * 10, count=100)
    cl = pd.concat([_classes({0: 60, 1: 20, 2: 15, 3: 4, 4: 1}),
                    _classes({0: 50, 1: 20, 2: 15, 3: 10, 4: 5}, split="val", steps=2),
                    _classes({-1: 300}, steps=1)])  # labels outside 0..1023: not a class
    [f] = target_problems(Run.from_frames(None, targets=tg, classes=cl,
                                          scalars=scalar_rows("loss", np.linspace(1, 0.3, 100))))
    assert f.severity.value == "info" and f.evidence["classes"] == 5
    assert "Class 4 of 'target' is 1.0%" in f.message and "class 0 60.0%" in f.message
    assert f.evidence["val_rarest_share"] == 0.05 and "in val: 5.0%" in f.message


def test_balanced_classes_stay_quiet():
    tg = _targets([(0, 4, 5, 2.0, 1.4, 1.0)] * 10, count=100)
    cl = _classes({0: 22, 1: 18, 2: 20, 3: 25, 4: 15})
    assert target_problems(Run.from_frames(None, targets=tg, classes=cl, scalars=scalar_rows(
        "loss", np.linspace(1, 0.3, 100)))) == []


def test_an_image_target_is_judged_by_its_largest_column():
    # A VAE's reconstruction targets: a blank border pixel beside a bright centre one.
    border = _targets([(0, 0.2, 5, 6e-4, 6e-3, 0.9)] * 10, dtype="float32").assign(
        feature="target[0]")
    centre = _targets([(0, 1, 30, 0.4, 0.4, 0.3)] * 10, dtype="float32").assign(
        feature="target[40]")
    assert target_problems(_run(pd.concat([border, centre], ignore_index=True))) == []
    [f] = target_problems(_run(border))  # alone, the tiny column is the target's scale
    assert "far from unit scale" in f.message


def _q_regression(path, *, bootstrap: bool, steps: int = 200):
    """A real tiny Q regression (_contract_runs.q_regression) with rewards of 200 per
    transition: bootstrapped targets rise with the Q-values; fixed ones come from one data set."""
    import pytest
    pytest.importorskip("torch", reason="the tiny trainings need torch (extra 'torch')")
    from _contract_runs import q_regression
    return q_regression(path, reward=200.0, lr=3e-2, bootstrap=bootstrap, steps=steps)


def test_bootstrapped_targets_have_no_data_scale(tmp_path):
    """A data set's targets around 200 are far from unit scale; a DQN's bootstrapped targets
    of the same size grow with its Q-values (toward reward / (1 - gamma)): their median is
    where the run stopped, no scale to standardize."""
    fixed = _q_regression(tmp_path / "fixed", bootstrap=False)  # skipped without torch
    assert [f.evidence["scale"] > 100 for f in target_problems(fixed)
            if "far from unit scale" in f.message] == [True]
    moving = _q_regression(tmp_path / "td", bootstrap=True)
    assert not any("far from unit scale" in f.message for f in target_problems(moving))


def _episodic_td(path, *, bootstrap: bool, steps: int = 500):
    """A tiny Q regression with terminal transitions, as a DQN without a target network on an
    episodic task: a reward of 50 on every transition, a quarter of them terminal (target the
    reward alone), the rest reward + 0.99 * max Q(s') from the network being trained
    (`bootstrap`) or reward + 0.99 * (200 + s'.sum()), a value fixed by the data set."""
    import pytest
    torch = pytest.importorskip("torch", reason="the tiny trainings need torch (extra 'torch')")
    import tracelab
    nn = torch.nn
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    q = nn.Sequential(nn.Linear(4, 32), nn.ReLU(), nn.Linear(32, 2))
    opt = torch.optim.Adam(q.parameters(), lr=3e-3)
    with tracelab.Recorder(str(path), model=q, optimizer=opt, loss_fn=nn.MSELoss()) as rec:
        for _ in range(steps):
            s, s2 = torch.randn(32, 4, generator=g), torch.randn(32, 4, generator=g)
            with torch.no_grad():
                done = torch.rand(32, 1, generator=g) < 0.25
                nxt = q(s2).max(1, keepdim=True)[0] if bootstrap else 200 + s2.sum(1, keepdim=True)
                target = 50.0 + 0.99 * nxt * (~done)
            out = q(s)[:, :1]
            loss = nn.functional.mse_loss(out, target)
            opt.zero_grad()
            loss.backward()
            opt.step()
            rec.step(loss=loss, inputs=s, targets=target, outputs=out)
    return tracelab.open_run(path)


def test_bootstrapped_targets_whose_spread_outgrows_their_rise_have_no_data_scale(tmp_path):
    """Terminal transitions (target the reward alone) spread the bootstrapped targets as far as
    their level rises, so their level's travel is no larger than their spread; their scale
    still moves several times over, which a fixed data set's scale (the same mix of terminal
    transitions, targets from the data) does not."""
    fixed = _episodic_td(tmp_path / "fixed", bootstrap=False)  # skipped without torch
    assert ["far from unit scale" in f.message for f in target_problems(fixed)
            if f.evidence.get("scale", 0) > 100] == [True]
    moving = _episodic_td(tmp_path / "td", bootstrap=True)
    assert not any("far from unit scale" in f.message for f in target_problems(moving))
