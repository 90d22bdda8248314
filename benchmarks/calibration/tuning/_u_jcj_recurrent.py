"""jcjohnson/pytorch-examples recurrent_net.py, shrunk: its RecurrentNet (linear1, then the same
recurrent_linear applied three times with ReLU (clamp(min=0)), linear2: one module called
several times per forward), MSELoss(size_average=False) (a summed loss), SGD(lr=1e-4,
momentum=0.9), model.zero_grad() / backward / step. The script fits one fixed random batch for
500 steps; here each step draws 64 rows from 2,048 rows whose targets a fixed random network
gives (D_in 100 instead of 1000, H 100, D_out 10), 1,000 steps, and 512 held-out rows are
scored every 50 steps.

`bug` plants one fault (None: the script as published):
- "wd": SGD(..., weight_decay=20) (the thread's 0.5 barely shrinks this summed loss's
  weights at lr 1e-4; 20 drives them to zero as the thread describes);
- "clip-1": clip_grad_norm_(model.parameters(), max_norm=1.0) before every step, while the
  summed loss's gradient norm runs in the hundreds;
- "val-in-train": the training rows drawn from all 2,560 rows, the 512 held-out ones included.
"""
from __future__ import annotations

import torch

import tracelab
from _u_data import teacher_regression

SOURCE = ("https://github.com/jcjohnson/pytorch-examples/blob/"
          "d28debf55819d03cf90b19bc0b150c9e32a772f0/recurrent_net.py")
BUGS = (None, "wd", "clip-1", "val-in-train")


class RecurrentNet(torch.nn.Module):
    def __init__(self, D_in, H, D_out):
        super().__init__()
        self.linear1 = torch.nn.Linear(D_in, H)
        self.recurrent_linear = torch.nn.Linear(H, H)
        self.linear2 = torch.nn.Linear(H, D_out)

    def forward(self, x):
        h_relu = self.linear1(x).clamp(min=0)
        for _ in range(3):
            h_relu = self.recurrent_linear(h_relu).clamp(min=0)
        return self.linear2(h_relu)


def run(run_dir: str, seed: int = 0, bug: str | None = None, steps: int = 1000) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    N, D_in, H, D_out = 64, 100, 100, 10
    x_all, y_all = teacher_regression(seed, 2048 + 512, D_in, D_out)
    x_val, y_val = x_all[2048:], y_all[2048:]
    x, y = (x_all, y_all) if bug == "val-in-train" else (x_all[:2048], y_all[:2048])
    model = RecurrentNet(D_in, H, D_out)
    criterion = torch.nn.MSELoss(reduction="sum")
    weight_decay = 20 if bug == "wd" else 0.0
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-4, momentum=0.9,
                                weight_decay=weight_decay)
    with tracelab.Recorder(run_dir, model=model, optimizer=optimizer, loss_fn=criterion,
                           config={"lr": 1e-4, "momentum": 0.9, "batch_size": N,
                                   "weight_decay": weight_decay}) as rec:
        for t in range(steps):
            idx = torch.randint(0, len(x), (N,), generator=gen)
            xb, yb = x[idx], y[idx]
            y_pred = model(xb)
            loss = criterion(y_pred, yb)
            model.zero_grad()
            loss.backward()
            if bug == "clip-1":
                torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
            optimizer.step()
            rec.step(loss=loss, inputs=xb, targets=yb, outputs=y_pred)
            if (t + 1) % 50 == 0:
                with torch.no_grad():
                    out = model(x_val)
                    val = criterion(out, y_val).item() / len(x_val)
                rec.log("val", metrics={"loss": val}, inputs=x_val, targets=y_val, outputs=out)
