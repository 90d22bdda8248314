"""The tensors table read a part at a time (tensor_grid): what each pass keeps equals the same
computation over the whole table in pandas."""
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import tracelab
from tracelab.app.cli import main
from tracelab.core import tensor_grid
from tracelab.core.schema import ARROW_SCHEMAS, TENSORS
from tracelab.core.writer import RunWriter

SCHEMA = ARROW_SCHEMAS[TENSORS]


def _rows(steps, kind, names, rng, **fixed) -> pd.DataFrame:
    """One row per step and name; statistics random, `fixed` columns as given."""
    n = len(steps) * len(names)
    df = pd.DataFrame({"step": np.repeat(steps, len(names)), "kind": kind,
                       "name": list(names) * len(steps)})
    for col in SCHEMA.names[3:]:
        df[col] = (None if col == "split"  # the training rows have none
                   else rng.integers(0, 3, n) if SCHEMA.field(col).type == pa.int64()
                   else rng.standard_normal(n))
    for col, value in fixed.items():
        df[col] = value
    return df


def _frame(seed=0) -> pd.DataFrame:
    """Rows as a recorder and an import write them, with what the reading must get right:
    cells written twice (the later non-missing wins), missing values, rows naming no tensor,
    a name first seen later, and steps going back (a resumed run)."""
    rng = np.random.default_rng(seed)
    parts = [_rows(np.arange(0, 30), "weight", ["a.weight", "a.bias", "b.weight"], rng),
             _rows(np.arange(0, 30), "grad", ["a.weight", "a.bias", "b.weight"], rng),
             _rows(np.arange(0, 30, 5), "activation", ["a", "b"], rng),
             _rows(np.arange(20, 40), "grad", ["c.weight", "a.weight"], rng),  # again, later
             _rows(np.arange(10, 15), "grad", ["a.weight"], rng)]  # steps going back
    df = pd.concat(parts, ignore_index=True)
    df.loc[rng.random(len(df)) < 0.1, "norm"] = np.nan
    df.loc[df.index[rng.random(len(df)) < 0.02], "name"] = None
    return df


def _write_parts(path, df, sizes):
    """The rows as Parquet parts of `sizes` rows, and the rest as an Arrow tail."""
    writer = RunWriter(path, {})
    writer.close()
    (path / TENSORS).mkdir()
    table = pa.Table.from_pandas(df, schema=SCHEMA, preserve_index=False)
    begin = 0
    for seq, size in enumerate(sizes):
        pq.write_table(table.slice(begin, size), path / TENSORS / f"r0-{seq:06d}.parquet")
        begin += size
    with pa.ipc.new_stream(path / TENSORS / f"r0-{len(sizes):06d}.arrows", SCHEMA) as tail:
        for batch in table.slice(begin).to_batches(max_chunksize=50):
            tail.write_batch(batch)


def _expected(df: pd.DataFrame, kind: str, stat: str) -> pd.DataFrame:
    """The statistic as a step × name frame: each cell's last non-missing value, names in the
    order a table sorted stably by step first lists them."""
    rows = df.sort_values("step", kind="stable")
    rows = rows[(rows["kind"] == kind) & rows["name"].notna()]
    wide = rows.groupby(["step", "name"], sort=False)[stat].last().unstack("name")
    wide = wide.reindex(index=np.unique(rows["step"]), columns=pd.unique(rows["name"]))
    return wide.astype(float)


@pytest.fixture
def written(tmp_path):
    df = _frame()
    _write_parts(tmp_path / "run", df, sizes=[100, 37, 200])
    return tmp_path / "run", df


@pytest.mark.parametrize("kind", ["weight", "grad", "activation"])
@pytest.mark.parametrize("stat", ["norm", "numel", "nan_count", "min"])
def test_stat_read_in_parts_equals_the_whole_table(written, kind, stat):
    path, df = written
    run = tracelab.open_run(path)
    got = run.stat(kind, stat)
    want = _expected(df, kind, stat)
    assert list(got.columns) == list(want.columns) and list(got.index) == list(want.index)
    np.testing.assert_array_equal(got.to_numpy(), want.to_numpy())
    # And a run in memory gives the same frame from its DataFrame.
    assert tracelab.Run.from_frames(tensors=df).stat(kind, stat).equals(got)


@pytest.mark.parametrize("kind", ["grad", "activation"])
def test_numel_per_name_is_each_tensors_last_recorded(written, kind):
    path, df = written
    rows = df[(df["kind"] == kind) & df["name"].notna()]
    want = rows.groupby("name", sort=False)["numel"].last().astype(float)
    got = tracelab.open_run(path).numel(kind)
    assert list(got.index) == list(pd.unique(rows.sort_values("step", kind="stable")["name"]))
    assert got.to_dict() == want.to_dict()


