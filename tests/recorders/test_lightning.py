"""TracelabCallback for PyTorch Lightning, on a tiny MLP trained for real on the CPU."""
from __future__ import annotations

import warnings

import pytest

torch = pytest.importorskip("torch", reason="the recorder needs torch (extra 'torch')")
L = pytest.importorskip("lightning", reason="PyTorch Lightning is not installed "
                                            "(extra 'lightning')")

from torch import nn  # noqa: E402

import tracelab  # noqa: E402
from tracelab import open_run  # noqa: E402
from tracelab.recorders.lightning import TracelabCallback  # noqa: E402

from _equivalence import assert_equivalent, loud  # noqa: E402

# 16 batches an epoch; Lightning counts val_check_interval within each epoch.
BATCH, VAL_EVERY, EPOCHS = 32, 8, 3
pytestmark = [pytest.mark.filterwarnings("ignore:.*LeafSpec",
                                         "ignore:You defined a `validation_step`"),
              pytest.mark.usefixtures("one_thread")]
CADENCE = {"activation_every": 5, "input_every": 5}


def _data():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(640, 8, generator=g)
    y = (x @ torch.randn(8, 3, generator=g)).argmax(dim=1)
    return x[:512], y[:512], x[512:], y[512:]


class MLP(L.LightningModule):
    def __init__(self, lr: float = 1e-2):
        super().__init__()
        self.save_hyperparameters()
        self.net = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 3))
        self.batch_losses: list[float] = []

    def forward(self, x):
        return self.net(x)

    def training_step(self, batch, batch_idx):
        x, y = batch
        out = self(x)
        loss = nn.functional.cross_entropy(out, y)
        self.batch_losses.append(loss.item())
        self.log("train_acc", (out.argmax(1) == y).float().mean())
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        out = self(x)
        self.log("val_loss", nn.functional.cross_entropy(out, y))
        self.log("val_acc", (out.argmax(1) == y).float().mean())

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.hparams.lr)


def _loaders():
    x, y, xv, yv = _data()
    ds = torch.utils.data.TensorDataset(x, y)
    train = torch.utils.data.DataLoader(ds, batch_size=BATCH, shuffle=True,
                                        generator=torch.Generator().manual_seed(1))
    val = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(xv, yv), batch_size=64)
    return train, val


def _fit(run_dir, **trainer_options):
    torch.manual_seed(0)
    model = MLP()
    train, val = _loaders()
    trainer = L.Trainer(max_epochs=EPOCHS, accelerator="cpu", logger=False,
                        enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, val_check_interval=VAL_EVERY,
                        callbacks=[TracelabCallback(str(run_dir), **CADENCE)], **trainer_options)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Lightning's advice on workers and logging
        trainer.fit(model, train, val)
    return model


def _plain(run_dir):
    """The same model, data and cadences, recorded by a hand-written loop."""
    torch.manual_seed(0)
    model = MLP()
    opt = model.configure_optimizers()
    train, val = _loaders()
    with tracelab.Recorder(str(run_dir), model=model, optimizer=opt, config=dict(model.hparams),
                           **CADENCE) as rec:
        step = 0
        for _ in range(EPOCHS):
            for x, y in rec.iterate(train):
                opt.zero_grad()
                out = model(x)
                loss = nn.functional.cross_entropy(out, y)
                loss.backward()
                opt.step()
                rec.step(loss=loss, inputs=x, targets=y,
                         metrics={"acc": (out.argmax(1) == y).float().mean()})
                step += 1
                if step % VAL_EVERY == 0:
                    model.eval()
                    with torch.no_grad():
                        vx, vy = next(iter(val))
                        out = model(vx)
                        rec.log("val", inputs=vx, targets=vy, metrics={
                            "loss": nn.functional.cross_entropy(out, vy),
                            "acc": (out.argmax(1) == vy).float().mean()})
                    model.train()


def test_lightning_run_reads_like_the_plain_recorder(tmp_path):
    _fit(tmp_path / "lightning")
    _plain(tmp_path / "plain")
    got, want = assert_equivalent(tmp_path / "lightning", tmp_path / "plain")
    assert loud(got) == [] and loud(want) == []
    run = open_run(tmp_path / "lightning")
    steps = len(_loaders()[0]) * EPOCHS
    assert run.step_range == (0, steps - 1)
    assert run.meta["config"]["lr"] == 1e-2
    assert len(run.scalar("loss", "val")) == steps // VAL_EVERY
    assert run.scalar("acc", "train").between(0, 1).all()


def test_accumulated_steps_record_the_mean_unscaled_loss(tmp_path):
    model = _fit(tmp_path / "acc", accumulate_grad_batches=2)
    loss = open_run(tmp_path / "acc").loss()
    pairs = torch.tensor(model.batch_losses).reshape(-1, 2).mean(dim=1)
    assert len(loss) == len(pairs)
    assert loss.to_numpy() == pytest.approx(pairs.numpy(), rel=1e-5)


def test_callback_errors_never_stop_training(tmp_path):
    def broken(batch):
        raise KeyError("no such field")
    torch.manual_seed(0)
    model = MLP()
    train, val = _loaders()
    trainer = L.Trainer(max_epochs=1, accelerator="cpu", logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False,
                        limit_val_batches=0,
                        callbacks=[TracelabCallback(str(tmp_path / "broken"), inputs=broken)])
    with pytest.warns(RuntimeWarning, match="Lightning callback stopped recording"):
        trainer.fit(model, train)
    assert trainer.global_step == len(train)
    status = open_run(tmp_path / "broken").status
    assert status["state"] == "completed" and "no such field" in status["note"]


def test_exception_in_training_marks_the_run_failed(tmp_path):
    class Exploding(MLP):
        def training_step(self, batch, batch_idx):
            if batch_idx == 3:
                raise ValueError("bad batch")
            return super().training_step(batch, batch_idx)
    torch.manual_seed(0)
    train, _ = _loaders()
    trainer = L.Trainer(max_epochs=1, accelerator="cpu", logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False,
                        callbacks=[TracelabCallback(str(tmp_path / "boom"))])
    with pytest.raises(ValueError, match="bad batch"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer.fit(Exploding(), train)
    run = open_run(tmp_path / "boom")
    assert run.status["state"] == "failed"
    assert run.status["exception_type"] == "ValueError"
    assert run.last_step == 2
