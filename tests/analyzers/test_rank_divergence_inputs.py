"""rank-divergence on input profiles: the rank whose loader prepares its data differently."""
import pytest

torch = pytest.importorskip("torch")  # recorded by real trainings; `make test` runs them

import tracelab
from tracelab.analyzers.rank_divergence import rank_divergence
from tracelab.core.run import open_run


def _record(tmp_path, ranks=2, odd=None, steps=40):
    """Each rank records its own shard, as in a distributed run (same directory, own rank)."""
    recs = [tracelab.Recorder(str(tmp_path / "run"), rank=r, input_every=5)
            for r in range(ranks)]
    g = torch.Generator().manual_seed(0)
    for step in range(steps):
        for r, rec in enumerate(recs):
            x = torch.rand(32, 3, 8, 8, generator=g)  # pixels in [0, 1]
            if r != odd:
                x = (x - 0.5) / 0.29  # normalized
            rec.step(loss=1.0 + 0.05 * float(torch.randn(1, generator=g)), inputs=x)
    for rec in recs:
        rec.close()
    return open_run(tmp_path / "run")


def test_names_the_rank_that_skips_normalization(tmp_path):
    for ranks in (2, 3):
        run = _record(tmp_path / str(ranks), ranks=ranks, odd=1)
        found = [f for f in rank_divergence(run) if "input batches" in f.message]
        assert [f.subject for f in found] == ["rank 1"], [f.message for f in found]
        assert "3 of 3 features" in found[0].message and "preprocessing" in found[0].fix


def test_quiet_when_every_rank_prepares_its_data_alike(tmp_path):
    run = _record(tmp_path, ranks=3)
    assert [f for f in rank_divergence(run) if "input batches" in f.message] == []
