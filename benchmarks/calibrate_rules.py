"""Calibrate the training-dynamics rules on real tiny training runs.

Trains small models (MLP, CNN with BatchNorm, GRU) with SGD and Adam on synthetic data, healthy
and with planted faults, records each run with the Recorder, analyzes it and prints a matrix of
run x findings with the verdict per run: a healthy run must hold no warning or error, a faulty
run must raise its expected rules.

    python benchmarks/calibrate_rules.py [--out DIR] [--only NAME,..] [--steps N]

The scenarios are importable (`SCENARIOS`, `train`) so end-to-end tests reuse them.
"""
from __future__ import annotations

import argparse
import math
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

import tracelab
from tracelab.core.findings import Severity


@dataclass(frozen=True)
class Scenario:
    arch: str                       # mlp | cnn | gru | sigmoid10 | tanh
    opt: str                        # sgd | adam
    lr: float
    expect: frozenset = frozenset()  # rules that must raise a warning or an error
    fault: str | None = None
    steps: int = 300
    batch: int = 32
    allow: frozenset = frozenset()  # rules that may also fire (a consequence of the fault)
    classes: int = 4                # 1: a regression task (MSE on one output)
    input_every: int = 10
    schedule: str | None = None     # warmup-cosine | step-decay


def _s(arch, opt, lr, expect=(), fault=None, allow=(), **kw) -> Scenario:
    return Scenario(arch, opt, lr, frozenset(expect), fault, allow=frozenset(allow), **kw)


SCENARIOS: dict[str, Scenario] = {
    # Healthy runs: nothing at warning or above.
    "mlp-sgd": _s("mlp", "sgd", 0.05),
    "mlp-adam": _s("mlp", "adam", 1e-3),
    "mlp-adam-small-batch": _s("mlp", "adam", 3e-3, batch=8),
    "cnn-sgd": _s("cnn", "sgd", 0.05),
    "cnn-adam": _s("cnn", "adam", 1e-3),
    "gru-sgd": _s("gru", "sgd", 0.1, classes=2),
    "gru-adam": _s("gru", "adam", 3e-3, classes=2),
    "tanh-adam": _s("tanh", "adam", 1e-3),
    "mlp-sgd-long": _s("mlp", "sgd", 0.1, steps=600),
    "mlp-regression-sgd": _s("mlp", "sgd", 0.02, classes=1),
    "mlp-regression-adam": _s("mlp", "adam", 1e-3, classes=1, batch=16),
    "mlp-sgd-warmup-cosine": _s("mlp", "sgd", 0.1, schedule="warmup-cosine"),
    "cnn-sgd-step-decay": _s("cnn", "sgd", 0.05, schedule="step-decay"),
    "gru-adam-fast": _s("gru", "adam", 1e-2, classes=2),
    # Faulty runs.
    "tanh-sgd-lr-too-high": _s("tanh", "sgd", 1.0, {"loss-oscillation"},
                               allow={"update-ratio", "loss-spike", "loss-plateau",
                                      "saturated-activations", "exploding-gradients"}),
    "gru-sgd-lr-too-high": _s("gru", "sgd", 3.0, {"loss-oscillation"}, classes=2,
                              allow={"update-ratio", "loss-spike", "loss-plateau",
                                     "exploding-gradients", "metric-stagnation"}),
    "mlp-sgd-lr-too-high": _s("mlp", "sgd", 3.0, {"dead-units"},
                              allow={"nonfinite-values", "exploding-gradients", "update-ratio",
                                     "loss-spike", "loss-plateau", "loss-oscillation",
                                     "collapsed-outputs", "frozen-parameters",
                                     "metric-stagnation"}),
    "mlp-adam-lr-too-high": _s("mlp", "adam", 0.3, {"dead-units"},
                               allow={"update-ratio", "loss-spike", "loss-plateau",
                                      "loss-oscillation", "collapsed-outputs",
                                      "frozen-parameters", "metric-stagnation"}),
    "tanh-regression-exploding": _s("tanh", "sgd", 0.2, {"exploding-gradients",
                                                         "nonfinite-values"}, classes=1,
                                    allow={"loss-spike", "loss-oscillation", "update-ratio",
                                           "saturated-activations", "loss-plateau"}),
    "mlp-sgd-unnormalized": _s("mlp", "sgd", 0.02, {"dead-units", "unnormalized-inputs"},
                               fault="input_scale",
                               allow={"exploding-gradients", "loss-spike", "loss-plateau",
                                      "loss-oscillation", "update-ratio", "frozen-parameters",
                                      "metric-stagnation", "nonfinite-values"}),
    "mlp-regression-dead": _s("mlp", "adam", 1e-3, {"collapsed-outputs", "dead-units"},
                              fault="dying_relu", classes=1,
                              allow={"loss-plateau", "frozen-parameters"}),
    "sigmoid10-sgd": _s("sigmoid10", "sgd", 0.1, {"vanishing-gradients"},
                        allow={"loss-plateau", "metric-stagnation", "update-ratio"}),
    "mlp-adam-frozen-layer": _s("mlp", "adam", 1e-3, {"frozen-parameters"},
                                fault="frozen_layer"),
    "mlp-sgd-no-backward": _s("mlp", "sgd", 0.05, {"loss-plateau"}, fault="no_backward",
                              allow={"metric-stagnation"}),
    "cnn-adam-no-backward": _s("cnn", "adam", 1e-3, {"loss-plateau"}, fault="no_backward",
                               allow={"metric-stagnation"}),
    "mlp-sgd-lr-too-low": _s("mlp", "sgd", 1e-6, {"loss-plateau", "update-ratio"},
                             allow={"metric-stagnation"}),
    "gru-adam-lr-too-low": _s("gru", "adam", 1e-7, {"loss-plateau", "update-ratio"},
                              classes=2, allow={"metric-stagnation"}),
    "mlp-sgd-dying-relu": _s("mlp", "sgd", 0.05, {"dead-units"}, fault="dying_relu",
                             allow={"loss-plateau", "collapsed-outputs", "metric-stagnation",
                                    "frozen-parameters", "vanishing-gradients"}),
    "mlp-adam-outlier-batch": _s("mlp", "adam", 1e-3, {"loss-spike"}, fault="outlier_batch",
                                 input_every=1),
    "mlp-sgd-lr-restart": _s("mlp", "sgd", 0.02, {"loss-spike"}, fault="lr_restart",
                             allow={"update-ratio", "loss-oscillation", "loss-plateau",
                                    "dead-units"}),
    "mlp-adam-nan-input": _s("mlp", "adam", 1e-3, {"nonfinite-values"}, fault="nan_input",
                             input_every=1, allow={"loss-spike"}),
    "tanh-sgd-unnormalized": _s("tanh", "sgd", 0.01, {"saturated-activations",
                                                     "unnormalized-inputs"},
                                fault="unnormalized", allow={"loss-plateau"}),
    "mlp-adam-overfit": _s("mlp", "adam", 3e-3, {"overfitting"}, fault="tiny_train_set",
                           steps=400),
    "mlp-adam-random-labels": _s("mlp", "adam", 1e-3, {"metric-stagnation"},
                                 fault="random_labels", allow={"loss-plateau"}),
}


