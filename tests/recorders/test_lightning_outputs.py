"""TracelabCallback records what the loss read when training_step and validation_step return it
(a dict with `logits` beside the loss), on a tiny classifier trained for real on the CPU."""
from __future__ import annotations

import json
import warnings

import pytest

torch = pytest.importorskip("torch", reason="the recorder needs torch (extra 'torch')")
L = pytest.importorskip("lightning", reason="PyTorch Lightning is not installed "
                                            "(extra 'lightning')")

from torch import nn  # noqa: E402

from tracelab import open_run  # noqa: E402
from tracelab.core.schema import OUTPUT_MAX, OUTPUT_ROW_SUM, OUTPUT_UNIT_ROWS  # noqa: E402
from tracelab.recorders.lightning import TracelabCallback, returned_outputs  # noqa: E402

pytestmark = [pytest.mark.filterwarnings("ignore:.*LeafSpec"),
              pytest.mark.usefixtures("one_thread")]


class Softmaxed(L.LightningModule):
    """A classifier that gives cross_entropy softmax probabilities (the bug the facts show)."""

    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 3))
        self.maxima: list[float] = []

    def training_step(self, batch, batch_idx):
        x, y = batch
        probs = self.net(x).softmax(1)
        self.maxima.append(float(probs.max()))
        return {"loss": nn.functional.cross_entropy(probs, y), "logits": probs.detach()}

    def validation_step(self, batch, batch_idx):
        x, y = batch
        probs = self.net(x).softmax(1)
        return {"loss": nn.functional.cross_entropy(probs, y), "logits": probs}

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


def test_returned_logits_are_recorded_as_the_outputs(tmp_path):
    torch.manual_seed(0)
    x, y = torch.randn(96, 6), torch.randint(0, 3, (96,))
    train = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=16)
    val = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x[:32], y[:32]),
                                      batch_size=32)
    model = Softmaxed()
    trainer = L.Trainer(max_epochs=1, accelerator="cpu", logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False,
                        num_sanity_val_steps=0,
                        callbacks=[TracelabCallback(str(tmp_path), input_every=2)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Lightning's advice on workers and logging
        trainer.fit(model, train, val)
    run = open_run(tmp_path)
    rows = run.signal(OUTPUT_MAX)
    assert list(rows.index) == [0, 2, 4]
    assert [rows[s] for s in rows.index] == pytest.approx([model.maxima[s] for s in rows.index])
    assert (run.signal(OUTPUT_UNIT_ROWS) == 1).all() and (run.signal(OUTPUT_ROW_SUM) < 1e-5).all()
    assert (run.signal(OUTPUT_UNIT_ROWS, "val") == 1).all()
    meta = json.loads((tmp_path / "meta.json").read_text())
    assert meta["outputs"]["train"]["shape"] == [16, 3]
    assert meta["outputs"]["val"]["shape"] == [32, 3]


def test_a_step_returning_its_loss_alone_gives_no_outputs():
    assert returned_outputs(torch.tensor(1.0)) is None
    assert returned_outputs({"loss": torch.tensor(1.0)}) is None
    logits = torch.zeros(2, 3)
    assert returned_outputs({"loss": torch.tensor(1.0), "preds": logits}) is logits
