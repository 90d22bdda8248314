"""d2l-en chapter_optimization (minibatch-sgd.md's get_data_ch11, train_ch11 and
train_concise_ch11; adadelta.md's adadelta), shrunk: linear regression of the airfoil
self-noise table, every column standardized, batch size 10, either torch.optim.Adadelta
(rho=0.9, its default lr=1.0) through train_concise_ch11 (MSELoss(reduction='none'), mean) or
d2l's hand-written adadelta() update through train_ch11 (squared_loss, mean; no optimizer
object). A synthetic airfoil table (1,500 rows: frequency in Hz, angle in degrees, chord and
displacement thickness in metres, velocity in m/s, sound pressure in dB) instead of the
download; 3 epochs. get_data_ch11 keeps the first n=1500 rows; the 300 rows after them are the
validation split, whose loss is recorded every 50 steps (train_ch11 plots the training rows').

Trainers (`trainer=`): "concise" or "scratch". Bugs (`bug=`): "raw-columns" (the
standardization line left out: raw units spanning five orders of magnitude), "no-grad-zero"
(the scratch adadelta() without its p.grad.data.zero_())."""
from __future__ import annotations

import numpy as np
import torch
from torch import nn

import tracelab


def airfoil(seed: int, n: int = 1800) -> np.ndarray:
    rng = np.random.default_rng(seed)
    freq = np.exp(rng.uniform(np.log(200), np.log(20000), n))
    angle = rng.uniform(0, 22.2, n)
    chord = rng.choice([0.0254, 0.0508, 0.1016, 0.1524, 0.2286, 0.3048], n)
    velocity = rng.choice([31.7, 39.6, 55.5, 71.3], n)
    thickness = np.exp(rng.uniform(np.log(0.0004), np.log(0.058), n))
    sound = (150.0 - 3.2 * np.log(freq) - 0.25 * angle - 18.0 * chord + 0.08 * velocity
             - 1.5 * np.log(thickness / 0.004) + rng.normal(0, 1.5, n))
    return np.stack([freq, angle, chord, velocity, thickness, sound], 1).astype(np.float32)


def get_data_ch11(seed: int, *, standardize: bool = True, n: int = 1500):
    data = airfoil(seed)
    if standardize:
        data = (data - data.mean(axis=0)) / data.std(axis=0)
    data = torch.from_numpy(data)
    train, held_out = data[:n], data[n:]
    return (train[:, :-1], train[:, -1]), (held_out[:, :-1], held_out[:, -1]), data.shape[1] - 1


def init_adadelta_states(feature_dim):
    s_w, s_b = torch.zeros((feature_dim, 1)), torch.zeros(1)
    delta_w, delta_b = torch.zeros((feature_dim, 1)), torch.zeros(1)
    return ((s_w, delta_w), (s_b, delta_b))


def adadelta(params, states, hyperparams, *, zero_grad: bool = True):
    rho, eps = hyperparams["rho"], 1e-5
    for p, (s, delta) in zip(params, states):
        with torch.no_grad():
            s[:] = rho * s + (1 - rho) * torch.square(p.grad)
            g = (torch.sqrt(delta + eps) / torch.sqrt(s + eps)) * p.grad
            p[:] -= g
            delta[:] = rho * delta + (1 - rho) * g * g
        if zero_grad:
            p.grad.data.zero_()


class LinReg(nn.Module):
    """d2l.linreg(X, w, b) with its w and b as the parameters of a module, to be recorded."""

    def __init__(self, feature_dim):
        super().__init__()
        self.w = nn.Parameter(torch.normal(mean=0.0, std=0.01, size=(feature_dim, 1)))
        self.b = nn.Parameter(torch.zeros(1))

    def forward(self, X):
        return torch.matmul(X, self.w) + self.b


def squared_loss(y_hat, y):
    return (y_hat - y.reshape(y_hat.shape)) ** 2 / 2


def train(run_dir: str, seed: int = 0, *, trainer: str = "concise", bug: str | None = None,
          num_epochs: int = 3, batch_size: int = 10) -> None:
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    (X_all, y_all), (X_val, y_val), feature_dim = get_data_ch11(
        seed, standardize=bug != "raw-columns")
    if trainer == "concise":
        net = nn.Sequential(nn.Linear(feature_dim, 1))
        nn.init.normal_(net[0].weight, std=0.01)
        optimizer = torch.optim.Adadelta(net.parameters(), rho=0.9)
        loss = nn.MSELoss(reduction="none")
    else:
        net = LinReg(feature_dim)
        optimizer = None
        states, hyperparams = init_adadelta_states(feature_dim), {"rho": 0.9}
        loss = squared_loss
    config = {"trainer": trainer, "batch_size": batch_size, "rho": 0.9}
    n = 0
    with tracelab.Recorder(run_dir, model=net, optimizer=optimizer,
                           loss_fn=loss if trainer == "concise" else None, config=config) as rec:
        for _ in range(num_epochs):
            for idx in torch.randperm(len(X_all), generator=gen).split(batch_size):
                X, y = X_all[idx], y_all[idx]
                if trainer == "concise":
                    optimizer.zero_grad()
                    out = net(X)
                    y = y.reshape(out.shape)
                    l = loss(out, y)
                    l.mean().backward()
                    optimizer.step()
                else:
                    out = net(X)
                    l = loss(out, y)
                    l.mean().backward()
                    adadelta([net.w, net.b], states, hyperparams,
                             zero_grad=bug != "no-grad-zero")
                rec.step(loss=l.mean(), inputs=X, targets=y.reshape(out.shape), outputs=out)
                n += X.shape[0]
                if n % 500 == 0:
                    with torch.no_grad():
                        out_val = net(X_val)
                        val_loss = squared_loss(out_val, y_val).mean()
                    rec.log("val", metrics={"loss": val_loss}, inputs=X_val,
                            targets=y_val.reshape(out_val.shape), outputs=out_val)
