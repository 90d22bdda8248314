"""Finding and opening runs of any format; the fast run views they rely on at archive scale."""
import numpy as np
import pandas as pd
import pytest

from tracelab.core.errors import TraceError
from tracelab.core.run import Run
from tracelab.core.writer import RunWriter
from tracelab.app.sources import CSV, NATIVE, TENSORBOARD, default_report_path, detect, discover, \
    open_any


def _touch(path, text=""):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_discovery_finds_each_run_once(tmp_path):
    _touch(tmp_path / "native" / "meta.json", "{}")
    _touch(tmp_path / "native" / "tb-inside" / "events.out.tfevents.1.host")  # part of the run
    _touch(tmp_path / "tb" / "events.out.tfevents.1.host")
    _touch(tmp_path / "tb" / "loss_train" / "events.out.tfevents.2.host")  # add_scalars child
    _touch(tmp_path / "lightning_logs" / "version_0" / "metrics.csv", "step,loss\n")
    _touch(tmp_path / "lost-meta" / "scalars" / "r0-000000.parquet")
    _touch(tmp_path / "dataset" / "samples" / "raw.csv")  # a folder named like a table
    _touch(tmp_path / ".cache" / "meta.json", "{}")
    _touch(tmp_path / "out" / "x" / "meta.json", "{}")
    found = {s.path.relative_to(tmp_path).as_posix(): s.format
             for s in discover(tmp_path, exclude=[tmp_path / "out"])}
    assert found == {"native": NATIVE, "tb": TENSORBOARD, "lost-meta": NATIVE,
                     "lightning_logs/version_0/metrics.csv": CSV}
    assert detect(tmp_path / "dataset") is None
    assert detect(tmp_path / "dataset" / "samples" / "raw.csv").format == CSV


def test_open_any_explains_what_it_expected(tmp_path):
    with pytest.raises(TraceError, match="no such file or directory"):
        open_any(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(TraceError, match="nor a TensorBoard log directory"):
        open_any(tmp_path / "empty")
    with pytest.raises(TraceError, match="not a run"):
        open_any(_touch(tmp_path / "notes.txt"))
    _touch(tmp_path / "logs" / "exp1" / "events.out.tfevents.1.host")
    with pytest.raises(TraceError, match="holds runs in subdirectories"):
        open_any(tmp_path / "logs")


def test_reports_of_imported_logs_go_to_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    file = _touch(tmp_path / "logs" / "v3" / "metrics.csv", "step,train_loss\n0,1.0\n1,0.5\n")
    run = open_any(file.parent)
    assert run.name == "v3" and run.loss().tolist() == [1.0, 0.5]
    assert default_report_path(run) == tmp_path / "v3-report.html"
    assert run.source.format == CSV and run.source.imported
    RunWriter(tmp_path / "native").close()
    native = open_any(tmp_path / "native")
    assert native.source.format == NATIVE and not native.source.imported
    assert default_report_path(native) == tmp_path / "native" / "report.html"
    # The run's own origin decides, not what the disk holds now.
    (tmp_path / "native" / "meta.json").unlink()
    assert default_report_path(native) == tmp_path / "native" / "report.html"
    assert default_report_path(Run.from_frames({"name": "mem"})) == tmp_path / "mem-report.html"


def _reference_stat(run, kind, stat):
    tn = run.tensors
    rows = tn[tn["kind"] == kind]
    if "rank" in rows and len(run.ranks) > 1:
        lowest = rows.groupby(["step", "name"])["rank"].transform("min")
        rows = rows[rows["rank"] == lowest]
    # Names in recording order: first seen in step order (rows of one step as written).
    order = list(dict.fromkeys(rows.sort_values("step", kind="stable")["name"]))
    wide = rows.pivot_table(index="step", columns="name", values=stat, aggfunc="last",
                            dropna=False)
    return wide.reindex(columns=order).astype(float)


def _reference_scalar(run, name, split):
    sc = run.scalars
    rows = sc[(sc["name"] == name) & (sc["split"] == split)]
    series = rows.groupby("step", sort=True)["value"].last().astype(float)
    series.name = name
    return series


@pytest.mark.parametrize("ranks", [False, True])
def test_fast_views_equal_the_pandas_reference(ranks):
    """Run.stat and Run.scalar scatter instead of pivoting; duplicates, gaps, NaN and
    all-NaN series must come out as groupby().last() gives them."""
    rng = np.random.default_rng(0)
    n = 600
    tensors = pd.DataFrame({
        "step": rng.integers(0, 40, n), "kind": rng.choice(["grad", "weight"], n),
        "name": rng.choice(["z.w", "a.b", "m.x", "dead"], n),
        "norm": np.where(rng.random(n) < 0.3, np.nan, rng.random(n))})
    tensors.loc[tensors["name"] == "dead", "norm"] = np.nan
    scalars = pd.DataFrame({
        "step": rng.integers(0, 40, n), "split": rng.choice(["train", "val"], n),
        "name": rng.choice(["loss", "acc", "nan"], n),
        "value": np.where(rng.random(n) < 0.3, np.nan, rng.random(n))})
    scalars.loc[scalars["name"] == "nan", "value"] = np.nan
    if ranks:
        tensors["rank"] = rng.integers(0, 2, n)
    run = Run.from_frames(tensors=tensors, scalars=scalars)
    for kind in ("grad", "weight"):
        pd.testing.assert_frame_equal(run.stat(kind, "norm"), _reference_stat(run, kind, "norm"),
                                      check_column_type=False)
        by_step = run.tensors.sort_values("step", kind="stable")
        assert run.names(kind) == list(dict.fromkeys(by_step.loc[by_step["kind"] == kind, "name"]))
    assert run.stat("activation", "norm").shape == (0, 0)
    if not ranks:
        for split in ("train", "val", "test"):
            for name in ("loss", "acc", "nan", "absent"):
                pd.testing.assert_series_equal(run.scalar(name, split),
                                               _reference_scalar(run, name, split),
                                               check_index_type=False)
