"""What the sealed scenarios share: the Recorder calls of the coming API, offline data, a seed.

The scenarios call the Recorder as a user of issue 40's API would (`outputs=`, several
optimizers, `loss_fn=`); `recorder`, `step` and `log` drop what the installed Recorder does not
accept yet, so the scenarios need no edit when it does.
"""
from __future__ import annotations

import codecs
import contextlib
import importlib.util
import inspect
import io
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

import tracelab


def setup(seed: int) -> torch.Generator:
    """One torch thread, seeded; the generator the scenario draws its batches and noise from."""
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    return torch.Generator().manual_seed(seed)


# -- the Recorder, whatever of issue 40's arguments it takes -------------------------------------
def _accepted(fn: Any, kw: dict[str, Any]) -> dict[str, Any]:
    params = inspect.signature(fn).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return kw
    return {k: v for k, v in kw.items() if k in params}


def _takes_several_optimizers() -> bool:
    note = str(inspect.signature(tracelab.Recorder).parameters["optimizer"].annotation)
    return any(word in note for word in ("Sequence", "Mapping", "list", "dict", "Iterable"))


def recorder(run_dir: str, model: torch.nn.Module, optimizer: Any = None, **kw: Any):
    """`tracelab.Recorder(run_dir, model, optimizer, **kw)`; several optimizers become the
    first where the installed Recorder takes one."""
    if isinstance(optimizer, (list, tuple, dict)) and not _takes_several_optimizers():
        optimizer = next(iter(optimizer.values() if isinstance(optimizer, dict) else optimizer))
    return tracelab.Recorder(run_dir, model, optimizer, **_accepted(tracelab.Recorder, kw))


def step(rec: Any, **kw: Any) -> None:
    rec.step(**_accepted(rec.step, kw))


def log(rec: Any, split: str, **kw: Any) -> None:
    rec.log(split, **_accepted(rec.log, kw))


# -- offline data -------------------------------------------------------------------------------
def sklearn_data(name: str) -> Path:
    """A data file shipped inside scikit-learn's package, found without importing it (slow)."""
    return Path(importlib.util.find_spec("sklearn").submodule_search_locations[0],
                "datasets", "data", name)


def digits(val: int = 360):
    """sklearn's 8x8 digits: pixels 0..16 as float32 (N, 64), labels; the same split for
    every seed."""
    data = np.loadtxt(sklearn_data("digits.csv.gz"), delimiter=",", dtype=np.float32)
    order = np.random.default_rng(0).permutation(len(data))
    x = torch.tensor(data[order, :-1])
    y = torch.tensor(data[order, -1], dtype=torch.long)
    return x[val:], y[val:], x[:val], y[:val]


def text() -> str:
    """The Zen of Python (the `this` module prints it on import)."""
    with contextlib.redirect_stdout(io.StringIO()):
        import this
    return codecs.decode(this.s, "rot13")


def batches(n: int, size: int, g: torch.Generator, *, drop_last: bool = False):
    """One epoch of shuffled index batches."""
    order = torch.randperm(n, generator=g)
    stop = n - n % size if drop_last else n
    return [order[i:i + size] for i in range(0, stop, size)]


def accuracy(logits: torch.Tensor, y: torch.Tensor) -> float:
    return float((logits.argmax(1) == y).float().mean())


class CartPole:
    """gym's CartPole-v1 dynamics in numpy (Euler steps, +1 reward a step, 200 steps at most)."""

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        self.s = np.zeros(4)
        self.t = 0

    def reset(self) -> np.ndarray:
        self.s = self.rng.uniform(-0.05, 0.05, 4)
        self.t = 0
        return self.s.astype(np.float32)

    def step(self, action: int):
        x, v, th, om = self.s
        force = 10.0 if action == 1 else -10.0
        cos, sin = np.cos(th), np.sin(th)
        temp = (force + 0.05 * om * om * sin) / 1.1
        om_acc = (9.8 * sin - cos * temp) / (0.5 * (4.0 / 3.0 - 0.1 * cos * cos / 1.1))
        acc = temp - 0.05 * om_acc * cos / 1.1
        self.s = np.array([x + 0.02 * v, v + 0.02 * acc, th + 0.02 * om, om + 0.02 * om_acc])
        self.t += 1
        done = abs(self.s[0]) > 2.4 or abs(self.s[2]) > 0.2095 or self.t >= 200
        return self.s.astype(np.float32), 1.0, bool(done)


def fit(run_dir: str, model: torch.nn.Module, optimizer: Any, criterion: Any, data, *,
        g: torch.Generator, epochs: int, batch: int, config: dict[str, Any],
        scheduler: Any = None, sched_per_batch: bool = False, zero_grad: bool = True,
        eval_mode: bool = True, val_batch: int | None = None, step_first: bool = False,
        metrics: Callable[[torch.Tensor, torch.Tensor], dict[str, float]] | None = None,
        shown: tuple[Any, Any] | None = None) -> None:
    """The supervised loop the tutorials share: per batch zero_grad, forward, loss, backward,
    step; per epoch the scheduler and a validation pass (its loss and `metrics`, by default the
    accuracy). `shown` is what
    the user gives the recorder as inputs when it is not the tensors (a DataFrame for the
    training rows, one for validation). The other keywords are the ways the scenarios' loops
    differ from it."""
    xtr, ytr, xva, yva = data
    with recorder(run_dir, model, optimizer, config=config, loss_fn=criterion) as rec:
        for _ in range(epochs):
            model.train()
            for idx in batches(len(ytr), batch, g):
                if zero_grad:
                    optimizer.zero_grad()
                outputs = model(xtr[idx])
                loss = criterion(outputs, ytr[idx])
                if step_first:
                    optimizer.step()
                loss.backward()
                if not step_first:
                    optimizer.step()
                if scheduler is not None and sched_per_batch:
                    scheduler.step()
                inputs = xtr[idx] if shown is None else shown[0].iloc[idx.numpy()]
                step(rec, loss=loss, inputs=inputs, targets=ytr[idx], outputs=outputs)
            if scheduler is not None and not sched_per_batch:
                scheduler.step()
            if eval_mode:
                model.eval()
            size = val_batch or len(yva)
            with torch.no_grad():
                out = torch.cat([model(xva[i:i + size]) for i in range(0, len(yva), size)])
            said = {"acc": accuracy(out, yva)} if metrics is None else metrics(out, yva)
            log(rec, "val", metrics={"loss": float(criterion(out, yva)), **said},
                inputs=xva if shown is None else shown[1], targets=yva, outputs=out)


def gan_step(G, D, optimizer_G, optimizer_D, adversarial_loss, imgs, z, *, g_target_real: bool = True):
    """One step of PyTorch-GAN's loop: the generator against the discriminator's verdict on its
    images (target: real), then the discriminator on real and detached fake images."""
    valid, fake = torch.ones(len(imgs), 1), torch.zeros(len(imgs), 1)
    optimizer_G.zero_grad()
    gen_imgs = G(z)
    validity = D(gen_imgs)
    g_loss = adversarial_loss(validity, valid if g_target_real else fake)
    g_loss.backward()
    optimizer_G.step()
    optimizer_D.zero_grad()
    d_loss = (adversarial_loss(D(imgs), valid) + adversarial_loss(D(gen_imgs.detach()), fake)) / 2
    d_loss.backward()
    optimizer_D.step()
    return g_loss, d_loss, validity, valid
