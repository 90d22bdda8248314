"""The synthetic calibration scenarios: tiny trainings written for this project.

Trains small models (MLP, CNN with BatchNorm, GRU, a small transformer, an embedding-bag model)
with SGD, Adam and AdamW under constant, step, warm-up and cosine schedules on synthetic data,
healthy and with planted faults, records each run with the Recorder, analyzes it and prints a
matrix of run x findings, then three figures:

- top-1: the share of faulty runs whose first diagnosis is the planted cause (`cause`);
- diagnoses per faulty run (all, and those at warning or above);
- warnings (or errors) on healthy runs.

    python benchmarks/calibration_synthetic.py [--out DIR] [--only NAME,..] [--steps N]

The rules were tuned on these runs, so the figures measure fit, not generalization; that is
measured by `calibrate_rules.py` on the calibration sets built from public code. The
silent-bug cases of `calibration_silent.py` (a missing zero_grad, evaluation in training mode,
bad targets, ...) run with them, each trained by its own file's loop. The scenarios are
importable (`SCENARIOS`, `train`, `scenario`, `run_scenario`) so end-to-end tests reuse them.
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

sys.path.insert(0, str(Path(__file__).parent))
from calibration_models import Data, build_model, build_optimizer, build_schedule  # noqa: E402
import calibration_silent as silent  # noqa: E402  (the silent-bug cases)


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
    schedule: str | None = None     # warmup-cosine | cosine | warmup | step-decay
    cause: str = ""                 # the planted cause: the rule the first diagnosis must name


def _s(arch, opt, lr, expect=(), fault=None, allow=(), **kw) -> Scenario:
    return Scenario(arch, opt, lr, frozenset(expect), fault, allow=frozenset(allow), **kw)


LR = "learning-rate-too-high"


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
                                      "saturated-activations", "exploding-gradients"}, cause=LR),
    "gru-sgd-lr-too-high": _s("gru", "sgd", 3.0, {"loss-oscillation"}, classes=2,
                              allow={"update-ratio", "loss-spike", "loss-plateau",
                                     "exploding-gradients", "metric-stagnation"}, cause=LR),
    "mlp-sgd-lr-too-high": _s("mlp", "sgd", 3.0, {"dead-units"},
                              allow={"nonfinite-values", "exploding-gradients", "update-ratio",
                                     "loss-spike", "loss-plateau", "loss-oscillation",
                                     "collapsed-outputs", "frozen-parameters",
                                     "metric-stagnation"}, cause=LR),
    "mlp-adam-lr-too-high": _s("mlp", "adam", 0.3, {"dead-units"},
                               allow={"update-ratio", "loss-spike", "loss-plateau",
                                      "loss-oscillation", "collapsed-outputs",
                                      "frozen-parameters", "metric-stagnation"}, cause=LR),
    "tanh-regression-exploding": _s("tanh", "sgd", 0.2, {"exploding-gradients",
                                                         "nonfinite-values"}, classes=1,
                                    allow={"loss-spike", "loss-oscillation", "update-ratio",
                                           "saturated-activations", "loss-plateau"}, cause=LR),
    "mlp-sgd-unnormalized": _s("mlp", "sgd", 0.02, {"dead-units", "unnormalized-inputs"},
                               fault="input_scale",
                               allow={"exploding-gradients", "loss-spike", "loss-plateau",
                                      "loss-oscillation", "update-ratio", "frozen-parameters",
                                      "metric-stagnation", "nonfinite-values"},
                                      cause="unnormalized-inputs"),
    "mlp-regression-dead": _s("mlp", "adam", 1e-3, {"collapsed-outputs", "dead-units"},
                              fault="dying_relu", classes=1,
                              allow={"loss-plateau", "frozen-parameters"}, cause="dead-units"),
    "sigmoid10-sgd": _s("sigmoid10", "sgd", 0.1, {"vanishing-gradients"},
                        allow={"loss-plateau", "metric-stagnation", "update-ratio"},
                        cause="vanishing-gradients"),
    "mlp-adam-frozen-layer": _s("mlp", "adam", 1e-3,
                                {"frozen-parameters", "param-not-in-optimizer"},
                                fault="frozen_layer", cause="param-not-in-optimizer"),
    "mlp-sgd-no-backward": _s("mlp", "sgd", 0.05, {"loss-plateau"}, fault="no_backward",
                              allow={"metric-stagnation"}, cause="loss-plateau"),
    "cnn-adam-no-backward": _s("cnn", "adam", 1e-3, {"loss-plateau"}, fault="no_backward",
                               allow={"metric-stagnation"}, cause="loss-plateau"),
    "mlp-sgd-lr-too-low": _s("mlp", "sgd", 1e-6, {"loss-plateau", "update-ratio"},
                             allow={"metric-stagnation"}, cause="update-ratio"),
    "gru-adam-lr-too-low": _s("gru", "adam", 1e-7, {"loss-plateau", "update-ratio"},
                              classes=2, allow={"metric-stagnation"}, cause="update-ratio"),
    "mlp-sgd-dying-relu": _s("mlp", "sgd", 0.05, {"dead-units"}, fault="dying_relu",
                             allow={"loss-plateau", "collapsed-outputs", "metric-stagnation",
                                    "frozen-parameters", "vanishing-gradients"},
                                    cause="dead-units"),
    "mlp-adam-outlier-batch": _s("mlp", "adam", 1e-3, {"loss-spike"}, fault="outlier_batch",
                                 input_every=1, cause="loss-spike"),
    "mlp-sgd-lr-restart": _s("mlp", "sgd", 0.02, {"loss-spike"}, fault="lr_restart",
                             allow={"update-ratio", "loss-oscillation", "loss-plateau",
                                    "dead-units"}, cause=LR),
    "mlp-adam-nan-input": _s("mlp", "adam", 1e-3, {"nonfinite-values"}, fault="nan_input",
                             input_every=1, allow={"loss-spike"}, cause="nonfinite-values"),
    "tanh-sgd-unnormalized": _s("tanh", "sgd", 0.01, {"saturated-activations",
                                                     "unnormalized-inputs"},
                                fault="unnormalized", allow={"loss-plateau"},
                                cause="unnormalized-inputs"),
    "mlp-adam-overfit": _s("mlp", "adam", 3e-3, {"overfitting"}, fault="tiny_train_set",
                           steps=400, cause="overfitting"),
    "mlp-adam-random-labels": _s("mlp", "adam", 1e-3, {"metric-stagnation"},
                                 fault="random_labels", allow={"loss-plateau"},
                                 cause="loss-plateau"),
    # More architectures, optimizers and schedules: healthy.
    "transformer-adamw-warmup-cosine": _s("transformer", "adamw", 1e-3,
                                          schedule="warmup-cosine"),
    "transformer-adam": _s("transformer", "adam", 1e-3),
    "embedding-adamw": _s("embedding", "adamw", 3e-3),
    "embedding-sgd-step-decay": _s("embedding", "sgd", 0.5, schedule="step-decay"),
    "cnn-adamw-cosine": _s("cnn", "adamw", 2e-3, schedule="cosine"),
    "gru-adamw-warmup": _s("gru", "adamw", 3e-3, classes=2, schedule="warmup"),
    "mlp-adamw-step-decay": _s("mlp", "adamw", 1e-3, schedule="step-decay"),
    # ... and faulty.
    "transformer-adam-lr-too-high": _s("transformer", "adam", 1.0, cause=LR),
    "transformer-sgd-lr-too-high": _s("transformer", "sgd", 3.0, cause=LR),
    "embedding-adamw-lr-too-low": _s("embedding", "adamw", 1e-7, cause="update-ratio"),
    "gru-sgd-lr-restart": _s("gru", "sgd", 0.1, fault="lr_restart", classes=2, cause=LR),
    "gru-adamw-warmup-lr-too-high": _s("gru", "adamw", 0.3, classes=2, schedule="warmup",
                                       cause=LR),
    "mlp-adam-crash": _s("mlp", "adam", 1e-3, fault="crash", cause="run-aborted"),
    "mlp-adamw-input-collapse": _s("mlp", "adamw", 1e-3, fault="input_collapse",
                                   cause="input-collapse"),
    "mlp-adam-val-mismatch": _s("mlp", "adam", 1e-3, fault="val_shift",
                                cause="train-val-mismatch"),
    "mlp-sgd-slow-loader": _s("mlp", "sgd", 0.05, fault="slow_loader",
                              cause="input-pipeline-bound"),
    "mlp-adamw-cosine-nan-input": _s("mlp", "adamw", 1e-3, fault="nan_input", input_every=1,
                                     schedule="cosine", cause="nonfinite-values"),
    "gru-adam-outlier-batch": _s("gru", "adam", 3e-3, fault="outlier_batch", classes=2,
                                 input_every=1, cause="loss-spike"),
    "mlp-sgd-unprofiled-bad-batch": _s("mlp", "sgd", 0.05, fault="outlier_batch_unseen",
                                       cause="loss-spike"),
    "embedding-adam-overfit": _s("embedding", "adam", 1e-2, fault="tiny_train_set",
                                 steps=400, cause="overfitting"),
    "tanh-adamw-saturated": _s("tanh", "adamw", 1e-3, fault="big_init",
                               cause="saturated-activations"),
    "mlp-adam-unseeded": _s("mlp", "adam", 1e-3, fault="no_seed",
                            cause="nondeterminism-risk"),
}


# -- training -------------------------------------------------------------------------------------
def train(name: str, run_dir: Path, *, steps: int | None = None, seed: int = 0) -> Path:
    """Train scenario `name` with the Recorder into `run_dir`; returns the run directory."""
    sc = SCENARIOS[name]
    steps = steps or sc.steps
    if sc.fault == "no_seed":
        torch.seed()  # as in a script that never seeds: a random 64-bit seed
    else:
        torch.manual_seed(seed)
    data = Data(sc, seed, steps)
    model = build_model(sc)
    opt = build_optimizer(sc, model)
    schedule = build_schedule(sc, opt, steps)
    regression = sc.classes == 1
    loss_fn = nn.MSELoss() if regression else nn.CrossEntropyLoss()
    x_val, y_val = data.val()
    config = {"scenario": name, "lr": sc.lr, "optimizer": sc.opt, "num_classes": sc.classes,
              "batch_size": sc.batch, "steps": steps}
    try:
        with tracelab.Recorder(str(run_dir), model=model, optimizer=opt, config=config,
                               input_every=sc.input_every, flush_interval=0.5) as rec:
            for step, (x, y) in enumerate(rec.iterate(_batches(sc, data, steps))):
                _train_step(sc, step, steps, model, opt, loss_fn, rec, x, y)
                if schedule is not None:
                    schedule.step()
                if (step + 1) % 25 == 0:
                    model.eval()
                    with torch.no_grad():
                        out = model(x_val)
                        metrics = {"loss": loss_fn(out, y_val)}
                        if not regression:
                            metrics["acc"] = (out.argmax(1) == y_val).float().mean()
                        rec.log("val", metrics=metrics, inputs=x_val[:128])
    except _Crash:
        pass  # the run records the failure; the benchmark goes on
    return run_dir


class _Crash(RuntimeError):
    pass


def _batches(sc: Scenario, data: Data, steps: int):
    for step in range(steps):
        if sc.fault == "slow_loader":
            time.sleep(0.02)  # a loader that cannot keep up (one worker, slow decoding)
        yield data.batch(step, sc.batch)


def _train_step(sc, step, steps, model, opt, loss_fn, rec, x, y) -> None:
    if sc.fault == "outlier_batch" and step == steps // 2:
        x = x * 40.0
    if sc.fault == "outlier_batch_unseen" and step == steps // 2 + 5:  # between profiled steps
        x = x * 40.0
    if sc.fault == "nan_input" and step == steps // 2:
        x[0, 3] = math.nan
    if sc.fault == "lr_restart" and step == steps // 2:
        for group in opt.param_groups:
            group["lr"] *= 25
    if sc.fault == "crash" and step == steps // 2:
        raise _Crash("CUDA out of memory (planted)")
    model.train()
    opt.zero_grad()
    out = model(x)
    loss = loss_fn(out, y)
    if sc.fault != "no_backward":
        loss.backward()
    opt.step()
    metrics = {} if sc.classes == 1 else {"acc": (out.argmax(1) == y).float().mean()}
    rec.step(loss=loss, inputs=x, metrics=metrics)


def scenario(name: str):
    """A scenario of this file's or of calibration_silent.py's (the names are distinct)."""
    return SCENARIOS[name] if name in SCENARIOS else silent.SCENARIOS[name]


def run_scenario(name: str, run_dir: Path, *, steps: int | None = None, seed: int = 0) -> Path:
    """Train a scenario of either file with that file's training loop."""
    how = train if name in SCENARIOS else silent.train
    return how(name, run_dir, steps=steps, seed=seed)