# -- data -----------------------------------------------------------------------------------------
class Data:
    """Synthetic learnable tasks; fresh samples per batch unless the fault says otherwise."""

    def __init__(self, sc: Scenario, seed: int):
        self.sc = sc
        self.g = torch.Generator().manual_seed(seed)
        g = torch.Generator().manual_seed(1234)  # the task itself is the same for every run
        self.teacher = (torch.randn(20, 16, generator=g), torch.randn(16, sc.classes, generator=g))
        self.fixed = None
        if sc.fault == "tiny_train_set":
            self.fixed = self._fresh(64)
            flip = torch.rand(64, generator=self.g) < 0.3  # label noise to memorize
            y = self.fixed[1].clone()
            y[flip] = torch.randint(sc.classes, (int(flip.sum()),), generator=self.g)
            self.fixed = (self.fixed[0], y)

    def _fresh(self, n: int):
        arch, k = self.sc.arch, self.sc.classes
        if arch == "cnn":
            y = torch.randint(k, (n,), generator=self.g)
            x = 0.5 * torch.randn(n, 1, 10, 10, generator=self.g)
            for i in range(n):
                r, c = divmod(int(y[i]), 2)
                x[i, 0, 1 + 5 * r:4 + 5 * r, 1 + 5 * c:4 + 5 * c] += 1.5
            return x, y
        if arch == "gru":
            x = torch.randn(n, 10, 3, generator=self.g)
            y = (x[:, :, 0].sum(1) + 0.5 * x[:, -3:, 1].sum(1) > 0).long()
            return x, y
        x = torch.randn(n, 20, generator=self.g)
        a, b = self.teacher
        logits = torch.tanh(x @ a) @ b
        if k == 1:  # regression on a standardized target, with a little noise
            return x, logits[:, :1] / 3.0 + 0.1 * torch.randn(n, 1, generator=self.g)
        return x, logits.argmax(1)

    def batch(self, step: int, n: int):
        if self.fixed is not None:
            idx = torch.randint(len(self.fixed[0]), (n,), generator=self.g)
            x, y = self.fixed[0][idx], self.fixed[1][idx]
        else:
            x, y = self._fresh(n)
        if self.sc.fault == "random_labels":
            y = torch.randint(self.sc.classes, (n,), generator=self.g)
        return self._scale(x), y

    def _scale(self, x):
        if self.sc.fault == "unnormalized":
            return 30 * x + 5
        if self.sc.fault == "input_scale":
            return 200 * x
        return x

    def val(self, n: int = 256):
        x, y = self._fresh(n)
        if self.sc.fault == "random_labels":
            y = torch.randint(self.sc.classes, (n,), generator=self.g)
        return self._scale(x), y


