"""The report's content as plain data: what the HTML template and the Markdown writer render.

`build_context(diagnosis)` returns dicts, lists, strings and numbers only. Run-derived strings
stay raw here; escaping is the renderer's job (Jinja2 autoescape for HTML), so the context can
be checked as data in tests. Plots are data URIs, or None with `plots=False`.
"""
from __future__ import annotations

import math
from datetime import datetime, timezone
from typing import Any, Optional

import numpy as np
import pandas as pd

from tracelab._version import __version__
from tracelab.core.findings import Diagnosis, Severity
from tracelab.core.run_status import recording_stopped
from tracelab.reports import fmt
from tracelab.reports.findings_context import SEVERITY_LABELS, findings_and_diagnoses
from tracelab.reports.finding_plots import mentioned
from tracelab.reports.overview import OVERVIEW
from tracelab.reports.chart_html import rendered
from tracelab.reports.plots import unique

__all__ = ["SEVERITY_LABELS", "build_context"]
from tracelab.core.schema import (ACTIVATION, GRAD, REQUIREMENTS, STEP_TIME, UPDATE,
                                   WEIGHT, Needs)

MAX_FEATURES = 40
# Environment keys that decide whether a run can be reproduced, in reading order.
REPRO_KEYS = ("seed_set", "seed", "pythonhashseed", "deterministic_algorithms",
              "cudnn_deterministic", "cudnn_benchmark", "tf32_matmul", "tf32_cudnn",
              "float32_matmul_precision", "git_commit")


def build_context(diagnosis: Diagnosis, *, plots: bool = True) -> dict[str, Any]:
    run = diagnosis.run
    return {
        "tracelab_version": __version__,
        "generated": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "run": run_header(run),
        "verdict": verdict(diagnosis),
        "severities": [{"key": s.value, "label": SEVERITY_LABELS[s.value],
                        "count": diagnosis.counts()[s.value]} for s in Severity],
        **findings_and_diagnoses(diagnosis, plots=plots),
        "overview": {"plots": overview_plots(diagnosis, plots=plots),
                     "inputs": input_tables(run)},
        "environment": environment(run.meta.get("environment") or {}),
        "config": fmt.flatten(run.meta.get("config") or {}),  # values as given, no grouping
        "recorded": recorded(run),
        "model": model_summary(run.meta),
        "skipped": [{"rule": s.rule, "code": s.code, "reason": s.reason}
                    for s in diagnosis.skipped],
        "problems": list(run.problems),
        "errors": [{"rule": e.rule, "code": e.code, "error": e.error} for e in diagnosis.errors],
        "rules_run": list(diagnosis.rules_run),
        "baseline": diagnosis.baseline.name if diagnosis.baseline is not None else None,
    }


# -- header ---------------------------------------------------------------------------------------
def run_header(run) -> dict[str, Any]:
    summary = run.summary()
    status = summary["status_detail"]
    state = status.get("state") or "unknown"
    first, last = summary["steps"]
    detail, trace = "", None
    if state == "failed":
        exc = status.get("exception_type") or "an exception"
        msg = status.get("exception_message") or ""
        at = status.get("step", last)
        detail = f"at step {fmt.number(at)} with {exc}" + (f": {msg}" if msg else "")
        trace = status.get("traceback") or None
    elif state == "killed":
        at = status.get("last_step", last)
        detail = ("killed before its first step" if at is None
                  else f"killed after step {fmt.number(at)}") + ", no exception recorded"
    elif state == "running":
        detail = "still being written, or its writer stopped less than a minute ago"
    stopped = recording_stopped(status)
    if stopped:
        detail = "; ".join(filter(None, [detail, f"{stopped}; training went on"]))
    n_steps = int(run.scalars["step"].nunique()) if len(run.scalars) else None
    end = summary["end_time"]
    duration, approx = summary["duration_s"], False
    if duration is None and summary["start_time"] and len(run.scalars):
        wall = pd.to_numeric(run.scalars["wall_time"], errors="coerce").max()
        if isinstance(wall, float) and math.isfinite(wall):
            duration, approx = wall - summary["start_time"], True
    return {
        "name": run.name,
        "path": summary["path"],
        "state": state,
        "ok": state == "completed",
        "detail": detail,
        "traceback": trace,
        "first_step": first,
        "last_step": last,
        "steps_text": f"{fmt.number(first)}–{fmt.number(last)}" if first is not None else "—",
        "logged_steps": n_steps,
        "started": fmt.timestamp(summary["start_time"]) if summary["start_time"] else "—",
        "ended": fmt.timestamp(end) if end else "—",
        "duration": ("≥ " if approx else "") + fmt.duration(duration),
        "highlights": highlights(run.meta, _median_step_time(run)),
    }


