"""nondeterminism-risk: the recorded settings make the run hard to reproduce.

What it detects
    From the recorded environment: no seed set by the user (torch's seed was drawn at random);
    and, when the model runs on CUDA, cuDNN autotuning on (``cudnn.benchmark``), cuDNN
    determinism off (``cudnn.deterministic``), and TF32 enabled for matmuls or convolutions
    (10-bit mantissa instead of float32's 23). With ``--baseline`` and a baseline recorded with the
    same config, it also compares the two training-loss curves.

Why it matters
    Without a fixed seed two runs of the same code differ, so a change cannot be told from noise
    and a failure cannot be replayed. Autotuned and non-deterministic cuDNN kernels differ from
    run to run even with a seed. TF32 trades precision for speed: code that converges on one GPU
    generation can diverge on another, where TF32 is on by default.

Example
    ``The run is not reproducible as recorded: no seed set; cudnn.benchmark on; TF32 enabled
    for matmul. The baseline run, recorded with the same config, ends with a training loss 38%
    away from this run's.``

How to fix
    Seed every generator (``torch.manual_seed``, ``numpy.random.seed``, ``random.seed``, the
    DataLoader's ``generator`` and ``worker_init_fn``; ``PYTHONHASHSEED``). When comparing or
    debugging set ``torch.backends.cudnn.benchmark = False``, ``cudnn.deterministic = True``,
    ``torch.backends.cuda.matmul.allow_tf32 = False`` and ``cudnn.allow_tf32 = False``
    (or ``torch.use_deterministic_algorithms(True)``).

False positives
    These are hazards, reported at info severity: many runs never need bit-exact reproduction.
    It becomes a warning only when a baseline with the same config has a training loss that
    differs by more than `divergence` (relative) over the last quarter of their common steps.
    CUDA settings are ignored on runs that do not use CUDA.
"""
from __future__ import annotations

import numpy as np

from tracelab.analyzers._inputs import fmt
from tracelab.core.findings import INFO, WARNING, Finding
from tracelab.core.rules import Plot, rule
from tracelab.core.run import Run
from tracelab.core.schema import Needs


@rule(name="nondeterminism-risk", code="TL401", requires=(Needs.ENVIRONMENT,), plot=Plot.NONE)
def nondeterminism_risk(run: Run, *, divergence: float = 0.1, min_common_steps: int = 10,
                        baseline: Run | None = None) -> list[Finding]:
    env = run.meta.get("environment") or {}
    hazards = []
    if env.get("seed_set") is False:
        hazards.append(f"no seed set (torch drew seed {env.get('seed')} at random)")
    if _uses_cuda(run):
        if env.get("cudnn_benchmark"):
            hazards.append("cudnn.benchmark on (autotuned kernels vary between runs)")
        if env.get("cudnn_deterministic") is False and not env.get("deterministic_algorithms"):
            hazards.append("cudnn.deterministic off")
        tf32 = [n for n, key in (("matmul", "tf32_matmul"), ("cuDNN convolutions", "tf32_cudnn"))
                if env.get(key)]
        if tf32:
            hazards.append(f"TF32 enabled for {' and '.join(tf32)}")
    if not hazards:
        return []
    severity, evidence = INFO, {"hazards": hazards}
    text = f"The run is not reproducible as recorded: {'; '.join(hazards)}."
    diverged = _divergence(run, baseline, min_common_steps) if baseline is not None else None
    if diverged is not None and diverged[0] > divergence:
        gap, step, changed = diverged
        severity = WARNING
        text += (f" The baseline run, recorded with the same config, ends with a training "
                 f"loss {gap:.0%} away from this run's (mean gap over the last quarter of their "
                 f"common steps, up to step {step})")
        text += f"; its environment differed in {', '.join(changed)}." if changed else "."
        evidence.update(baseline_loss_gap=gap, gap_step=step, environment_changes=changed)
    steps = run.step_range
    return [nondeterminism_risk.finding(
        severity, "environment", steps, text, evidence,
        "Seed torch, numpy, random and DataLoader workers; when comparing runs set "
        "cudnn.benchmark=False, cudnn.deterministic=True and disable TF32 "
        "(torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False).")]


def _uses_cuda(run: Run) -> bool:
    env = run.meta.get("environment") or {}
    params = list(run.parameters().values())
    if params:
        return any(str(p.get("device", "")).startswith("cuda") for p in params)
    return bool(env.get("cuda_available"))


_COMPARED = ("torch", "cuda", "cudnn", "devices", "cudnn_benchmark", "cudnn_deterministic",
             "tf32_matmul", "tf32_cudnn", "float32_matmul_precision", "seed")


def _divergence(run: Run, baseline: Run, min_common: int) -> tuple[float, int, list] | None:
    """Relative gap between the two loss curves over their last common quarter, if both ran
    the same config: mean |difference| / mean |baseline loss|. One noisy step cannot decide."""
    if (run.meta.get("config") or {}) != (baseline.meta.get("config") or {}):
        return None
    a, b = run.loss(), baseline.loss()
    common = a.index.intersection(b.index)
    x, y = a.loc[common].to_numpy(float), b.loc[common].to_numpy(float)
    ok = np.isfinite(x) & np.isfinite(y)
    if ok.sum() < min_common:
        return None
    tail = slice(-max(min_common, int(ok.sum()) // 4), None)
    x, y = x[ok][tail], y[ok][tail]
    gap = float(np.mean(np.abs(x - y)) / max(float(np.mean(np.abs(y))), 1e-12))
    env, base_env = run.meta.get("environment") or {}, baseline.meta.get("environment") or {}
    changed = [f"{k} {fmt_env(base_env.get(k))} → {fmt_env(env.get(k))}" for k in _COMPARED
               if env.get(k) != base_env.get(k)]
    return gap, int(common[ok][-1]), changed


def fmt_env(value) -> str:
    return fmt(value) if isinstance(value, float) else str(value)
