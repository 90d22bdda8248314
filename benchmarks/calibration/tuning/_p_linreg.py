"""dataflowr/notebooks Module2/02b_linear_reg.ipynb, shrunk: its torch.nn.Sequential(Linear(2, 1))
started from the notebook's random w_init / b_init, loss_fn = MSELoss(reduction='sum') over the
whole set each step, model.zero_grad(), loss.backward() and the hand-written update
param.data -= learning_rate * param.grad with learning_rate 1e-2 (no optimizer object); data
x = random((30, 2)), y = x . [2, -3] + 1 as in the notebook; 60 steps instead of 10, and 30
fresh points as a validation set.

`bug` (None: the notebook's 30-point run):
- "n300": the same summed loss and learning rate on the notebook's 300-point data (its next
  cell), so every step is ten times larger and the fit diverges.
"""
from __future__ import annotations

import numpy as np
import torch

import tracelab

SOURCE = ("https://github.com/dataflowr/notebooks/blob/043dff0f792a5ae67005ba147f7b9dd5fc66e2a1/"
          "Module2/02b_linear_reg.ipynb")
BUGS = (None, "n300")


def run(run_dir: str, seed: int = 0, bug: str | None = None, steps: int = 60) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    n = 300 if bug == "n300" else 30
    x = rng.random((n, 2))
    y = np.dot(x, [2.0, -3.0]) + 1.0
    xv = rng.random((30, 2))
    yv = np.dot(xv, [2.0, -3.0]) + 1.0
    w_init, b_init = rng.random(2), rng.random(1)
    dtype = torch.FloatTensor
    x_t, y_t = torch.from_numpy(x).type(dtype), torch.from_numpy(y).type(dtype).unsqueeze(1)
    xv_t, yv_t = torch.from_numpy(xv).type(dtype), torch.from_numpy(yv).type(dtype).unsqueeze(1)
    model = torch.nn.Sequential(torch.nn.Linear(2, 1))
    for m in model.children():
        m.weight.data = torch.from_numpy(w_init).type(dtype).unsqueeze(0)
        m.bias.data = torch.from_numpy(b_init).type(dtype)
    loss_fn = torch.nn.MSELoss(reduction="sum")
    learning_rate = 1e-2
    with tracelab.Recorder(run_dir, model=model, loss_fn=loss_fn,
                           config={"learning_rate": learning_rate, "n": n}) as rec:
        model.train()
        for epoch in range(steps):
            y_pred = model(x_t)
            loss = loss_fn(y_pred, y_t)
            model.zero_grad()
            loss.backward()
            with torch.no_grad():
                for param in model.parameters():
                    param.data -= learning_rate * param.grad
            rec.step(loss=loss, inputs=x_t, targets=y_t, outputs=y_pred)
            if epoch % 5 == 4:
                with torch.no_grad():
                    out = model(xv_t)
                    vloss = loss_fn(out, yv_t).item()
                rec.log("val", metrics={"loss": vloss, "mse": vloss / len(xv_t)}, inputs=xv_t,
                        targets=yv_t, outputs=out)
    print(f"    linreg bug={bug}: val mse {vloss / len(xv_t):.4g}")