def judge(name: str, diagnosis) -> tuple[str, set[str]]:
    """(verdict, rules at warning or above) of one analyzed scenario: a healthy run must hold
    no warning, a faulty run's first diagnosis must be its planted cause."""
    sc = scenario(name)
    alarming = {f.rule for f in diagnosis.findings if f.severity is not Severity.INFO}
    if not sc.cause:
        return ("FALSE-ALARM" if alarming else "ok"), alarming
    named = [d.finding.rule for d in diagnosis.diagnoses]
    if named[:1] == [sc.cause]:
        return "ok", alarming
    return ("RANKED-" + str(named.index(sc.cause) + 1) if sc.cause in named else "MISS"), alarming


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="keep the runs here (default: a temporary directory)")
    parser.add_argument("--only", help="comma-separated scenario names")
    parser.add_argument("--steps", type=int, help="override every scenario's step count")
    parser.add_argument("--seeds", type=int, default=1, help="train each scenario this often")
    parser.add_argument("--healthy", action="store_true", help="only the healthy scenarios")
    parser.add_argument("-v", "--verbose", action="store_true", help="print every diagnosis")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    names = args.only.split(",") if args.only else [*SCENARIOS, *silent.SCENARIOS]
    if args.healthy:
        names = [n for n in names if not scenario(n).cause]
    root = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="tracelab-calib-"))
    rows, tally = [], []
    started = time.perf_counter()
    for name, seed in [(n, s) for n in names for s in range(args.seeds)]:
        label = name if seed == 0 else f"{name}#{seed}"
        run_dir = root / (name if seed == 0 else f"{name}-seed{seed}")
        if run_dir.exists():
            shutil.rmtree(run_dir)
        t0 = time.perf_counter()
        run_scenario(name, run_dir, steps=args.steps, seed=seed)
        diagnosis = tracelab.analyze(run_dir)
        verdict, alarming = judge(name, diagnosis)
        tally.append((scenario(name), verdict, diagnosis, alarming))
        cells: dict[str, str] = {}
        for f in diagnosis.findings:  # the worst severity per rule
            mark = f.severity.value[0].upper()
            if "EWI".index(mark) < "EWI".index(cells.get(f.code, "I")):
                cells[f.code] = mark
            cells.setdefault(f.code, mark)
        rows.append((label, verdict, cells))
        first = diagnosis.diagnoses[0].finding.rule if diagnosis.diagnoses else "-"
        print(f"{label:<32} {verdict:<11} {time.perf_counter() - t0:5.1f}s  cause "
              f"{scenario(name).cause or '-'}; first {first}; {len(diagnosis.diagnoses)} "
              "diagnoses", flush=True)
        if args.verbose:
            for n, d in enumerate(diagnosis.diagnoses, 1):
                print(f"{'':<4}{n}. {d.finding.rule} [{d.finding.subject}] {d.worst.value} "
                      f"{d.confidence}: {d.finding.message[:160]}")
                for e in d.explains:
                    print(f"{'':<8}explains {e.rule} [{e.subject}] {e.steps}")
        for e in diagnosis.errors:
            print(f"{'':<4}internal error in {e.rule}: {e.error}")
    _print_matrix(rows)
    bad = _print_figures(tally, time.perf_counter() - started)
    print(f"runs in {root}")
    if not args.out:
        shutil.rmtree(root, ignore_errors=True)
    return 1 if bad else 0


