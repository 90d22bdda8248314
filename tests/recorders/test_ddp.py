"""Two real processes on the gloo backend (CPU), each rank recording its shard of one run."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="the recorder needs torch (extra 'torch')")
if not torch.distributed.is_available():
    pytest.skip("this torch build has no torch.distributed", allow_module_level=True)

from tracelab import analyze, open_run  # noqa: E402
from tracelab.core.findings import ERROR, WARNING  # noqa: E402

from _gloo import launch  # noqa: E402

WORKER = Path(__file__).with_name("_ddp_worker.py")
pytestmark = pytest.mark.slow
WORLD = 2


def _launch(tmp: Path, scenarios: str) -> list[subprocess.CompletedProcess]:
    return launch(WORKER, WORLD, tmp / "init", [str(tmp), scenarios], timeout=90)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """One 2-process job records every scenario, the dying one last (it ends the job)."""
    tmp = tmp_path_factory.mktemp("ddp")
    rank0, rank1 = _launch(tmp, "healthy,skewed,unsynced,compiled-outside,compiled-inside,dies")
    for name in ("healthy", "skewed", "unsynced", "compiled-outside", "compiled-inside"):
        status = open_run(tmp / name).status
        assert status["state"] == "completed", f"{name}: {status}\n{rank0.stdout[-3000:]}"
    return tmp, rank0, rank1


def _divergence(diagnosis):
    return [(f.severity, f.subject) for f in diagnosis.findings if f.rule == "rank-divergence"]


def test_each_rank_writes_its_shard_with_its_own_meta(runs):
    run = open_run(runs[0] / "healthy")
    assert run.ranks == [0, 1]
    assert run.rank_meta[0]["rank"] == 0 and run.rank_meta[1]["rank"] == 1
    assert run.rank_meta[1]["world_size"] == WORLD
    assert run.status["ranks"] == {0: "completed", 1: "completed"}
    for table in ("scalars", "tensors", "inputs"):
        assert sorted(getattr(run, table)["rank"].unique()) == [0, 1], table
    sc = run.scalars
    train_loss = sc[(sc["name"] == "loss") & (sc["split"] == "train")]
    assert train_loss.groupby("rank")["step"].nunique().tolist() == [60, 60]
    # The model summary names the user's module, not the DDP wrapper's "module." prefix.
    assert run.names("weight")[0] == "0.weight"
    # DDP all-reduces the gradients: the ranks' recorded gradient norms agree.
    tn = run.tensors
    grads = tn[tn["kind"] == "grad"].pivot_table(index=["step", "name"], columns="rank",
                                                 values="norm")
    assert (grads[0] - grads[1]).abs().max() <= 1e-6 * grads[0].abs().max()


@pytest.mark.parametrize("scenario", ["compiled-outside", "compiled-inside"])
def test_compiled_ddp_records_with_the_graphs_of_the_unrecorded_run(runs, scenario):
    """torch.compile(DDP(model)) and DDP(torch.compile(model)): each rank compiles the graphs
    and frames, and breaks the graphs, where the same job without a recorder does (DDP's own
    breaks; a recompile would be one frame more), and records its activations at the cadence,
    under the user's module names."""
    tmp = runs[0]
    for rank in range(WORLD):
        graphs = json.loads((tmp / f"{scenario}-graphs-r{rank}.json").read_text())
        assert graphs["recorded"] == graphs["unrecorded"], (rank, graphs)
    run = open_run(tmp / scenario)
    assert run.meta["recorder"]["compiled"] is True and "absent" not in run.meta
    tn = run.tensors
    acts = tn[tn["kind"] == "activation"]
    assert sorted(acts["rank"].unique()) == [0, 1]
    assert sorted(acts["step"].unique()) == [0, 5, 10]
    assert set(acts["name"]) == {"0", "1", "2"}
    assert sorted(tn.loc[tn["kind"] == "grad", "name"].unique()) == \
        ["0.bias", "0.weight", "2.bias", "2.weight"]


def test_healthy_ranks_stay_quiet(runs):
    diagnosis = analyze(runs[0] / "healthy")
    assert "rank-divergence" in diagnosis.rules_run
    assert _divergence(diagnosis) == []
    loud = [f for f in diagnosis.findings if f.severity in (ERROR, WARNING)]
    assert loud == [], [f.message for f in loud]


def test_skewed_rank_is_flagged(runs):
    found = _divergence(analyze(runs[0] / "skewed"))
    assert found == [(WARNING, "rank 1")]


def test_unsynchronized_replicas_are_an_error(runs):
    found = _divergence(analyze(runs[0] / "unsynced"))
    assert (ERROR, "rank 1") in found


def test_a_rank_that_dies_leaves_the_others_readable(runs):
    tmp, rank0, rank1 = runs
    assert rank1.returncode == 1
    assert rank0.returncode == 3, rank0.stdout[-3000:]  # its next all-reduce found the peer gone
    run = open_run(tmp / "dies")
    assert run.problems == []
    status = run.status
    assert (status["state"], status["rank"]) == ("killed", 1)
    assert status["ranks"] == {0: "failed", 1: "killed"}
    sc = run.scalars
    loss = sc[(sc["name"] == "loss") & (sc["split"] == "train")]
    steps = loss.groupby("rank")["step"].max()
    assert steps[1] >= 20  # everything rank 1 flushed before it died
    assert steps[0] >= 25  # rank 0 recorded on until the collective failed
    aborted = [f for f in analyze(run).findings if f.rule == "run-aborted"]
    assert [(f.severity, f.steps) for f in aborted] == [(ERROR, (steps[1], steps[1]))]
