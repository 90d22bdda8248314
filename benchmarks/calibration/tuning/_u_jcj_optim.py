"""jcjohnson/pytorch-examples nn/two_layer_net_optim.py, shrunk: its Sequential(Linear(D_in, H),
ReLU(), Linear(H, D_out)), MSELoss(size_average=False) (a summed loss, reduction="sum"),
Adam(lr=1e-4), zero_grad / backward / step, batches of N=64 (1,000 steps instead of 500). The script fits one fixed
random batch; here each step draws a batch of 64 rows from 2,048 rows whose targets a fixed
random network gives (D_in 100, H 100, D_out 10), and 512 held-out rows are scored every 50
steps, so that learning can be told from memorizing.

`bug` plants one fault (None: the script as published):
- "rmsprop": healthy, RMSprop(lr=1e-4), which the script's comment names beside Adam;
- "sgd": healthy, SGD(lr=1e-4, momentum=0.9), the other optimizer its comment names;
- "scalar": healthy, D_out 1 (one regression target), targets kept (N, 1);
- "scalar-flat": D_out 1 with the targets flattened to (N,) against (N, 1) predictions;
- "lr-1": Adam(lr=1.0) instead of 1e-4.
"""
from __future__ import annotations

import torch

import tracelab
from _u_data import teacher_regression

SOURCE = ("https://github.com/jcjohnson/pytorch-examples/blob/"
          "1dac6d9d457a2adf5391dd7ed8d216e86de2599d/nn/two_layer_net_optim.py")
BUGS = (None, "rmsprop", "sgd", "scalar", "scalar-flat", "lr-1")


def run(run_dir: str, seed: int = 0, bug: str | None = None, steps: int = 1000) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    N, D_in, H = 64, 100, 100
    D_out = 1 if bug in ("scalar", "scalar-flat") else 10
    x_all, y_all = teacher_regression(seed, 2048 + 512, D_in, D_out)
    x, y, x_val, y_val = x_all[:2048], y_all[:2048], x_all[2048:], y_all[2048:]
    if bug == "scalar-flat":
        y, y_val = y.view(-1), y_val.view(-1)
    model = torch.nn.Sequential(
        torch.nn.Linear(D_in, H),
        torch.nn.ReLU(),
        torch.nn.Linear(H, D_out),
    )
    loss_fn = torch.nn.MSELoss(reduction="sum")
    learning_rate = 1.0 if bug == "lr-1" else 1e-4
    if bug == "rmsprop":
        optimizer = torch.optim.RMSprop(model.parameters(), lr=learning_rate)
    elif bug == "sgd":
        optimizer = torch.optim.SGD(model.parameters(), lr=learning_rate, momentum=0.9)
    else:
        optimizer = torch.optim.Adam(model.parameters(), lr=learning_rate)
    with tracelab.Recorder(run_dir, model=model, optimizer=optimizer, loss_fn=loss_fn,
                           config={"lr": learning_rate, "batch_size": N, "D_in": D_in,
                                   "H": H, "D_out": D_out}) as rec:
        for t in range(steps):
            idx = torch.randint(0, len(x), (N,), generator=gen)
            xb, yb = x[idx], y[idx]
            y_pred = model(xb)
            loss = loss_fn(y_pred, yb)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            rec.step(loss=loss, inputs=xb, targets=yb, outputs=y_pred)
            if (t + 1) % 50 == 0:
                with torch.no_grad():
                    out = model(x_val)
                    val = loss_fn(out, y_val).item() / len(x_val)
                    base = ((y_val - y_val.mean(0)) ** 2).sum().item() / len(x_val)
                rec.log("val", metrics={"loss": val, "r2": 1.0 - val / base}, inputs=x_val,
                        targets=y_val, outputs=out)