def _median_step_time(run) -> Optional[float]:
    times = run.scalar(STEP_TIME)
    return float(times.median()) if len(times) else None


def highlights(meta: dict[str, Any], step_time: Optional[float] = None
               ) -> list[tuple[str, str]]:
    env = meta.get("environment") or {}
    out = []
    if env.get("python") or env.get("torch"):
        out.append(("software", " · ".join(p for p in (
            f"Python {env['python']}" if env.get("python") else "",
            f"torch {env['torch']}" if env.get("torch") else "") if p)))
    devices = env.get("devices")
    if env.get("cuda_available"):
        names = ", ".join(str(d.get("name", d)) if isinstance(d, dict) else str(d)
                          for d in (devices or [])) or "CUDA"
        out.append(("device", f"{names} (CUDA {env.get('cuda') or '?'})"))
    elif env:
        out.append(("device", "CPU only" + (" (CUDA unavailable)" if "cuda_available" in env
                                           else "")))
    if "seed_set" in env:
        out.append(("seed", f"set ({fmt.plain(env.get('seed'))})" if env["seed_set"]
                    else "not set by the script"))
    model = meta.get("model") or {}
    if model.get("type"):
        n = _param_count(model)
        out.append(("model", model["type"] + (f", {fmt.number(n)} parameters" if n else "")))
    opt = meta.get("optimizer") or {}
    if opt.get("type"):
        lrs = [g.get("lr") for g in opt.get("groups", []) if isinstance(g, dict)]
        lr = fmt.value(lrs[0] if len(lrs) == 1 else lrs) if lrs else None
        out.append(("optimizer", opt["type"] + (f", lr {lr}" if lr else "")))
    cost = (meta.get("recorder") or {}).get("cost") or {}
    if cost.get("steps"):
        per_step = {k: 1e3 * float(cost.get(k) or 0) / cost["steps"]
                    for k in ("training_thread_s", "writer_cpu_s")}
        share = ""
        if step_time and step_time > 0:
            share = f" ({per_step['training_thread_s'] / (10 * step_time):.1f}% of the median step)"
        out.append(("recording cost", f"{per_step['training_thread_s']:.2f} ms per step on the "
                    f"training thread{share}, {per_step['writer_cpu_s']:.2f} ms writer CPU"))
    if env.get("git_commit"):
        out.append(("commit", str(env["git_commit"])[:12]))
    if env.get("hostname"):
        out.append(("host", str(env["hostname"])))
    return out


def _param_count(model: dict[str, Any]) -> Optional[int]:
    total = 0
    for p in model.get("parameters", []):
        shape = p.get("shape") if isinstance(p, dict) else None
        if isinstance(shape, (list, tuple)) and all(isinstance(x, int) for x in shape):
            total += int(np.prod(shape)) if shape else 1
    return total or None


def verdict(d: Diagnosis) -> dict[str, Any]:
    worst = d.worst.value if d.worst else None
    return {"worst": worst, "label": SEVERITY_LABELS[worst], "text": d.verdict(),
            "counts": d.counts(), "errors": len(d.errors)}


def tensor_kinds(run) -> list[str]:
    """The tensor kinds the run recorded (from what the analysis found available)."""
    return [kind for kind, need in ((WEIGHT, Needs.WEIGHTS), (GRAD, Needs.GRADS),
                                    (UPDATE, Needs.UPDATES), (ACTIVATION, Needs.ACTIVATIONS))
            if need in run.available]


