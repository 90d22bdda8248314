"""Calibration cases of the silent-bug rules: real tiny trainings, healthy and with one planted
silent bug each (a corrupt batch off the profile's cadence, a missing zero_grad, evaluation in
training mode, bad targets, a target leak, an overflowing loss scale, validation rows copied
from the training set).

    python benchmarks/calibration_silent.py [--only NAME,..] [--steps N]

`SCENARIOS` (name -> Scenario with `expect` and `allow`, as in calibration_synthetic.py),
`train(name, run_dir, *, steps=None, seed=0) -> run_dir` and `judge(name, diagnosis)` are
importable; end-to-end tests reuse them. The names are distinct from
calibration_synthetic.py's, so its matrix can take them as they are: look a name up in either
SCENARIOS and train and judge it with that module's functions.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

import tracelab
from tracelab.core.findings import Severity

sys.path.insert(0, str(Path(__file__).parent))
from calibration_models import GRUNet, small_cnn, squares  # noqa: E402  (the tasks both files train)


@dataclass(frozen=True)
class Scenario:
    arch: str = "mlp"                # mlp | dropout | cnn | gru
    opt: str = "adam"                # sgd | adam
    lr: float = 1e-3
    expect: frozenset = frozenset()  # rules that must raise a warning or an error
    fault: str | None = None
    steps: int = 200
    batch: int = 32
    allow: frozenset = frozenset()   # rules that may also fire (a consequence of the fault)
    classes: int = 4                 # 1: regression (MSE); 2 with a "bce" fault: one logit
    accumulate: int = 1              # micro-batches per optimizer step
    amp: bool = False                # a GradScaler (on the CPU: its bookkeeping, fp32 values)
    input_every: int = 10

    @property
    def cause(self) -> str:
        """The planted cause: the rule the first diagnosis must name ("" when healthy)."""
        return next(iter(self.expect), "")


def _s(expect=(), allow=(), **kw) -> Scenario:
    return Scenario(expect=frozenset(expect), allow=frozenset(allow), **kw)


SCENARIOS: dict[str, Scenario] = {
    # Healthy runs: nothing at warning or above.
    "silent-mlp-adam": _s(),
    "silent-mlp-sgd-accumulate": _s(opt="sgd", lr=0.05, accumulate=4),
    "silent-dropout-adam": _s(arch="dropout"),
    "silent-cnn-sgd": _s(arch="cnn", opt="sgd", lr=0.05, steps=150),
    "silent-gru-adam": _s(arch="gru", lr=3e-3, classes=2),
    "silent-regression-adam": _s(classes=1),
    "silent-bce-adam": _s(classes=2, fault="bce"),
    "silent-mlp-amp": _s(amp=True),
    "silent-binary-features": _s(fault="binary_features", classes=2),
    "silent-imbalanced": _s(fault="imbalanced", classes=2),
    # Faulty runs.
    "silent-corrupt-batch": _s({"loss-spike"}, fault="corrupt_batch",
                               allow={"nonfinite-values"}),
    "silent-nan-batch": _s({"nonfinite-values"}, fault="nan_batch",
                           allow={"loss-spike", "run-aborted"}),
    "silent-no-zero-grad": _s({"missing-zero-grad"}, opt="sgd", lr=0.01, fault="no_zero_grad",
                              allow={"loss-oscillation", "loss-spike", "update-ratio",
                                     "exploding-gradients", "loss-plateau", "dead-units",
                                     "metric-stagnation", "nonfinite-values"}),
    "silent-eval-in-train-mode": _s({"eval-in-train-mode"}, arch="dropout",
                                    fault="no_eval"),
    "silent-target-leak": _s({"loss-collapse", "data-leak"}, fault="target_leak", lr=1e-2,
                             allow={"update-ratio", "loss-plateau", "frozen-parameters"}),
    "silent-loss-on-wrong-tensor": _s({"loss-collapse"}, classes=1, fault="loss_on_targets",
                                      allow={"loss-plateau", "frozen-parameters",
                                             "vanishing-gradients", "update-ratio"}),
    "silent-bce-minus-one": _s({"target-problems"}, classes=2, fault="bce_minus_one",
                               allow={"loss-plateau", "update-ratio", "loss-oscillation",
                                      "exploding-gradients", "loss-spike", "loss-below-bound"}),
    "silent-sorted-labels": _s({"target-problems"}, fault="sorted",
                               allow={"loss-oscillation", "loss-spike", "metric-stagnation",
                                      "loss-plateau"}),
    "silent-regression-scale": _s({"target-problems"}, classes=1, fault="target_scale",
                                  allow={"loss-plateau", "exploding-gradients",
                                         "loss-oscillation", "update-ratio", "loss-spike"}),
    "silent-amp-overflow": _s({"amp-overflow"}, amp=True, fault="overflow",
                              allow={"nonfinite-values", "loss-plateau", "frozen-parameters",
                                     "metric-stagnation", "update-ratio",
                                     "exploding-gradients"}),
    "silent-train-val-overlap": _s({"train-val-overlap"}, fault="overlap"),
}


class Data:
    """A learnable synthetic task; fresh samples per batch unless the fault says otherwise."""

    def __init__(self, sc: Scenario, seed: int):
        self.sc = sc
        self.g = torch.Generator().manual_seed(seed)
        g = torch.Generator().manual_seed(1234)
        self.teacher = (torch.randn(20, 16, generator=g), torch.randn(16, max(sc.classes, 2),
                                                                      generator=g))
        self.pool = self._fresh(512) if sc.fault in ("overlap", "sorted") else None
        if self.pool is not None and sc.fault == "sorted":
            order = torch.argsort(self.pool[1], stable=True)
            self.pool = (self.pool[0][order], self.pool[1][order])

    def _fresh(self, n: int):
        sc, k = self.sc, self.sc.classes
        if sc.arch == "cnn":
            return squares(n, k, self.g)
        if sc.arch == "gru":
            x = torch.randn(n, 10, 3, generator=self.g)
            return x, (x[:, :, 0].sum(1) > 0).long()
        if sc.fault == "binary_features":  # 4 binary features: rows repeat by nature
            x = (torch.rand(n, 4, generator=self.g) < 0.5).float()
            return x, ((x[:, 0] + x[:, 1] - x[:, 2]) > 0.5).long()
        x = torch.randn(n, 20, generator=self.g)
        a, b = self.teacher
        logits = torch.tanh(x @ a) @ b
        if k == 1:
            y = logits[:, :1] / 3.0 + 0.1 * torch.randn(n, 1, generator=self.g)
            return x, y * 1000.0 + 5000.0 if sc.fault == "target_scale" else y
        if sc.fault == "imbalanced":  # about 8% positives
            return x, (logits[:, 0] > 1.4 * logits[:, 0].std()).long()
        return x, logits[:, :k].argmax(1)

    def batch(self, step: int, n: int):
        if self.pool is not None:
            if self.sc.fault == "sorted":  # sequential passes over label-sorted data
                at = (step * n) % len(self.pool[0])
                idx = torch.arange(at, at + n) % len(self.pool[0])
            else:
                idx = torch.randint(len(self.pool[0]), (n,), generator=self.g)
            return self.pool[0][idx], self.pool[1][idx]
        return self._fresh(n)

    def val(self, n: int = 256):
        if self.sc.fault == "overlap":  # the validation set was cut from the training pool
            return self.pool[0][:n], self.pool[1][:n]
        return self._fresh(n)


def build_model(sc: Scenario) -> nn.Module:
    out = 1 if sc.classes == 1 or sc.fault in ("bce", "bce_minus_one") else sc.classes
    if sc.arch == "cnn":
        return small_cnn(out)
    if sc.arch == "gru":
        return GRUNet(out)
    width = 4 if sc.fault == "binary_features" else 20 + sc.classes if sc.fault == "target_leak" else 20
    layers = [nn.Linear(width, 64), nn.ReLU()]
    if sc.arch == "dropout":
        layers.append(nn.Dropout(0.3))
    return nn.Sequential(*layers, nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, out))


def _loss(sc: Scenario, out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    if sc.classes == 1:
        if sc.fault == "loss_on_targets":  # the loss compares the targets with themselves
            return nn.functional.mse_loss(y + 0 * out, y)
        return nn.functional.mse_loss(out, y)
    if sc.fault in ("bce", "bce_minus_one"):
        return nn.functional.binary_cross_entropy_with_logits(out[:, 0], y.float())
    return nn.functional.cross_entropy(out, y)


def _inputs(sc: Scenario, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    if sc.fault == "target_leak":  # the label left among the features (one-hot)
        return torch.cat([x, 4.0 * nn.functional.one_hot(y, sc.classes).float()], dim=1)
    return x


def train(name: str, run_dir: Path, *, steps: int | None = None, seed: int = 0) -> Path:
    """Train scenario `name` with the Recorder into `run_dir`; returns the run directory."""
    sc = SCENARIOS[name]
    steps = steps or sc.steps
    torch.manual_seed(seed)
    data = Data(sc, seed)
    model = build_model(sc)
    opt = (torch.optim.SGD(model.parameters(), lr=sc.lr, momentum=0.9) if sc.opt == "sgd"
           else torch.optim.Adam(model.parameters(), lr=sc.lr))
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 16) if sc.amp else None
    x_val, y_val = data.val()
    if sc.fault == "bce_minus_one":
        y_val = y_val * 2 - 1
    with tracelab.Recorder(str(run_dir), model=model, optimizer=opt, scaler=scaler,
                           input_every=sc.input_every, flush_interval=0.5,
                           config={"scenario": name}) as rec:
        for step in range(steps):
            model.train()
            if sc.fault != "no_zero_grad":
                opt.zero_grad()
            total = 0.0
            for _ in range(sc.accumulate):
                x, y = data.batch(step, sc.batch)
                if sc.fault == "bce_minus_one":
                    y = y * 2 - 1  # labels in {-1, 1} given to a BCE loss
                if sc.fault == "corrupt_batch" and step == steps // 2 + 3:
                    x = x * 60.0  # off input_every's cadence
                if sc.fault == "nan_batch" and step == steps // 2 + 3:
                    x = x.clone()
                    x[0, 2] = float("nan")
                xin = _inputs(sc, x, y)
                out = model(xin)
                if sc.fault == "overflow":
                    out = out * 3e38  # a float16-style overflow in the forward pass
                loss = _loss(sc, out, y) / sc.accumulate
                (scaler.scale(loss) if scaler else loss).backward()
                total += float(loss.detach())
            if scaler:
                scaler.step(opt)
                scaler.update()
            else:
                opt.step()
            rec.step(loss=total, inputs=xin, targets=y)
            if (step + 1) % 25 == 0:
                _validate(sc, model, rec, x_val, y_val)
    return run_dir


def _validate(sc: Scenario, model: nn.Module, rec, x_val, y_val) -> None:
    if sc.fault != "no_eval":
        model.eval()
    with torch.no_grad():
        xin = _inputs(sc, x_val, y_val)
        out = model(xin)
        rec.log("val", metrics={"loss": _loss(sc, out, y_val)}, inputs=xin, targets=y_val)
    model.train()


def judge(name: str, diagnosis) -> tuple[str, set[str]]:
    """(verdict, rules at warning or above) of one analyzed scenario."""
    sc = SCENARIOS[name]
    alarming = {f.rule for f in diagnosis.findings if f.severity is not Severity.INFO}
    missed = sc.expect - alarming
    false = alarming - sc.expect - sc.allow - {"run-aborted"}
    verdict = "MISS+FALSE" if missed and false else "MISS" if missed else \
        "FALSE-ALARM" if false else "ok"
    return verdict, alarming


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="")
    parser.add_argument("--steps", type=int, default=None)
    args = parser.parse_args(argv)
    names = [n for n in SCENARIOS if not args.only or n in args.only.split(",")]
    bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            run_dir = train(name, Path(tmp) / name, steps=args.steps)
            verdict, alarming = judge(name, tracelab.analyze(run_dir))
            bad += verdict != "ok"
            print(f"{verdict:12s} {name:30s} {', '.join(sorted(alarming)) or '-'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
