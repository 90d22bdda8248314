"""batchnorm-small-batch: BatchNorm in training mode on batches of fewer than 8; real tiny
trainings."""
import pytest

torch = pytest.importorskip("torch", reason="the recorder needs torch (extra 'torch')")
nn = torch.nn

import tracelab  # noqa: E402
from _contract_runs import blobs, train  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")


def _model(norm=nn.BatchNorm1d) -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(16, 32), norm(32), nn.ReLU(), nn.Linear(32, 4))


def _findings(path):
    diagnosis = tracelab.analyze(path)
    assert not diagnosis.errors, diagnosis.errors
    return [f for f in diagnosis.findings if f.rule == "batchnorm-small-batch"]


def test_batchnorm_on_batches_of_four_fires(tmp_path):
    ce = nn.CrossEntropyLoss()
    [f] = _findings(train(tmp_path / "r", _model(), blobs(512), ce, batch=4, steps=40))
    assert f.code == "TL610" and f.severity.value == "warning" and f.subject == "1"
    assert "BatchNorm1d 1 normalized batches of 4 samples" in f.message
    assert f.evidence["input_shape"] == [4, 32] and "GroupNorm" in f.fix


@pytest.mark.parametrize("norm,batch", [(nn.BatchNorm1d, 8), (nn.BatchNorm1d, 32),
                                        (lambda c: nn.GroupNorm(4, c), 4),
                                        (nn.LayerNorm, 4)], ids=["bn8", "bn32", "gn4", "ln4"])
def test_large_batches_and_batch_free_norms_stay_quiet(tmp_path, norm, batch):
    ce = nn.CrossEntropyLoss()
    assert _findings(train(tmp_path / "r", _model(norm), blobs(512), ce, batch=batch,
                           steps=40)) == []


def test_batchnorm_frozen_for_fine_tuning_on_small_batches_stays_quiet(tmp_path):
    model = _model()
    model[1].eval()
    ce = nn.CrossEntropyLoss()
    assert _findings(train(tmp_path / "r", model, blobs(512), ce, batch=4, steps=40)) == []


def test_odd_recorded_shapes_leave_the_rule_quiet_without_raising(tmp_path):
    import json
    ce = nn.CrossEntropyLoss()
    path = train(tmp_path / "r", _model(), blobs(512), ce, batch=4, steps=40)
    meta = json.loads((path / "meta.json").read_text())
    for odd in ({"1": [{"inputs": [["4", 32]]}, {"inputs": 4}, {"inputs": [[4]]}]},
                {"1": "x"}, ["1"], 4):
        meta["module_shapes"] = odd
        (path / "meta.json").write_text(json.dumps(meta))
        assert _findings(path) == []