def overview_plots(d: Diagnosis, *, plots: bool = True) -> list[dict[str, Any]]:
    out = []
    names = {n for kind in tensor_kinds(d.run) for n in d.run.stat(kind, "norm").columns}
    # Only subjects and evidence: messages also name the healthy layers they compare with.
    marked = {m for f in d.findings if f.severity is not Severity.INFO
              for m in mentioned(f, names, message=False)}
    for title, fn, caption in OVERVIEW:
        entry = {"title": title, "caption": caption, "function": fn.__name__, "uri": None,
                 "chart": None, "note": ""}
        if plots:
            try:
                entry["uri"], entry["chart"] = rendered(fn(d.run, marked))
            except Exception as exc:  # odd data costs a plot, never the report
                entry["note"] = f"plot unavailable ({type(exc).__name__}: {exc})"
            if entry["uri"] is None and not entry["note"]:
                continue
        out.append(entry)
    return out


# -- inputs ---------------------------------------------------------------------------------------
def input_tables(run) -> list[dict[str, Any]]:
    """One table per split: each feature's dtype, range and cardinality over the whole run."""
    inp = run.inputs
    if not len(inp):
        return []
    tables = []
    for split in run.splits():
        rows = inp[inp["split"] == split]
        if not len(rows):
            continue
        g = rows.groupby("feature", sort=False)
        agg = g.agg(dtype=("dtype", _mode), batches=("step", "nunique"), count=("count", "sum"),
                    mean=("mean", "mean"), std=("std", "mean"), min=("min", "min"),
                    max=("max", "max"), distinct=("n_unique", "median"),
                    distinct_max=("n_unique", "max"), nan=("nan_count", "sum"),
                    inf=("inf_count", "sum"), resolution=("resolution", _mode))
        table = [_feature_row(name, r) for name, r in agg.head(MAX_FEATURES).iterrows()]
        tables.append({"split": split, "rows": table,
                       "more": max(0, len(agg) - MAX_FEATURES)})
    return tables


def _feature_row(name: Any, r: pd.Series) -> dict[str, str]:
    dtype = str(r["dtype"] or "—")
    # Datetime stats are epoch seconds: show them as dates and the spread as a duration.
    when = fmt.moment if dtype.startswith("datetime") else (lambda v: fmt.number(_f(v)))
    spread = (lambda v: fmt.duration(_f(v))) if dtype.startswith("datetime") else \
        (lambda v: fmt.number(_f(v)))
    return {"feature": str(name), "dtype": dtype,
            "batches": fmt.number(_int(r["batches"])), "mean": when(r["mean"]),
            "std": spread(r["std"]), "min": when(r["min"]), "max": when(r["max"]),
            "distinct": f"{fmt.number(_f(r['distinct']))} "
                        f"(max {fmt.number(_int(r['distinct_max']))})",
            "nonfinite": fmt.number(_int(r["nan"] + r["inf"])),
            "resolution": r["resolution"] if isinstance(r["resolution"], str) else ""}


def _mode(s: pd.Series) -> Optional[str]:
    s = s.dropna()
    return str(s.mode().iloc[0]) if len(s) else None


def _f(v: Any) -> Optional[float]:
    try:
        v = float(v)
    except (TypeError, ValueError):
        return None
    return v if not math.isnan(v) else None


def _int(v: Any) -> Optional[int]:
    v = _f(v)
    return int(v) if v is not None and math.isfinite(v) else None


# -- sections -------------------------------------------------------------------------------------
def environment(env: dict[str, Any]) -> dict[str, list[tuple[str, str, str]]]:
    """(key, value, note) rows: reproducibility first, then software and hardware."""
    notes = {
        ("seed_set", False): "the script did not seed torch; runs will differ",
        ("deterministic_algorithms", False): "torch.use_deterministic_algorithms is off",
    }
    if env.get("cuda_available"):  # cuDNN and TF32 flags do nothing on a CPU-only run
        notes.update({
            ("cudnn_benchmark", True): "cuDNN picks algorithms by timing: results may vary",
            ("cudnn_deterministic", False): "cuDNN may use non-deterministic kernels",
            ("tf32_matmul", True): "matmuls run in TF32 (lower precision than FP32)",
            ("tf32_cudnn", True): "convolutions run in TF32",
        })
    repro = [(k, fmt.plain(env[k]), notes.get((k, env[k]), "") if isinstance(env[k], bool)
              else "") for k in REPRO_KEYS if k in env]
    rest = [(k, fmt.plain(v), "") for k, v in env.items() if k not in REPRO_KEYS]
    return {"reproducibility": repro, "system": rest}


