"""The rows table: whole rows of tabular batches with their target, each one of the batch's
rows as plain torch holds it; images, several targets and full splits record none."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

torch = pytest.importorskip("torch", reason="the recorder needs torch (extra 'torch')")

import tracelab  # noqa: E402
from tracelab.core.run import open_run  # noqa: E402
from tracelab.recorders.rows import LIMIT, PER_BATCH  # noqa: E402


def _record(path, batches, **kw):
    with tracelab.Recorder(str(path), input_every=1, **kw) as rec:
        for step, (x, y) in enumerate(batches):
            rec.step(loss=torch.tensor(1.0), inputs=x, targets=y)
        rec.log("val", metrics={"loss": 1.0}, inputs=batches[0][0], targets=batches[0][1])
    return open_run(path)


def _wide(rows):
    return rows.pivot_table(index=["split", "row"], columns="feature", values="value")


def test_each_recorded_row_is_a_row_of_its_batch_with_its_target(tmp_path):
    gen = torch.Generator().manual_seed(0)
    batches = [(torch.randn(40, 3, generator=gen), torch.randint(0, 5, (40,), generator=gen))
               for _ in range(4)]
    run = _record(tmp_path / "run", batches, feature_names=["a", "b", "c"])
    rows = run.rows
    assert set(rows["feature"]) == {"a", "b", "c"}
    assert (rows[rows.split == "train"].groupby("step")["row"].nunique() == PER_BATCH).all()
    assert rows[rows.split == "val"]["row"].nunique() == 40  # 4x PER_BATCH, capped by the batch
    for (split, row), part in rows.groupby(["split", "row"]):
        step = int(part["step"].iloc[0])
        x, y = batches[0] if split == "val" else batches[step]
        value = torch.tensor(part.set_index("feature").loc[["a", "b", "c"], "value"].to_numpy(),
                             dtype=torch.float32)
        match = (x == value).all(dim=1).nonzero()
        assert len(match) == 1 and float(y[match[0, 0]]) == part["target"].iloc[0]


def test_a_dataframe_keeps_its_numeric_columns(tmp_path):
    frame = pd.DataFrame({"age": np.arange(30.0), "city": ["x"] * 30, "n": np.arange(30)})
    run = _record(tmp_path / "run", [(frame, torch.arange(30) % 2)])
    assert set(run.rows["feature"]) == {"age", "n"}
    wide = _wide(run.rows)
    assert (wide["age"] == wide["n"]).all()


def test_images_and_several_targets_record_no_rows(tmp_path):
    images = [(torch.rand(8, 1, 4, 4), torch.zeros(8, dtype=torch.long))]
    assert len(_record(tmp_path / "a", images).rows) == 0
    pairs = [(torch.rand(8, 3), (torch.zeros(8), torch.ones(8)))]
    assert len(_record(tmp_path / "b", pairs).rows) == 0


def test_a_split_stops_at_its_limit(tmp_path):
    batches = [(torch.rand(64, 2), torch.zeros(64)) for _ in range(LIMIT // PER_BATCH + 5)]
    rows = _record(tmp_path / "run", batches).rows
    assert rows[rows.split == "train"]["row"].nunique() == LIMIT