def test_index_equals_the_whole_table(written):
    path, df = written
    run = tracelab.open_run(path)
    assert not any(name.startswith("tensors/") for name in run.problems)
    idx = run.tensor_index
    assert idx.rows == len(df) and idx.step_range == (0, 39)
    for kind in ("weight", "grad", "activation"):
        rows = df.sort_values("step", kind="stable")
        rows = rows[(rows["kind"] == kind) & rows["name"].notna()]
        assert run.names(kind) == list(pd.unique(rows["name"]))
        assert list(idx.steps[kind]) == sorted(set(rows["step"]))
    assert idx.kinds == {"weight", "grad", "activation"}


def test_nonfinite_tensors_are_the_whole_tables_rows(written):
    path, df = written
    got = tracelab.open_run(path).nonfinite_tensors()
    want = df[(df["nan_count"] > 0) | (df["inf_count"] > 0)].sort_values("step", kind="stable")
    assert len(got) == len(want) > 0
    for col in ("step", "nan_count", "inf_count"):
        assert list(got[col]) == list(want[col])
    assert list(got["name"].fillna("-")) == list(want["name"].fillna("-"))
    assert list(got["kind"]) == list(want["kind"])


def test_finite_stat_blanks_each_recording_that_held_nan_or_inf(written):
    from tracelab.analyzers._dynamics import finite_stat
    path, df = written
    want = _expected(df, "grad", "norm")
    rows = df[(df["kind"] == "grad") & df["name"].notna()
              & ((df["nan_count"] > 0) | (df["inf_count"] > 0))]
    for step, name in zip(rows["step"], rows["name"]):
        want.loc[step, name] = np.nan
    got = finite_stat(tracelab.open_run(path), "grad", "norm")
    assert got.notna().to_numpy().sum() > 0
    np.testing.assert_array_equal(got.to_numpy(), want.to_numpy())


def test_passes_read_what_the_index_saw_of_a_growing_tail(tmp_path):
    df = _frame()
    path = tmp_path / "run"
    _write_parts(path, df.iloc[:200], sizes=[150])
    run = tracelab.open_run(path)
    assert run.tensor_index.rows == 200 < len(df)
    _write_parts(tmp_path / "later", df, sizes=[150])  # the tail has grown since
    tail = "r0-000001.arrows"
    (path / TENSORS / tail).write_bytes((tmp_path / "later" / TENSORS / tail).read_bytes())
    want = _expected(df.iloc[:200], "grad", "norm")
    got = run.stat("grad", "norm")
    assert list(got.index) == list(want.index)
    np.testing.assert_array_equal(got.to_numpy(), want.to_numpy())


def test_a_corrupt_part_is_said_once_and_the_rest_read(written):
    path, df = written
    (path / TENSORS / "r0-000001.parquet").write_bytes(b"PAR1 not a part")
    run = tracelab.open_run(path)
    kept = pd.concat([df.iloc[:100], df.iloc[137:]])
    np.testing.assert_array_equal(run.stat("grad", "norm").to_numpy(),
                                  _expected(kept, "grad", "norm").to_numpy())
    run.load_all()  # the whole table read again says nothing twice
    said = [p for p in run.problems if p.startswith(f"{TENSORS}/r0-000001")]
    assert len(said) == 1 and "unreadable" in said[0]


def test_frame_piece_keeps_missing_names_and_values():
    df = pd.DataFrame({"step": [0, 0, 1], "kind": ["grad", "grad", None],
                       "name": ["w", None, "w"], "norm": [1.0, pd.NA, 3.0]}, dtype=object)
    piece = tensor_grid.frame_piece(df, ("norm",))
    assert piece.column("kind").to_pylist() == ["grad", "grad", None]
    assert piece.column("name").to_pylist() == ["w", None, "w"]
    assert np.isnan(piece.column("norm").to_numpy()[1])


def test_a_run_beyond_memory_is_one_line(written, monkeypatch, capsys):
    path, _ = written

    def no_memory(*args, **kwargs):
        raise pa.ArrowMemoryError("malloc of size 4000000000 failed")

    monkeypatch.setattr("tracelab.core.run_views.grid", no_memory)
    assert main(["analyze", str(path), "--no-html"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(path) in err[0] and "too large" in err[0]
    assert "MiB of tables on disk" in err[0]
    assert "Traceback" not in err[0]
