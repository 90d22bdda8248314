"""Hand-built runs and diagnoses for the report tests (no rules needed, no torch)."""
from __future__ import annotations

import numpy as np
import pandas as pd

from tracelab.app.engine import all_rules
from tracelab.core.findings import Diagnosis, Finding, RuleError, Skipped
from tracelab.core.run import Run

EVIL = "<script>alert(1)</script>"


def synthetic_run(*, layers: int = 6, steps: int = 400, act_every: int = 10, modules: int = 4,
                  evil: bool = False, failed: bool = False, seed: int = 0,
                  kinds: tuple[str, ...] = ("weight", "grad", "update")) -> Run:
    """A plausible small training run: loss per split, LR, per-layer tensor stats, activations,
    input stats and samples. With `evil`, run-derived strings carry markup."""
    rng = np.random.default_rng(seed)
    names = [f"layers.{i}.weight" for i in range(layers)]
    if evil:
        names[1] = EVIL
    s = np.arange(steps)

    loss = 2.3 * np.exp(-s / (steps / 3)) + 0.1 + 0.05 * rng.standard_normal(steps) ** 2
    val_steps = s[::50]
    scalars = [pd.DataFrame({"step": s, "split": "train", "name": "loss", "value": loss}),
               pd.DataFrame({"step": s, "split": "train", "name": "acc",
                             "value": 1 - loss / 3}),
               pd.DataFrame({"step": s, "split": "train", "name": "lr/0",
                             "value": np.where(s < steps // 2, 0.1, 0.01)}),
               pd.DataFrame({"step": s, "split": "train", "name": "step_time",
                             "value": 0.02 + 0.002 * rng.random(steps)}),
               pd.DataFrame({"step": s, "split": "train", "name": "data_time",
                             "value": 0.004 + 0.001 * rng.random(steps)}),
               pd.DataFrame({"step": val_steps, "split": "val", "name": "loss",
                             "value": loss[val_steps] + 0.2}),
               pd.DataFrame({"step": val_steps, "split": "val", "name": "acc",
                             "value": 0.5 + 0.001 * rng.standard_normal(len(val_steps))})]
    sc = pd.concat(scalars, ignore_index=True)
    sc["wall_time"] = 1_700_000_000.0 + sc["step"] * 0.03

    n, k = steps, layers
    step_col = np.repeat(s, k)
    name_col = np.tile(np.array(names, dtype=object), n)
    depth = np.tile(np.arange(k), n)
    frames = []
    for kind in kinds:
        if kind == "grad":
            # The first two layers vanish; the rest spread over two decades.
            norm = np.where(depth < 2, 1e-6, 10.0 ** (-2 + 2 * depth / k)) \
                * (1 + 0.3 * rng.random(n * k))
        elif kind == "weight":
            norm = 5.0 + 0.001 * step_col + 0.1 * depth
        else:
            norm = (5.0 + 0.1 * depth) * 1e-3 * (1 + 0.5 * rng.random(n * k))
        frames.append(pd.DataFrame({"step": step_col, "kind": kind, "name": name_col,
                                    "numel": 1000, "norm": norm, "mean": 0.0, "std": norm / 30,
                                    "min": -norm / 10, "max": norm / 10, "abs_mean": norm / 40,
                                    "zero_frac": 0.0, "nan_count": 0, "inf_count": 0}))
    modules = [f"act{i}" for i in range(modules)]
    act_steps = s[::act_every]
    m = len(modules)
    a_step = np.repeat(act_steps, m)
    a_name = np.tile(np.array(modules, dtype=object), len(act_steps))
    dead = np.clip(np.tile(np.linspace(0.05, 0.2, m), len(act_steps))
                   + (a_name == "act0") * a_step / steps * 0.8, 0, 1)
    sigmoid = set(modules[-max(1, m // 4):])  # the last quarter are Sigmoid modules
    sat = np.where(np.isin(a_name, list(sigmoid)), 0.1 + 0.02 * rng.random(len(a_step)), np.nan)
    frames.append(pd.DataFrame({"step": a_step, "kind": "activation", "name": a_name,
                                "numel": 64, "norm": 3.0, "mean": 0.3, "std": 0.5,
                                "min": -1.0, "max": 1.0 + 0.1 * rng.random(len(a_step)),
                                "abs_mean": 0.4, "zero_frac": dead, "nan_count": 0,
                                "inf_count": 0, "dead_frac": dead, "saturated_frac": sat}))
    tensors = pd.concat(frames, ignore_index=True)

    feats = ["age", "income", EVIL if evil else "score", "day"]
    inp_rows, samples = [], []
    for split, st in (("train", s[::5]), ("val", val_steps)):
        for f in feats:
            scale = 1000.0 if f == "income" else 1.0
            shift = 0.5 if split == "val" and f == "age" else 0.0
            inp_rows.append(pd.DataFrame({
                "step": st, "split": split, "feature": f,
                "dtype": "datetime64[ns]" if f == "day" else "float32",
                "count": 32, "mean": scale * (0.5 + shift), "std": scale * 0.29,
                "min": 0.0, "max": scale * (1 + shift), "n_unique": 7 if f == "day" else 32,
                "int_frac": 0.0, "nan_count": 0, "inf_count": 0,
                "resolution": "D" if f == "day" else None}))
            samples.append(pd.DataFrame({"split": split, "feature": f, "step": st[0],
                                         "value": scale * (rng.random(200) + shift)}))
    inputs = pd.concat(inp_rows, ignore_index=True)

    status = {"state": "completed"}
    if failed:
        status = {"state": "failed", "exception_type": "RuntimeError",
                  "exception_message": "CUDA error: <device-side assert> & friends",
                  "traceback": "Traceback (most recent call last):\n  File \"train.py\", "
                               "line 3, in <module>\nRuntimeError: boom", "step": steps - 1}
    meta = {
        "name": f"run {EVIL}" if evil else "synthetic-mlp",
        "start_time": 1_700_000_000.0, "end_time": 1_700_000_000.0 + steps * 0.03 + 1,
        "status": status,
        "config": {"lr": 0.1, "batch_size": 32, "model": {"width": 64, "act": "relu"},
                   "note": EVIL if evil else "baseline"},
        "environment": {"python": "3.11.9", "torch": "2.13.0", "cuda_available": False,
                        "cudnn_benchmark": False, "cudnn_deterministic": False,
                        "deterministic_algorithms": False, "seed": 1234, "seed_set": False,
                        "hostname": EVIL if evil else "box", "git_commit": "0123456789abcdef"},
        "model": {"type": "MLP",
                  "modules": [{"path": p, "type": "Sigmoid" if p in sigmoid else "ReLU"}
                              for p in modules],
                  "parameters": [{"name": nm, "shape": [32, 32], "dtype": "float32",
                                  "device": "cpu", "requires_grad": True, "in_optimizer": True}
                                 for nm in names]},
        "optimizer": {"type": "SGD", "groups": [{"lr": 0.1, "momentum": 0.9}]},
    }
    return Run.from_frames(meta, scalars=sc, tensors=tensors, inputs=inputs,
                           samples=pd.concat(samples, ignore_index=True))


def synthetic_findings(run: Run) -> list[Finding]:
    names = run.names("grad")
    last = run.last_step
    return sorted([
        Finding("vanishing-gradients", "TL201", "warning", f"{names[0]} (+1 more)", (0, last),
                f"2 of {len(names)} layers get vanishing gradients ({names[0]}, {names[1]}): "
                f"'{names[0]}' receives 1e-6 per element.",
                {"layers": 2, "of_layers": len(names), "worst_grad_rms": 1.2e-6,
                 "ratio_to_largest": 1.1e-5},
                "Use ReLU-family activations, BatchNorm or residual connections."),
        Finding("dead-units", "TL203", "error", "act0", (last // 2, last),
                "85% of the units of 'act0' (ReLU) are dead over its last 20 recordings.",
                {"dead_frac": 0.85, "dead_frac_first": 0.05, "recordings": 20},
                "Lower the learning rate or use LeakyReLU."),
        Finding("train-val-mismatch", "TL301", "warning", "val", (0, last),
                "val inputs differ from train in 1 of 4 features: 'age' shifted by 0.5.",
                {"split": "val", "reference": "train", "features_compared": 4,
                 "worst": [{"feature": "age", "ks": 0.52, "w_over_std": 1.7, "p_value": 1e-9,
                            "method": "ks"}]},
                "Apply the preprocessing fitted on train to val."),
        Finding("nondeterminism-risk", "TL401", "info", "environment", None,
                "The script never seeded torch and cuDNN may pick non-deterministic kernels.",
                {"seed_set": False, "cudnn_deterministic": False},
                "Call torch.manual_seed and set cudnn.deterministic=True while debugging."),
        Finding("metric-stagnation", "TL106", "error", "val/acc", (0, last),
                "val acc stayed at chance over its last 8 evaluations: median 0.5.",
                {"median": 0.5, "chance": 0.5, "num_classes": 2},
                "Check the labels against the inputs."),
    ], key=lambda f: f.sort_key)


def synthetic_diagnosis(run: Run | None = None, **kw) -> Diagnosis:
    from tracelab.app.diagnose import diagnose
    run = run if run is not None else synthetic_run(**kw)
    findings, diagnoses = diagnose(run, synthetic_findings(run))
    return Diagnosis(
        run=run, findings=findings, diagnoses=diagnoses,
        skipped=[Skipped("rank-divergence", "TL501", "not recorded: a second rank")],
        errors=[RuleError("loss-spike", "TL102", "ValueError: odd <data> (loss_spike.py:12)")],
        rules_run=["vanishing-gradients", "dead-units", "train-val-mismatch",
                   "nondeterminism-risk", "metric-stagnation"],
        rules={s.name: s for s in all_rules()})
