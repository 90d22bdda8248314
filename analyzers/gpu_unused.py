"""gpu-unused: CUDA is available but the model's parameters stay on the CPU.

What it detects
    The recorded environment says a CUDA device was available, yet every parameter of the
    recorded model lives on the CPU (a warning); or some parameters are on the GPU and others
    on the CPU (info: deliberate offloading, or a submodule created after ``model.to(device)``).

Why it matters
    The run takes the CPU's time while the GPU idles: a step that takes milliseconds on the
    device takes tens or hundreds on the host. Nothing fails, so it goes unnoticed until the run
    is slow enough to question.

Example
    ``CUDA was available (NVIDIA A100-SXM4-40GB) but all 6 parameters (1.2M values) stayed on
    the CPU.``

How to fix
    Pick the device once (``device = torch.device("cuda" if torch.cuda.is_available() else
    "cpu")``), call ``model.to(device)`` before creating the optimizer, and move every batch
    (``x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)``, with
    ``pin_memory=True`` in the DataLoader).

False positives
    A run kept on the CPU on purpose (debugging a tiny model on a GPU machine) is reported too;
    ignore the rule for such runs. Where input batches live is not recorded; a model on the GPU
    fed CPU tensors fails loudly, so parameters carry the signal.
"""
from __future__ import annotations

import math

from tracelab.core.findings import INFO, WARNING, Finding
from tracelab.core.rules import Plot, rule
from tracelab.core.run import Run
from tracelab.core.schema import Needs


@rule(name="gpu-unused", code="TL402", requires=(Needs.ENVIRONMENT, Needs.MODEL), plot=Plot.NONE)
def gpu_unused(run: Run, *, max_listed: int = 5) -> list[Finding]:
    env = run.meta.get("environment") or {}
    params = list(run.parameters().values())
    if not env.get("cuda_available") or not params:
        return []
    on_cpu = [p for p in params if str(p.get("device", "")).startswith("cpu")]
    if not on_cpu:
        return []
    gpus = ", ".join(dict.fromkeys(env.get("devices") or [])) or "a CUDA device"
    values = sum(math.prod(p.get("shape") or [1]) for p in on_cpu)
    steps = run.step_range
    inputs = run.meta.get("input_devices") or {}
    cpu_inputs = sorted(k for k, d in inputs.items() if str(d).startswith("cpu"))
    if len(on_cpu) == len(params):
        batches = (f"; the recorded input batches ({', '.join(cpu_inputs[:3])}) were on the CPU "
                   "too" if cpu_inputs else "")
        return [gpu_unused.finding(
            WARNING, "model", steps,
            f"CUDA was available ({gpus}) but all {len(params)} parameters ({_count(values)} "
            f"values) stayed on the CPU: the model trained on the CPU{batches}.",
            {"devices": env.get("devices") or [], "parameters_on_cpu": len(on_cpu),
             "values_on_cpu": values, "inputs_on_cpu": cpu_inputs},
            "Call model.to(device) with device = torch.device('cuda') before creating the "
            "optimizer, and move each batch with x.to(device, non_blocking=True) "
            "(DataLoader(pin_memory=True)).")]
    names = ", ".join(p.get("name", "?") for p in on_cpu[:max_listed])
    more = f" and {len(on_cpu) - max_listed} more" if len(on_cpu) > max_listed else ""
    return [gpu_unused.finding(
        INFO, "model", steps,
        f"{len(on_cpu)} of {len(params)} parameters ({_count(values)} values) stay on the CPU "
        f"while the rest run on {gpus}: {names}{more}.",
        {"parameters_on_cpu": [p.get("name") for p in on_cpu[:50]], "values_on_cpu": values},
        "If the split is not deliberate offloading, move the model after building all of it "
        "(model.to(device) once every submodule exists) and register submodules in "
        "nn.ModuleList/ModuleDict so that .to() reaches them.")]


def _count(n: int) -> str:
    for unit, size in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if n >= size:
            return f"{n / size:.1f}{unit}"
    return str(n)
