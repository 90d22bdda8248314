"""`tracelab demo`: tiny real training runs, each with one planted defect, analyzed and reported.

Every scenario generates its own data (no downloads) and trains for a few seconds on the CPU.
The scenarios double as end-to-end test fixtures: `SCENARIOS[name].train(run_dir)`.
"""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    expect: str  # the rule of the first diagnosis ("" for the healthy run)
    train: Callable[[Path], None]


# -- data ----------------------------------------------------------------------------------------
def blobs(n: int = 3000, features: int = 8, classes: int = 3, seed: int = 0):
    """Gaussian class clusters on features of very different raw scales (like real tables)."""
    rng = np.random.default_rng(seed)
    centers = rng.normal(0, 1.5, size=(classes, features))
    y = rng.integers(0, classes, n)
    x = centers[y] + rng.normal(0, 1.0, size=(n, features))
    scale = np.geomspace(1, 200, features)
    offset = np.linspace(0, 500, features)
    return x * scale + offset, y


def split(x, y, val_frac: float = 0.2, seed: int = 1):
    idx = np.random.default_rng(seed).permutation(len(x))
    cut = int(len(x) * (1 - val_frac))
    return x[idx[:cut]], y[idx[:cut]], x[idx[cut:]], y[idx[cut:]]


def standardize(fit, *arrays):
    mu, sd = fit.mean(0), fit.std(0)
    return [(a - mu) / sd for a in arrays]


# -- a shared loop -------------------------------------------------------------------------------
def fit(run_dir: Path, model, optimizer, xtr, ytr, xva, yva, *, steps: int, config: dict,
        batch: int = 64, val_every: int = 25, inputs_train=None, inputs_val=None,
        seed: int = 0) -> None:
    """Minibatch training with the Recorder; validation every `val_every` steps."""
    import torch
    import tracelab

    torch.manual_seed(seed)
    xtr_t, ytr_t = torch.as_tensor(xtr, dtype=torch.float32), torch.as_tensor(ytr)
    xva_t, yva_t = torch.as_tensor(xva, dtype=torch.float32), torch.as_tensor(yva)
    loss_fn = torch.nn.CrossEntropyLoss()
    gen = np.random.default_rng(seed)
    with tracelab.Recorder(run_dir, model, optimizer, config=config) as rec:
        for step in range(steps):
            idx = gen.integers(0, len(xtr_t), batch)
            x, y = xtr_t[idx], ytr_t[idx]
            optimizer.zero_grad()
            out = model(x)
            loss = loss_fn(out, y)
            loss.backward()
            optimizer.step()
            acc = (out.argmax(1) == y).float().mean()
            rec.step(loss=loss, metrics={"acc": acc},
                     inputs=inputs_train(idx) if inputs_train else x)
            if (step + 1) % val_every == 0:
                model.eval()
                with torch.no_grad():
                    out = model(xva_t)
                    val_loss = loss_fn(out, yva_t)
                    val_acc = (out.argmax(1) == yva_t).float().mean()
                model.train()
                vidx = gen.integers(0, len(xva_t), 256)
                rec.log("val", metrics={"loss": val_loss, "acc": val_acc},
                        inputs=inputs_val(vidx) if inputs_val else xva_t[vidx])


def mlp(widths: list[int], act: str = "relu"):
    import torch
    layers = []
    for i, (a, b) in enumerate(zip(widths[:-1], widths[1:])):
        layers.append(torch.nn.Linear(a, b))
        if i < len(widths) - 2:
            layers.append(torch.nn.ReLU() if act == "relu" else torch.nn.Sigmoid())
    return torch.nn.Sequential(*layers)


# -- scenarios -----------------------------------------------------------------------------------
def healthy(run_dir: Path) -> None:
    import torch
    xtr, ytr, xva, yva = split(*blobs())
    xtr, xva = standardize(xtr, xtr, xva)
    torch.manual_seed(0)
    model = mlp([8, 64, 64, 3])
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    fit(run_dir, model, opt, xtr, ytr, xva, yva, steps=300,
        config={"scenario": "healthy", "optimizer": "adam", "lr": 1e-3, "seed": 0})


def lr_too_high(run_dir: Path) -> None:
    import torch
    xtr, ytr, xva, yva = split(*blobs())
    xtr, xva = standardize(xtr, xtr, xva)
    torch.manual_seed(0)
    model = mlp([8, 64, 64, 3])
    opt = torch.optim.Adam(model.parameters(), lr=0.3)
    fit(run_dir, model, opt, xtr, ytr, xva, yva, steps=300,
        config={"scenario": "lr_too_high", "optimizer": "adam", "lr": 0.3, "seed": 0})


def vanishing_gradients(run_dir: Path) -> None:
    import torch
    xtr, ytr, xva, yva = split(*blobs())
    xtr, xva = standardize(xtr, xtr, xva)
    torch.manual_seed(0)
    model = mlp([8] + [32] * 10 + [3], act="sigmoid")
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    fit(run_dir, model, opt, xtr, ytr, xva, yva, steps=300,
        config={"scenario": "vanishing_gradients", "depth": 11, "activation": "sigmoid",
                "lr": 0.05, "seed": 0})


