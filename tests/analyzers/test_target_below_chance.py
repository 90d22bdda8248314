"""target-problems' contract that a prediction ignoring the input scores at least the rarest
class's share: a validation accuracy below it, on real tiny trainings, is a model that uses its
inputs and learned a mapping the validation targets contradict (train targets not paired with
their inputs as the validation's are)."""
import pytest

from tracelab.analyzers.target_problems import target_problems
from tracelab.core.run import open_run

torch = pytest.importorskip("torch")
nn = torch.nn


def _train(path, *, renumber: bool, steps: int = 150, val_rows: int = 256,
           percent: bool = False, name: str = "acc"):
    """An MLP on 4 Gaussian blobs with Adam; `renumber`: the train labels shifted by one class
    ((y + 1) % 4) while the validation split keeps the true ones. Logs the validation accuracy
    every 10 steps (a fraction, or percent)."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    n = 2048
    centres = torch.randn(4, 16, generator=torch.Generator().manual_seed(99)) * 2
    y = torch.randint(0, 4, (n + val_rows,), generator=g)
    x = centres[y] + torch.randn(n + val_rows, 16, generator=g)
    x, y, xv, yv = x[:n], y[:n], x[n:], y[n:]
    if renumber:
        y = (y + 1) % 4
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
    loss_fn = nn.CrossEntropyLoss()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    import tracelab
    with tracelab.Recorder(str(path), model=model, optimizer=opt, loss_fn=loss_fn) as rec:
        for step in range(steps):
            i = (step * 32) % (n - 32 + 1)
            xb, yb = x[i:i + 32], y[i:i + 32]
            opt.zero_grad()
            out = model(xb)
            loss = loss_fn(out, yb)
            loss.backward()
            opt.step()
            rec.step(loss=loss, inputs=xb, targets=yb, outputs=out)
            if (step + 1) % 10 == 0:
                model.eval()
                with torch.no_grad():
                    pred = model(xv)
                acc = (pred.argmax(1) == yv).float().mean().item() * (100 if percent else 1)
                rec.log("val", metrics={name: acc}, inputs=xv, targets=yv, outputs=pred)
                model.train()
    return open_run(path)


def _found(run):
    return [f for f in target_problems(run)
            if f.evidence.get("cause") == "targets_unaligned"]


@pytest.mark.parametrize("percent", [False, True])
def test_validation_accuracy_below_the_rarest_class_share(tmp_path, percent):
    found = _found(_train(tmp_path / "run", renumber=True, percent=percent))
    assert len(found) == 1
    f = found[0]
    assert f.severity == "error"
    assert f.evidence["split"] == "val"
    assert f.evidence["accuracy_late"] < 0.1 < f.evidence["rarest_share"]
    assert "rarest class" in f.message


def test_aligned_labels_stay_quiet(tmp_path):
    assert _found(_train(tmp_path / "run", renumber=False)) == []


def test_a_metric_that_is_no_accuracy_is_not_judged(tmp_path):
    assert _found(_train(tmp_path / "run", renumber=True, name="f_score")) == []
