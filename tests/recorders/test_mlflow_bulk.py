"""MLflow's metric files parsed together (one Arrow CSV parse of the concatenated files) read as
they do file by file, and an imported run's frames as the step-sorted tables they stand for, on
a run written by mlflow's own client."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("mlflow")

from tracelab.recorders.importers.mlflow import (_read_metrics, read_metric_text,  # noqa: E402
                                                 read_mlflow)

_CLIENT = textwrap.dedent(r"""
    import sys
    import numpy as np
    import mlflow
    from mlflow.entities import Metric
    client = mlflow.MlflowClient(f"file://{sys.argv[1]}/mlruns")
    run = client.create_run(client.create_experiment("bulk"), run_name="bulk")
    rng = np.random.default_rng(0)
    rows = [Metric("train/loss", float(v), 1_700_000_000_000 + s, s)
            for s, v in enumerate(rng.random(400))]
    rows += [Metric("val/acc", float(v), 1_700_000_000_500 + s, s * 10)
             for s, v in enumerate(rng.random(40))]
    rows += [Metric("lr", 0.1 / (1 + s), 1_700_000_000_000 + s, s) for s in range(0, 400, 7)]
    rows += [Metric("odd", v, 1_700_000_000_000, s)
             for s, v in enumerate([float("nan"), float("inf"), -1e-300, 3e300])]
    for start in range(0, len(rows), 300):
        client.log_batch(run.info.run_id, metrics=rows[start:start + 300])
    client.set_terminated(run.info.run_id)
""")


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("mlflow-bulk")
    env = {**os.environ, "MLFLOW_ALLOW_FILE_STORE": "true", "NO_PROXY": "*"}
    proc = subprocess.run([sys.executable, "-c", _CLIENT, str(root)], capture_output=True,
                          text=True, env=env, cwd=root, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (found,) = [p.parent for p in (root / "mlruns").glob("*/*/meta.yaml")]
    return found


def test_metric_files_parsed_together_read_as_one_by_one(run_dir):
    problems = []
    together = _read_metrics(run_dir / "metrics", problems)
    assert not problems and sorted(together) == ["lr", "odd", "train/loss", "val/acc"]
    for key, (steps, values, stamps) in together.items():
        alone = read_metric_text((run_dir / "metrics" / key).read_bytes(), key, problems)
        np.testing.assert_array_equal(steps, alone[0])
        np.testing.assert_array_equal(values, alone[1])
        np.testing.assert_array_equal(stamps, alone[2] / 1000.0)
    assert np.isnan(together["odd"][1][0]) and together["odd"][1][3] == 3e300


def test_imported_frames_are_the_step_sorted_tables(run_dir):
    imported = read_mlflow(run_dir)
    run = imported.as_run(run_dir)
    for table, data in imported.tables.items():
        df = data.to_pandas()
        if "step" in df and len(df):
            df = df.sort_values(["step"], kind="stable", ignore_index=True)
        pd.testing.assert_frame_equal(run._tables[table], df, check_exact=True)
    assert len(run.scalars) == 400 + 40 + 58 + 4
    assert run.scalars["step"].is_monotonic_increasing


@pytest.mark.parametrize("step", ["99999999999999999999999", "2.5", "inf", "-7",
                                  str(2**62 + 1)])
def test_a_step_no_trace_holds_is_left_out_and_said_not_wrapped(run_dir, tmp_path, step):
    """The MLflow client takes any int64 step; a trace holds whole steps in 0..2**62. Such a
    row is left out of the import, which says so, and the run reads back whole."""
    import shutil
    from tracelab.app.cli import main
    from tracelab.core.run import open_run
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    with open(copy / "metrics" / "lr", "a") as f:
        f.write(f"1700000000999 0.5 {step}\n")
    assert main(["import", "mlflow", str(copy), str(tmp_path / "imported")]) == 0
    run = open_run(tmp_path / "imported")
    assert len(run.scalar("lr")) == len(read_mlflow(run_dir).as_run(run_dir).scalar("lr"))
    said = [p for p in run.problems if p.startswith("metric 'lr': 1 row with a step")]
    assert len(said) == 1 and "left out" in said[0], run.problems
    assert not any("parquet" in p for p in run.problems)  # nothing the reader had to skip
