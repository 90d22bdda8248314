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