# -- models ---------------------------------------------------------------------------------------
class GRUNet(nn.Module):
    def __init__(self, classes: int):
        super().__init__()
        self.gru = nn.GRU(3, 32, batch_first=True)
        self.head = nn.Linear(32, classes)

    def forward(self, x):
        out, _ = self.gru(x)
        return self.head(out[:, -1])


def build_model(sc: Scenario) -> nn.Module:
    k = sc.classes
    if sc.arch == "mlp":
        model = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(),
                              nn.Linear(64, k))
        if sc.fault == "dying_relu":
            with torch.no_grad():  # a bad bias init: most units start (and stay) off
                model[0].bias.fill_(-4.0)
                model[2].bias.fill_(-4.0)
        return model
    if sc.arch == "cnn":
        return nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                             nn.Conv2d(8, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
                             nn.AdaptiveAvgPool2d(2), nn.Flatten(), nn.Linear(64, k))
    if sc.arch == "gru":
        return GRUNet(k)
    if sc.arch == "sigmoid10":
        layers: list[nn.Module] = []
        for i in range(10):
            layers += [nn.Linear(20 if i == 0 else 32, 32), nn.Sigmoid()]
        return nn.Sequential(*layers, nn.Linear(32, k))
    if sc.arch == "tanh":
        return nn.Sequential(nn.Linear(20, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(),
                             nn.Linear(64, k))
    raise ValueError(f"unknown architecture {sc.arch!r}")


def build_schedule(sc: Scenario, opt: torch.optim.Optimizer, steps: int):
    if sc.schedule == "warmup-cosine":
        warm = max(1, steps // 15)
        return torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / warm) * 0.5 * (
            1 + math.cos(math.pi * min(s, steps) / steps)))
    if sc.schedule == "step-decay":
        return torch.optim.lr_scheduler.StepLR(opt, step_size=max(1, int(steps * 0.6)), gamma=0.1)
    return None


def build_optimizer(sc: Scenario, model: nn.Module) -> torch.optim.Optimizer:
    params = list(model.parameters())
    if sc.fault == "frozen_layer":  # the middle layer was left out of the optimizer
        left_out = {id(p) for p in model[2].parameters()}
        params = [p for p in params if id(p) not in left_out]
    if sc.opt == "sgd":
        decay = 0.5 if sc.fault == "weight_decay" else 0.0  # decay crushes every weight
        return torch.optim.SGD(params, lr=sc.lr, momentum=0.9, weight_decay=decay)
    return torch.optim.Adam(params, lr=sc.lr)


# -- training -------------------------------------------------------------------------------------
def train(name: str, run_dir: Path, *, steps: int | None = None, seed: int = 0) -> Path:
    """Train scenario `name` with the Recorder into `run_dir`; returns the run directory."""
    sc = SCENARIOS[name]
    steps = steps or sc.steps
    torch.manual_seed(seed)
    data = Data(sc, seed)
    model = build_model(sc)
    opt = build_optimizer(sc, model)
    schedule = build_schedule(sc, opt, steps)
    regression = sc.classes == 1
    loss_fn = nn.MSELoss() if regression else nn.CrossEntropyLoss()
    x_val, y_val = data.val()
    config = {"scenario": name, "lr": sc.lr, "optimizer": sc.opt, "num_classes": sc.classes,
              "batch_size": sc.batch, "steps": steps}
    with tracelab.Recorder(str(run_dir), model=model, optimizer=opt, config=config,
                           input_every=sc.input_every, flush_interval=0.5) as rec:
        for step in range(steps):
            x, y = data.batch(step, sc.batch)
            if sc.fault == "outlier_batch" and step == steps // 2:
                x = x * 40.0
            if sc.fault == "nan_input" and step == steps // 2:
                x[0, 3] = math.nan
            if sc.fault == "lr_restart" and step == steps // 2:
                for group in opt.param_groups:
                    group["lr"] *= 25
            model.train()
            opt.zero_grad()
            out = model(x)
            loss = loss_fn(out, y)
            if sc.fault != "no_backward":
                loss.backward()
            opt.step()
            metrics = {} if regression else {"acc": (out.argmax(1) == y).float().mean()}
            rec.step(loss=loss, inputs=x, metrics=metrics)
            if schedule is not None:
                schedule.step()
            if (step + 1) % 25 == 0:
                model.eval()
                with torch.no_grad():
                    out = model(x_val)
                    metrics = {"loss": loss_fn(out, y_val)}
                    if not regression:
                        metrics["acc"] = (out.argmax(1) == y_val).float().mean()
                    rec.log("val", metrics=metrics)
    return run_dir


