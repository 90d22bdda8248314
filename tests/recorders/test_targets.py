"""Target profiles (the targets table) against plain torch."""
import pytest
import torch

import tracelab
from tracelab.core.run import open_run


@pytest.mark.parametrize("make", [lambda: torch.randint(0, 7, (40,)),
                                  lambda: 100 * torch.randn(40, 1) + 3,
                                  lambda: torch.rand(40) > 0.3])
def test_targets_are_profiled_at_the_input_cadence_and_in_log(tmp_path, make):
    torch.manual_seed(0)
    seen = {}
    with tracelab.Recorder(str(tmp_path / "run"), input_every=3) as rec:
        for step in range(7):
            y = make()
            seen[step] = y
            rec.step(loss=1.0, targets=y)
        y_val = make()
        rec.log("val", targets=y_val)
    tg = open_run(tmp_path / "run").targets
    assert list(tg.loc[tg["split"] == "train", "step"]) == [0, 3, 6]
    assert list(tg["feature"].unique()) == ["target"]
    for (_, row), y in zip(tg.iterrows(), [seen[0], seen[3], seen[6], y_val]):
        ref = y.double()
        assert row["count"] == y.numel() and row["n_unique"] == len(torch.unique(y))
        assert row["min"] == pytest.approx(float(ref.min()))
        assert row["max"] == pytest.approx(float(ref.max()))
        assert row["mean"] == pytest.approx(float(ref.mean()), rel=1e-6, abs=1e-9)
        assert row["std"] == pytest.approx(float(ref.std()), rel=1e-5)
        assert row["int_frac"] == pytest.approx(float((ref == ref.round()).double().mean()))
    # Targets never enter the input samples or the inputs table.
    run = open_run(tmp_path / "run")
    assert run.inputs.empty and run.samples.empty


def test_class_counts_of_integer_targets_match_bincount(tmp_path):
    torch.manual_seed(0)
    seen = {}
    with tracelab.Recorder(str(tmp_path / "run"), input_every=2) as rec:
        for step in range(5):
            y = torch.randint(0, 5, (64,))
            y[:3] = torch.tensor([-1, 2000, 4])  # outside 0..1023: counted together
            seen[step] = y
            rec.step(loss=1.0, targets={"label": y, "score": torch.randn(64)})
        rec.log("val", targets={"label": torch.ones(10, dtype=torch.long)})
    cl = open_run(tmp_path / "run").classes
    assert set(cl["target"]) == {"label"}  # float targets have no classes
    for step in (0, 2, 4):
        rows = cl[(cl["step"] == step) & (cl["split"] == "train")].set_index("label")["count"]
        inside = seen[step][(seen[step] >= 0) & (seen[step] < 1024)]
        want = {int(k): int(v) for k, v in zip(*torch.unique(inside, return_counts=True))}
        assert rows.drop(-1).to_dict() == want and rows[-1] == 2
    val = cl[cl["split"] == "val"]
    assert list(val["label"]) == [1] and list(val["count"]) == [10]


@pytest.mark.parametrize("make", [lambda: torch.randint(-3, 1500, (500,)),
                                  lambda: torch.rand(7, 9) > 0.5,
                                  lambda: torch.randint(0, 255, (33,), dtype=torch.uint8)])
def test_device_counts_equal_the_host_counts(make):
    from tracelab.recorders.classes import device_counts, host_counts
    x = make()
    assert device_counts(x).numpy().astype(int).tolist() == host_counts(x).tolist()
