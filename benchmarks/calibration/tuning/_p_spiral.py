"""Atcold/NYU-DLSP20 04-spiral_classification.ipynb, shrunk: its two-layer ReLU net
(Linear(2, 100), ReLU, Linear(100, 3)), CrossEntropyLoss, Adam(lr=1e-3, weight_decay=1e-5),
full-batch steps on the 3000-point spiral (the notebook's own generator), 800 steps instead of
1000; a second spiral drawn with another seed is the validation set.

`bug` (None: the notebook as published):
- "no-zero-grad": optimizer.zero_grad() left out of the loop.
"""
from __future__ import annotations

import torch
from torch import nn

import tracelab
from _p_data import spiral

SOURCE = ("https://github.com/Atcold/NYU-DLSP20/blob/3049c83260ba05700e2ab9b7ed13cdbe5ddba0fd/"
          "04-spiral_classification.ipynb")
BUGS = (None, "no-zero-grad")


def run(run_dir: str, seed: int = 0, bug: str | None = None, steps: int = 800) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    X, y = spiral(seed)
    Xv, yv = spiral(seed + 100)
    D, H, C = 2, 100, 3
    learning_rate, lambda_l2 = 1e-3, 1e-5
    layers = [nn.Linear(D, H), nn.ReLU(), nn.Linear(H, C)]
    model = nn.Sequential(*layers)
    criterion = torch.nn.CrossEntropyLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=learning_rate, weight_decay=lambda_l2)
    with tracelab.Recorder(run_dir, model=model, optimizer=optimizer, loss_fn=criterion,
                           config={"lr": learning_rate, "weight_decay": lambda_l2}) as rec:
        for t in range(steps):
            y_pred = model(X)
            loss = criterion(y_pred, y)
            acc = (y == y_pred.argmax(1)).float().mean().item()
            if bug != "no-zero-grad":
                optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            rec.step(loss=loss, inputs=X, targets=y, outputs=y_pred, metrics={"acc": acc})
            if t % 25 == 24 or t == steps - 1:
                model.eval()
                with torch.no_grad():
                    out = model(Xv)
                    vloss = criterion(out, yv).item()
                    vacc = (out.argmax(1) == yv).float().mean().item()
                rec.log("val", metrics={"loss": vloss, "acc": vacc}, inputs=Xv, targets=yv,
                        outputs=out)
                model.train()
    print(f"    spiral bug={bug}: train acc {acc:.3f} val acc {vacc:.3f}")