def judge(name: str, diagnosis) -> tuple[str, set[str]]:
    """(verdict, rules at warning or above) of one analyzed scenario."""
    sc = SCENARIOS[name]
    alarming = {f.rule for f in diagnosis.findings if f.severity is not Severity.INFO}
    missed = sc.expect - alarming
    false = alarming - sc.expect - sc.allow - {"run-aborted"}
    if missed and false:
        return "MISS+FALSE", alarming
    if missed:
        return "MISS", alarming
    if false:
        return "FALSE-ALARM", alarming
    return "ok", alarming


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="keep the runs here (default: a temporary directory)")
    parser.add_argument("--only", help="comma-separated scenario names")
    parser.add_argument("--steps", type=int, help="override every scenario's step count")
    parser.add_argument("--seeds", type=int, default=1, help="train each scenario this often")
    parser.add_argument("--healthy", action="store_true", help="only the healthy scenarios")
    parser.add_argument("-v", "--verbose", action="store_true", help="print every finding")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    names = args.only.split(",") if args.only else list(SCENARIOS)
    if args.healthy:
        names = [n for n in names if not SCENARIOS[n].expect]
    root = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="tracelab-calib-"))
    rows, bad = [], 0
    for name, seed in [(n, s) for n in names for s in range(args.seeds)]:
        label = name if seed == 0 else f"{name}#{seed}"
        run_dir = root / (name if seed == 0 else f"{name}-seed{seed}")
        if run_dir.exists():
            shutil.rmtree(run_dir)
        t0 = time.perf_counter()
        train(name, run_dir, steps=args.steps, seed=seed)
        diagnosis = tracelab.analyze(run_dir)
        verdict, _ = judge(name, diagnosis)
        bad += verdict != "ok" or bool(diagnosis.errors)
        cells: dict[str, str] = {}
        for f in diagnosis.findings:  # the worst severity per rule
            mark = f.severity.value[0].upper()
            if "EWI".index(mark) < "EWI".index(cells.get(f.code, "I")):
                cells[f.code] = mark
            cells.setdefault(f.code, mark)
        rows.append((label, verdict, cells))
        expect = ",".join(sorted(SCENARIOS[name].expect)) or "-"
        fired = " ".join(f"{c}:{m}" for c, m in sorted(cells.items())) or "-"
        print(f"{label:<28} {verdict:<11} {time.perf_counter() - t0:5.1f}s  expect {expect}; "
              f"fired {fired}", flush=True)
        if args.verbose:
            for f in diagnosis.findings:
                print(f"{'':<4}{f.code} {f.severity.value} [{f.subject}] {f.message}")
        for e in diagnosis.errors:
            print(f"{'':<4}internal error in {e.rule}: {e.error}")
    _print_matrix(rows)
    print(f"\n{len(rows) - bad}/{len(rows)} runs as expected; runs in {root}")
    if not args.out:
        shutil.rmtree(root, ignore_errors=True)
    return 1 if bad else 0


def _print_matrix(rows) -> None:
    """Run x rule code: E(rror), W(arning), I(nfo) or '.' for nothing."""
    codes = sorted({c for _, _, cells in rows for c in cells})
    print(f"\n{'run':<28} {'verdict':<11} " + " ".join(c[2:] for c in codes))
    for label, verdict, cells in rows:
        print(f"{label:<28} {verdict:<11} " + " ".join(f"{cells.get(c, '.'):>3}" for c in codes))


if __name__ == "__main__":
    sys.exit(main())
