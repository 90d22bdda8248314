"""hunkim/PyTorchZeroToAll 08_2_dataset_loade_logistic.py, shrunk: its Model (Linear(8, 6),
Linear(6, 4), Linear(4, 1), a sigmoid after each), BCELoss (mean), SGD(lr=0.1), batch 32
shuffled, zero_grad / backward / step. The script's data/diabetes.csv (eight columns already
scaled to [-1, 1], a 0/1 label) is replaced by eight columns of scikit-learn's bundled breast
cancer table (mean radius ... mean concave points, raw units spanning 0.05 to 2,500) scaled to
[-1, 1] with the training rows' minimum and maximum, 400 training rows and 169 held out; 200
epochs instead of 2 (this sigmoid stack at lr 0.1 leaves its plateau after about 100), the
held-out rows scored after each.

`bug` plants one fault (None: the script as published):
- "raw-units": the columns go in unscaled;
- "val-unscaled": the scaling applied to the training rows only, the held-out rows go in raw.
"""
from __future__ import annotations

import numpy as np
import torch
from sklearn.datasets import load_breast_cancer

import tracelab
from _u_data import batches

SOURCE = ("https://github.com/hunkim/PyTorchZeroToAll/blob/"
          "14c40bfbbebe556f28a340424beb1d065e9dc98b/08_2_dataset_loade_logistic.py")
BUGS = (None, "raw-units", "val-unscaled")


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = torch.nn.Linear(8, 6)
        self.l2 = torch.nn.Linear(6, 4)
        self.l3 = torch.nn.Linear(4, 1)
        self.sigmoid = torch.nn.Sigmoid()

    def forward(self, x):
        out1 = self.sigmoid(self.l1(x))
        out2 = self.sigmoid(self.l2(out1))
        return self.sigmoid(self.l3(out2))


def run(run_dir: str, seed: int = 0, bug: str | None = None, epochs: int = 200) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    bunch = load_breast_cancer()
    x_all = bunch.data[:, :8].astype(np.float32)
    y_all = bunch.target.astype(np.float32)[:, None]
    order = np.random.default_rng(seed).permutation(len(x_all))
    x_all, y_all = x_all[order], y_all[order]
    x_tr, y_tr, x_va, y_va = x_all[:400], y_all[:400], x_all[400:], y_all[400:]
    lo, hi = x_tr.min(0), x_tr.max(0)

    def scale(x):
        return 2 * (x - lo) / (hi - lo) - 1

    if bug != "raw-units":
        x_tr = scale(x_tr)
        if bug != "val-unscaled":
            x_va = scale(x_va)
    x_data, y_data = torch.from_numpy(x_tr), torch.from_numpy(y_tr)
    x_val, y_val = torch.from_numpy(x_va), torch.from_numpy(y_va)
    model = Model()
    criterion = torch.nn.BCELoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with tracelab.Recorder(run_dir, model=model, optimizer=optimizer, loss_fn=criterion,
                           config={"lr": 0.1, "batch_size": 32}) as rec:
        for _ in range(epochs):
            for idx in batches(len(x_data), 32, gen):
                inputs, labels = x_data[idx], y_data[idx]
                y_pred = model(inputs)
                loss = criterion(y_pred, labels)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                rec.step(loss=loss, inputs=inputs, targets=labels, outputs=y_pred)
            with torch.no_grad():
                out = model(x_val)
                val_loss = criterion(out, y_val).item()
                acc = ((out > 0.5).float() == y_val).float().mean().item()
            rec.log("val", metrics={"loss": val_loss, "acc": acc}, inputs=x_val, targets=y_val,
                    outputs=out)
