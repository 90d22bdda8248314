"""rank-divergence on real replicas (two gloo processes on the CPU): DDP replicas are identical
after every step, so weights that part at any step are named from that step; FSDP2's shards
differ by design and are not compared."""
from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="the recorder needs torch (extra 'torch')")
if not torch.distributed.is_available():
    pytest.skip("this torch build has no torch.distributed", allow_module_level=True)

from tracelab import analyze, open_run  # noqa: E402
from tracelab.core.findings import ERROR  # noqa: E402

from _gloo import launch  # noqa: E402

HERE = Path(__file__).parent
pytestmark = pytest.mark.slow
WORLD = 2


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("replicas")
    procs = launch(HERE / "_replica_worker.py", WORLD, tmp / "init",
                   [str(tmp), "healthy,lr-one-rank,load-rank0"], timeout=120)
    assert [p.returncode for p in procs] == [0, 0], "\n".join(p.stdout[-3000:] for p in procs)
    return tmp


def _divergence(run_dir: Path):
    diagnosis = analyze(run_dir, select=["rank-divergence"])
    assert diagnosis.rules_run == ["rank-divergence"] and not diagnosis.errors
    return diagnosis.findings


def test_identical_replicas_record_identical_weights(runs):
    tn = open_run(runs / "healthy").tensors
    w = tn[tn["kind"] == "weight"].pivot_table(index=["step", "name"], columns="rank",
                                               values="norm")
    assert len(w) and (w[0] == w[1]).all()
    assert _divergence(runs / "healthy") == []


def test_a_learning_rate_lowered_on_one_rank_is_named_at_its_step(runs):
    [f] = _divergence(runs / "lr-one-rank")
    assert (f.severity, f.subject) == (ERROR, "rank 1")
    # The worker records weights every step up to 20, then every 10th: step 30 is the first
    # after the change (the step that applied the lower rate).
    assert f.evidence["first_step"] == 30, f.message
    assert "though the gradients agree" in f.message and "on every rank" in f.fix


def test_weights_loaded_on_one_rank_after_wrapping_differ_from_the_first_step(runs):
    [f] = _divergence(runs / "load-rank0")
    assert f.subject == "rank 1" and f.evidence["first_step"] == 0


def test_fsdp2_shards_are_not_compared(tmp_path):
    pytest.importorskip("torch.distributed.fsdp", reason="this torch has no FSDP2")
    if not hasattr(torch.distributed.fsdp, "fully_shard"):
        pytest.skip("this torch has no torch.distributed.fsdp.fully_shard")
    procs = launch(HERE / "_fsdp_worker.py", WORLD, tmp_path / "init", [str(tmp_path)],
                   timeout=120)
    assert [p.returncode for p in procs] == [0, 0], "\n".join(p.stdout[-3000:] for p in procs)
    run = open_run(tmp_path / "run")
    assert run.meta.get("sharded_parameters")
    assert _divergence(tmp_path / "run") == []
