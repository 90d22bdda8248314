"""overfitting: validation loss rising while the train loss falls fires and gives the best step."""
import numpy as np
import pytest
from dynamics_frames import make_run, noisy_decay, scalar_rows

from tracelab.analyzers.overfitting import overfitting

STEPS = list(range(24, 1000, 25))  # an evaluation every 25 steps


def _run(val, train=None, split="val"):
    train = noisy_decay(1000, floor=0.01, tau=150, noise=0.1) if train is None else train
    return make_run(scalars=[scalar_rows("loss", train),
                             scalar_rows("loss", val, split=split, steps=STEPS)])


def _u_shaped(best_at=12, seed=0):
    rng = np.random.default_rng(seed)
    x = np.arange(len(STEPS))
    val = 0.5 + 0.004 * (x - best_at) ** 2
    return val * np.exp(0.02 * rng.standard_normal(len(STEPS)))


def test_fires_and_reports_the_best_step():
    [f] = overfitting(_run(_u_shaped()))
    assert f.code == "TL105" and f.severity.value == "warning" and f.subject == "val loss"
    assert abs(f.evidence["best_step"] - STEPS[12]) <= 25
    assert f.steps == (f.evidence["best_step"], STEPS[-1])
    assert f.evidence["final_val_loss"] > 1.1 * f.evidence["best_val_loss"]
    assert f"step {f.evidence['best_step']}" in f.fix


def test_finds_a_validation_split_by_another_name():
    [f] = overfitting(_run(_u_shaped(), split="valid"))
    assert f.subject == "valid loss"


@pytest.mark.parametrize("seed", range(10))
def test_quiet_on_a_noisy_but_flat_validation_loss(seed):
    rng = np.random.default_rng(seed)
    val = 0.4 * np.exp(0.08 * rng.standard_normal(len(STEPS)))
    assert overfitting(_run(val)) == []


def test_quiet_when_validation_stays_below_train():
    train = noisy_decay(1000, start=0.7, floor=0.1, tau=100, noise=0.3)
    val = np.linspace(0.07, 0.082, len(STEPS))  # rising a little, yet below the train loss
    assert overfitting(_run(val, train)) == []


def test_quiet_when_the_train_loss_rises_too():
    train = np.linspace(0.5, 2.0, 1000)
    assert overfitting(_run(_u_shaped(), train)) == []


def test_quiet_when_only_the_last_evaluation_is_high():
    val = np.linspace(0.8, 0.3, len(STEPS))
    val[-1] = 0.6
    assert overfitting(_run(val)) == []


def _classifier(path, *, flip, separation, log_acc=True, steps=300):
    """A real tiny training: an MLP fitted full-batch on 40 rows of two Gaussian classes (a
    share `flip` of their labels flipped), validated every 5 steps on 400 clean rows, logging
    the validation loss and (`log_acc`) accuracy with its targets."""
    torch = pytest.importorskip("torch")
    import tracelab
    from torch import nn
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    centres = torch.randn(2, 30, generator=g) * separation

    def draw(n):
        y = torch.randint(0, 2, (n,), generator=g)
        return centres[y] + torch.randn(n, 30, generator=g), y
    xt, yt = draw(40)
    xv, yv = draw(400)
    yt[:int(flip * 40)] = 1 - yt[:int(flip * 40)]
    model = nn.Sequential(nn.Linear(30, 128), nn.ReLU(), nn.Linear(128, 2))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    fn = nn.CrossEntropyLoss()
    with tracelab.Recorder(str(path), model=model, optimizer=opt, loss_fn=fn) as rec:
        for step in range(steps):
            model.train()
            out = model(xt)
            loss = fn(out, yt)
            opt.zero_grad()
            loss.backward()
            opt.step()
            rec.step(loss=loss, inputs=xt, targets=yt, outputs=out)
            if (step + 1) % 5 == 0:
                model.eval()
                with torch.no_grad():
                    o = model(xv)
                metrics = {"loss": fn(o, yv)}
                if log_acc:
                    metrics["acc"] = (o.argmax(1) == yv).float().mean()
                rec.log("val", metrics=metrics, targets=yv, outputs=o)
    return tracelab.open_run(path)


def test_fires_when_memorized_noisy_labels_cost_validation_accuracy(tmp_path):
    [f] = overfitting(_classifier(tmp_path / "run", flip=0.3, separation=1.0))
    worse = f.evidence["metrics_worse"]["acc"]
    assert worse["best"] - worse["final"] > 0.1


def test_quiet_when_the_loss_rises_but_accuracy_holds_its_best(tmp_path):
    # Overlapping classes, clean labels: the model grows overconfident on the rows it gets
    # wrong, so the validation loss rises (the loss alone fires), while the accuracy stays
    # within its binomial noise over 400 rows of its best.
    assert overfitting(_classifier(tmp_path / "loss", flip=0.0, separation=0.35,
                                   log_acc=False))
    assert overfitting(_classifier(tmp_path / "acc", flip=0.0, separation=0.35)) == []


def _with_acc(val, acc):
    train = noisy_decay(1000, floor=0.01, tau=150, noise=0.1)
    return make_run(scalars=[scalar_rows("loss", train),
                             scalar_rows("loss", val, split="val", steps=STEPS),
                             scalar_rows("acc", acc, split="val", steps=STEPS)])


def test_a_falling_accuracy_keeps_the_finding_and_a_held_one_quiets_it():
    val = _u_shaped()
    x = np.arange(len(STEPS))
    falling = 0.9 - 0.004 * np.maximum(x - 12, 0) ** 1.5 / 3
    assert overfitting(_with_acc(val, falling))
    assert overfitting(_with_acc(val, np.full(len(STEPS), 0.9))) == []
