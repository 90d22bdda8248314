"""FSDP2 (`fully_shard`) on two real gloo processes: each rank records its shards, the reader
merges them into the whole parameters' statistics."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="the recorder needs torch (extra 'torch')")
if not torch.distributed.is_available():
    pytest.skip("this torch build has no torch.distributed", allow_module_level=True)
pytest.importorskip("torch.distributed.fsdp", reason="this torch has no FSDP2")
if not hasattr(torch.distributed.fsdp, "fully_shard"):
    pytest.skip("this torch has no torch.distributed.fsdp.fully_shard", allow_module_level=True)

from tracelab import open_run  # noqa: E402
from tracelab.core.schema import TENSOR_STATS  # noqa: E402

from _gloo import launch  # noqa: E402

WORKER = Path(__file__).with_name("_fsdp_worker.py")
pytestmark = pytest.mark.slow
WORLD = 2
NAMES = ["0.weight", "0.bias", "2.weight", "2.bias", "4.weight", "4.bias"]


@pytest.fixture(scope="module", params=["eager", "compiled"])
def job(tmp_path_factory, request):
    """The job, eager, or as torch.compile of the sharded model; the compiled job compiles
    the graphs, graph breaks and frames of the same job without a recorder (no recompile)."""
    tmp = tmp_path_factory.mktemp(f"fsdp-{request.param}")
    args = [str(tmp)] + (["compiled"] if request.param == "compiled" else [])
    procs = launch(WORKER, WORLD, tmp / "init", args, timeout=120)
    # Before the fix, the first optimizer step killed both ranks with SIGSEGV.
    assert [p.returncode for p in procs] == [0, 0], "\n".join(p.stdout[-3000:] for p in procs)
    if request.param == "compiled":
        for rank in range(WORLD):
            graphs = json.loads((tmp / f"graphs-r{rank}.json").read_text())
            assert graphs["recorded"] == graphs["unrecorded"], (rank, graphs)
        meta = open_run(tmp / "run").meta
        assert meta["recorder"]["compiled"] is True and "absent" not in meta
    return open_run(tmp / "run"), json.loads((tmp / "reference.json").read_text())


def test_fsdp2_trains_and_every_rank_records_its_shards(job):
    run, _ = job
    assert run.status["state"] == "completed"
    assert run.ranks == [0, 1]
    for rank in run.ranks:
        assert run.rank_meta[rank]["sharded_parameters"] == NAMES
    tn = run.tensors
    weights = tn[(tn["kind"] == "weight") & (tn["step"] == 0)]
    numel = weights.pivot_table(index="name", columns="rank", values="numel")
    # Local shards, not the global size: 33 rows split 17 + 16, one row 1 + 0.
    assert numel.loc["0.weight"].tolist() == [17 * 8, 16 * 8]
    assert numel.loc["4.weight"].tolist() == [3, 0]


@pytest.mark.parametrize("kind", ["weight", "grad", "update"])
def test_merged_shards_match_the_full_parameters(job, kind):
    run, reference = job
    assert run.names(kind) == NAMES
    for stat in TENSOR_STATS:
        frame = run.stat(kind, stat)
        for step, by_name in reference[kind].items():
            for name, ref in by_name.items():
                got, want = float(frame.loc[int(step), name]), float(ref[stat])
                if math.isnan(want):
                    assert math.isnan(got), (kind, step, name, stat)
                else:
                    tol = 1e-6 * max(abs(float(ref["abs_mean"])), 1e-12)
                    assert got == pytest.approx(want, rel=1e-5, abs=tol), \
                        (kind, step, name, stat)


def test_activations_stay_the_lowest_ranks(job):
    run, _ = job
    tn = run.tensors
    rank0 = tn[(tn["kind"] == "activation") & (tn["rank"] == 0)]
    merged = run.stat("activation", "norm")
    for _, row in rank0.iterrows():
        assert merged.loc[row["step"], row["name"]] == pytest.approx(row["norm"])