def preprocessing_mismatch(run_dir: Path) -> None:
    import torch
    xtr, ytr, xva, yva = split(*blobs())
    lo, hi = xtr.min(0), xtr.max(0)
    xtr = (xtr - lo) / (hi - lo)              # train: min-max scaled
    xva = (xva - xva.mean(0)) / xva.std(0)    # val: z-scored by a second, different pipeline
    torch.manual_seed(0)
    model = mlp([8, 64, 64, 3])
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    fit(run_dir, model, opt, xtr, ytr, xva, yva, steps=300,
        config={"scenario": "preprocessing_mismatch", "lr": 3e-3, "seed": 0})


def events(n: int, seed: int):
    """Card transactions over 60 days; fraud concentrates at night."""
    import pandas as pd
    rng = np.random.default_rng(seed)
    ts = pd.Timestamp("2024-03-01") + pd.to_timedelta(rng.integers(0, 60 * 86400, n), unit="s")
    amount = rng.lognormal(3, 1, n)
    hour = ts.hour.to_numpy()
    night = (hour < 6) | (hour >= 22)
    p = np.where(night, 0.7, 0.1) * np.clip(amount / 40, 0.5, 1.5)
    label = (rng.random(n) < np.clip(p, 0, 1)).astype(np.int64)
    return pd.DataFrame({"timestamp": ts, "amount": amount}), label


def time_features(frame) -> np.ndarray:
    ts = frame["timestamp"]
    hour = ts.dt.hour + ts.dt.minute / 60
    angle = 2 * np.pi * hour / 24
    return np.stack([np.sin(angle), np.cos(angle), ts.dt.day_of_week / 6.0,
                     np.log(frame["amount"]) / 5], axis=1).astype(np.float32)


def timestamp_collapse(run_dir: Path) -> None:
    import torch
    train, ytr = events(4000, seed=0)
    val, yva = events(1000, seed=1)
    # The validation extract went through an ETL step that cast timestamps to dates.
    val = val.assign(timestamp=val["timestamp"].dt.floor("D"))
    xtr, xva = time_features(train), time_features(val)
    torch.manual_seed(0)
    model = mlp([4, 32, 32, 2])
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    fit(run_dir, model, opt, xtr, ytr, xva, yva, steps=300,
        config={"scenario": "timestamp_collapse", "lr": 3e-3, "seed": 0},
        inputs_train=lambda idx: train.iloc[idx].reset_index(drop=True),
        inputs_val=lambda idx: val.iloc[idx].reset_index(drop=True))


SCENARIOS: dict[str, Scenario] = {s.name: s for s in (
    Scenario("healthy", "A standardized MLP trained with Adam: nothing to find.", "", healthy),
    # Which symptom an LR this high shows first depends on float rounding (the CPU's kernels):
    # on this project's machines, spikes that kill ReLUs; elsewhere, a loss that keeps swinging.
    Scenario("lr_too_high", "Adam with lr=0.3, 300x the usual: the loss spikes again and again "
             "instead of converging, and ReLUs die.",
             "learning-rate-too-high", lr_too_high),
    Scenario("vanishing_gradients", "An 11-layer sigmoid MLP: early layers get almost no "
             "gradient.", "vanishing-gradients", vanishing_gradients),
    Scenario("preprocessing_mismatch", "Train min-max scaled, validation z-scored by another "
             "pipeline.", "train-val-mismatch", preprocessing_mismatch),
    Scenario("timestamp_collapse", "Validation timestamps truncated to the day by an ETL cast: "
             "hour-of-day features collapse.", "input-collapse", timestamp_collapse),
)}


def run_demo(out: Path, only: list[str] | None = None, stream=None) -> int:
    """Train, analyze and report each scenario; print where everything is. Returns exit code."""
    import tracelab
    from tracelab import reports
    from tracelab.reports.text import format_root_cause
    from tracelab.core.errors import TracelabError

    stream = stream or sys.stdout
    names = only or list(SCENARIOS)
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown:
        raise TracelabError(f"unknown scenario '{unknown[0]}'; expected one of "
                            + ", ".join(SCENARIOS))
    out.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    entries = []
    for name in names:
        scenario = SCENARIOS[name]
        run_dir = out / f"{name}-{stamp}"
        start = time.perf_counter()
        print(f"[{name}] {scenario.description}", file=stream, flush=True)
        scenario.train(run_dir)
        diagnosis = tracelab.analyze(run_dir)
        report = reports.write_html(diagnosis, run_dir / "report.html")
        for n, root in enumerate(diagnosis.diagnoses, 1):
            for line in format_root_cause(n, root, "    "):
                print(line, file=stream)
        print(f"    {diagnosis.verdict()} ({time.perf_counter() - start:.1f} s) -> {report}",
              file=stream, flush=True)
        counts = diagnosis.counts()
        entries.append({"name": name, "description": scenario.description,
                        "report": str(report.relative_to(out)), "verdict": diagnosis.verdict(),
                        "worst": diagnosis.worst.value if diagnosis.worst else None,
                        "counts": counts, "expect": scenario.expect})
    index = reports.write_index(entries, out / f"index-{stamp}.html")
    latest = out / "index.html"
    latest.write_bytes(index.read_bytes())
    print(f"\nDemo reports: {latest.resolve()}", file=stream)
    return 0
