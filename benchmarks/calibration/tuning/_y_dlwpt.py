"""deep-learning-with-pytorch/dlwpt-code, the thermometer of chapters 5 and 6 (the book's own
eleven readings t_c in Celsius and t_u in unknown units, inlined in the notebooks), shrunk:

- `run_manual`: p1ch5/2_autograd.ipynb, the linear model w * t_u + b with params requiring grad,
  the mean squared difference, a hand-written update (params -= lr * params.grad under
  no_grad, params.grad.zero_() first), lr 1e-2 on t_un = 0.1 * t_u; 2000 epochs instead of 5000.
- `run_seq`: p1ch6/1_neural_networks.ipynb, seq_model = Linear(1, 13) - Tanh - Linear(13, 1),
  nn.MSELoss(), optim.SGD(lr=1e-3), full batch on the 9 shuffled training readings, the 2
  validation readings evaluated every epoch (logged every 10th here); 3000 epochs instead of
  5000.

`bug` plants one fault (None: the notebooks as published):
- run_manual "raw-t_u": the raw t_u (20-80) goes in instead of t_un, at the same lr;
- run_seq "t_c-1d": t_c kept 1-D (no unsqueeze(1)), so the (N, 1) prediction broadcasts
  against the (N,) target in nn.MSELoss.
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.optim as optim

import tracelab

SOURCE_MANUAL = ("https://github.com/deep-learning-with-pytorch/dlwpt-code/blob/"
                 "d6c0210143daa133bbdeddaffc8993b1e17b5174/p1ch5/2_autograd.ipynb")
SOURCE_SEQ = ("https://github.com/deep-learning-with-pytorch/dlwpt-code/blob/"
              "d6c0210143daa133bbdeddaffc8993b1e17b5174/p1ch6/1_neural_networks.ipynb")
T_C = [0.5, 14.0, 15.0, 28.0, 11.0, 8.0, 3.0, -4.0, 6.0, 13.0, 21.0]
T_U = [35.7, 55.9, 58.2, 81.9, 56.3, 48.9, 33.9, 21.8, 48.4, 60.4, 68.4]


def model(t_u, w, b):
    return w * t_u + b


def loss_fn(t_p, t_c):
    squared_diffs = (t_p - t_c) ** 2
    return squared_diffs.mean()


def run_manual(run_dir: str, seed: int = 0, bug: str | None = None,
               n_epochs: int = 2000) -> None:
    assert bug in (None, "raw-t_u"), bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    t_c, t_u = torch.tensor(T_C), torch.tensor(T_U)
    t_un = t_u if bug == "raw-t_u" else 0.1 * t_u
    learning_rate = 1e-2
    params = torch.tensor([1.0, 0.0], requires_grad=True)
    with tracelab.Recorder(run_dir, config={"lr": learning_rate, "n_epochs": n_epochs}) as rec:
        for epoch in range(1, n_epochs + 1):
            if params.grad is not None:
                params.grad.zero_()
            t_p = model(t_un, *params)
            loss = loss_fn(t_p, t_c)
            loss.backward()
            with torch.no_grad():
                params -= learning_rate * params.grad
            rec.step(loss=loss, inputs=t_un, targets=t_c, outputs=t_p)


def run_seq(run_dir: str, seed: int = 0, bug: str | None = None, n_epochs: int = 3000) -> None:
    assert bug in (None, "t_c-1d"), bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    t_c = torch.tensor(T_C)
    if bug != "t_c-1d":
        t_c = t_c.unsqueeze(1)
    t_u = torch.tensor(T_U).unsqueeze(1)
    n_samples = t_u.shape[0]
    n_val = int(0.2 * n_samples)
    shuffled_indices = torch.randperm(n_samples)
    train_indices, val_indices = shuffled_indices[:-n_val], shuffled_indices[-n_val:]
    t_un_train, t_un_val = 0.1 * t_u[train_indices], 0.1 * t_u[val_indices]
    t_c_train, t_c_val = t_c[train_indices], t_c[val_indices]
    seq_model = nn.Sequential(nn.Linear(1, 13), nn.Tanh(), nn.Linear(13, 1))
    optimizer = optim.SGD(seq_model.parameters(), lr=1e-3)
    mse = nn.MSELoss()
    with tracelab.Recorder(run_dir, model=seq_model, optimizer=optimizer, loss_fn=mse,
                           config={"lr": 1e-3, "n_epochs": n_epochs}) as rec:
        for epoch in range(1, n_epochs + 1):
            t_p_train = seq_model(t_un_train)
            loss_train = mse(t_p_train, t_c_train)
            t_p_val = seq_model(t_un_val)
            loss_val = mse(t_p_val, t_c_val)
            optimizer.zero_grad()
            loss_train.backward()
            optimizer.step()
            rec.step(loss=loss_train, inputs=t_un_train, targets=t_c_train, outputs=t_p_train)
            if epoch == 1 or epoch % 10 == 0:
                rec.log("val", metrics={"loss": loss_val.item()}, inputs=t_un_val,
                        targets=t_c_val, outputs=t_p_val.detach())