def _print_figures(tally, seconds: float) -> int:
    """The three figures of the calibration table; returns the number of runs off target."""
    from tracelab.app.engine import all_rules
    faulty = [t for t in tally if t[0].cause]
    healthy = [t for t in tally if not t[0].cause]
    top1 = sum(v == "ok" for _, v, _, _ in faulty)
    per_run = [len(d.diagnoses) for _, _, d, _ in faulty]
    alarms = [len([d for d in dg.diagnoses if d.worst is not Severity.INFO])
              for _, _, dg, _ in faulty]
    warnings = sum(sum(f.severity is not Severity.INFO for f in d.findings)
                   for _, _, d, _ in healthy)
    errors = sum(len(d.errors) for _, _, d, _ in tally)
    seen = {c for sc, _, _, alarm in faulty for c in alarm | {sc.cause}}
    uncovered = sorted({s.name for s in all_rules()} - seen)
    print(f"\n{len(faulty)} faulty runs, {len(healthy)} healthy runs, {seconds:.0f} s")
    if faulty:
        print(f"top-1 (first diagnosis is the planted cause): {top1}/{len(faulty)} = "
              f"{100 * top1 / len(faulty):.1f}%")
        print(f"diagnoses per faulty run: {sum(per_run) / len(faulty):.2f} "
              f"(at warning or above: {sum(alarms) / len(faulty):.2f}; most {max(per_run)})")
    print(f"warnings or errors on healthy runs: {warnings} (in "
          f"{sum(v != 'ok' for _, v, _, _ in healthy)} of {len(healthy)} runs)")
    print(f"rule errors: {errors}; rules no faulty run raised: {', '.join(uncovered) or 'none'}")
    return sum(v != "ok" for _, v, _, _ in tally) + errors


def _print_matrix(rows) -> None:
    """Run x rule code: E(rror), W(arning), I(nfo) or '.' for nothing."""
    codes = sorted({c for _, _, cells in rows for c in cells})
    print(f"\n{'run':<32} {'verdict':<11} " + " ".join(c[2:] for c in codes))
    for label, verdict, cells in rows:
        print(f"{label:<32} {verdict:<11} " + " ".join(f"{cells.get(c, '.'):>3}" for c in codes))


if __name__ == "__main__":
    sys.exit(main())