def recorded(run) -> dict[str, Any]:
    sc, inp = run.scalars, run.inputs
    rows = []

    def counted(frame, what) -> dict[str, tuple[list, int]]:
        """Per split: the distinct values of `what`, and the number of distinct steps."""
        splits = frame["split"].to_numpy()
        out = {}
        for split in pd.unique(splits):
            part = splits == split
            out[split] = (unique(frame[what][part]), len(np.unique(frame["step"].to_numpy()[part])))
        return out

    scal = counted(sc, "name") if len(sc) else {}
    for split in run.splits():
        if split in scal:
            names, steps = scal[split]
            rows.append((f"scalars ({split})", f"{fmt.value(sorted(names))} at "
                                               f"{fmt.number(steps)} steps"))
    for kind, what in ((WEIGHT, "weight stats"), (GRAD, "gradient stats"),
                       (UPDATE, "update stats"), (ACTIVATION, "activation stats")):
        # The run's step x name view, which the analysis has built already: a group-by of
        # the whole tensor table would cost more than the rest of the report.
        wide = run.stat(kind, "norm") if kind in tensor_kinds(run) else None
        if wide is not None and wide.shape[1]:
            rows.append((what, f"{wide.shape[1]} tensors at {fmt.number(wide.shape[0])} steps"))
    cadence = grad_cadence(run.meta.get("recorder"))
    if cadence:
        rows.append(("gradient stats cadence", cadence))
    feats = counted(inp, "feature") if len(inp) else {}
    for split in run.splits():
        if split in feats:
            names, steps = feats[split]
            rows.append((f"inputs ({split})", f"{len(names)} features at "
                                              f"{fmt.number(steps)} steps"))
    cadence = input_cadence(run.meta.get("recorder"))
    if cadence:
        rows.append(("input profile cadence", cadence))
    if len(run.samples):
        rows.append(("input samples", f"{fmt.number(len(run.samples))} values"))
    for what, why in run.absent.items():
        rows.append((f"{what} (absent)", why))
    have = run.available
    return {"rows": rows,
            "missing": [r.label for r in REQUIREMENTS if r not in have]}


def grad_cadence(recorder: Any) -> str | None:
    """How often the Recorder's cost budget let it record the grads (meta.json's
    recorder.grad_every: [from step, every] pairs), where it changed; else None."""
    return _cadence(recorder, "grad_every", "grad_budget")


def input_cadence(recorder: Any) -> str | None:
    """How often the Recorder's cost budget let it profile the train inputs (meta.json's
    recorder.input_cadence), where it changed; else None."""
    return _cadence(recorder, "input_cadence", "input_budget")


def _cadence(recorder: Any, key: str, budget_key: str) -> str | None:
    changes = recorder.get(key) if isinstance(recorder, dict) else None
    if not isinstance(changes, list) or len(changes) < 2 or not all(
            isinstance(c, list) and len(c) == 2
            and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in c)
            for c in changes):
        return None
    parts = []
    for (start, every), after in zip(changes, changes[1:] + [None]):
        when = "every step" if every == 1 else f"every {fmt.ordinal(every)} step"
        span = f"steps {fmt.number(start)}-{fmt.number(after[0] - 1)}" if after else \
            f"from step {fmt.number(start)}"
        parts.append(f"{when} ({span})")
    budget = recorder.get(budget_key)
    why = f", within the Recorder's budget of {fmt.number(budget * 100)}% of the training " \
        "time" if isinstance(budget, float) else ""
    return ", then ".join(parts) + why


def model_summary(meta: dict[str, Any]) -> dict[str, Any]:
    model = meta.get("model") or {}
    params = [p for p in model.get("parameters", []) if isinstance(p, dict)]
    frozen = [p.get("name") for p in params if p.get("requires_grad") is False]
    outside = [p.get("name") for p in params
               if p.get("requires_grad") is not False and p.get("in_optimizer") is False]
    opt = meta.get("optimizer") or {}
    groups = [fmt.flatten({k: v for k, v in g.items() if k != "params"})
              for g in opt.get("groups", []) if isinstance(g, dict)]
    return {"type": model.get("type"), "parameters": _param_count(model),
            "tensors": len(params), "modules": len(model.get("modules", [])),
            "frozen": frozen, "not_in_optimizer": outside, "optimizer": opt.get("type"),
            "groups": groups}
