"""`tracelab diff` rendered: as text for the terminal, as one self-contained HTML page."""
from __future__ import annotations

import io
from pathlib import Path
from typing import Any, Optional

import numpy as np

from tracelab._version import __version__
from tracelab.core.files import write_atomic
from tracelab.reports.templating import environment
from tracelab.core.comparison import RANK_LABEL

MAX_POINTS = 2000


def _loss_svg(a, b, first_step: Optional[int]) -> Optional[str]:
    """Train loss of both runs, with the first divergent step marked."""
    from matplotlib.figure import Figure
    la, lb = a.loss(), b.loss()
    if not len(la) and not len(lb):
        return None
    fig = Figure(figsize=(9, 3.2))
    ax = fig.add_subplot()
    for series, label, color in ((la, "A", "#1f77b4"), (lb, "B", "#d62728")):
        if len(series):
            step = max(1, len(series) // MAX_POINTS)
            ax.plot(series.index[::step], series.to_numpy(float)[::step], color=color,
                    linewidth=1.0, label=label)
    if first_step is not None:
        ax.axvline(first_step, color="#555", linestyle="--", linewidth=0.8,
                   label=f"diverge at step {first_step}")
    finite = np.concatenate([la.to_numpy(float), lb.to_numpy(float)])
    finite = finite[np.isfinite(finite)]
    if len(finite) and finite.min() > 0 and finite.max() / finite.min() > 100:
        ax.set_yscale("log")
    ax.set_xlabel("step")
    ax.set_ylabel("train loss")
    ax.grid(alpha=0.3)
    ax.legend(frameon=False, fontsize=8)
    fig.tight_layout()
    buf = io.StringIO()
    fig.savefig(buf, format="svg")
    svg = buf.getvalue()
    return svg[svg.index("<svg"):]


def diff_text(d, *, limit: int = 10) -> str:
    """The diff as plain text, most telling first."""
    lines = [f"A: {d.a}", f"B: {d.b}"]
    for side, problems in d.unreadable.items():
        lines += [f"  unreadable in {side}, skipped: {p}" for p in problems]
    lines.append("")
    causes = d.causes
    if causes:
        head = ("The runs differ in one setting" if len(causes) == 1 else
                f"The runs differ in {len(causes)} settings that can change results")
        lines += [head + ":"] + [f"  {c.text()}" for c in causes[:limit]]
        if len(causes) > limit:
            lines.append(f"  … {len(causes) - limit} more (--json or --html lists them all)")
    else:
        lines.append("No difference in config, flags, optimizer, versions or model.")
    lines += [f"  note: {n}" for n in d.notes]
    rest = [c for c in d.changes if c not in causes]
    if rest:
        lines += ["", "Other setup differences:"]
        lines += [f"  {c.text()}  ({RANK_LABEL[c.rank]})" for c in rest[:limit]]
        if len(rest) > limit:
            lines.append(f"  … {len(rest) - limit} more")
    lines += ["", f"Series (first common step beyond rtol {d.rtol:g}, atol {d.atol:g}):"]
    if not d.series:
        lines.append("  no series in common")
    for s in d.series[:limit]:
        where = (f"diverge at step {s.first_step} (A {s.a_at:.6g}, B {s.b_at:.6g})"
                 if s.first_step is not None else f"equal over {s.common_steps} common steps")
        final = (f"; final A {s.final_a:.6g}, B {s.final_b:.6g}"
                 if s.final_a is not None and s.final_b is not None else "")
        lines.append(f"  {s.split}/{s.name}: {where}{final}")
    if d.layers or d.layers_only.get("a") or d.layers_only.get("b"):
        lines += ["", "Gradient norm per layer (B/A, median over common steps):"]
        for layer in d.layers[:limit]:
            first = (f"first beyond tolerance at step {layer.first_step}"
                     if layer.first_step is not None else "equal")
            lines.append(f"  {layer.name}: ×{layer.median_ratio:.3g} (range "
                         f"{layer.min_ratio:.3g}–{layer.max_ratio:.3g}); {first}")
        for side in ("a", "b"):
            if d.layers_only.get(side):
                lines.append(f"  only in {side.upper()}: {', '.join(d.layers_only[side][:limit])}")
    lines += ["", f"Input drift ({d.drift_note}):"]
    if not d.drift and not d.features:
        lines.append("  none found")
    lines += [f"  {f.code} {f.severity.value} {f.rule} [{f.subject}]: {f.message}"
              for f in d.drift]
    lines += [f"  {f.split}/{f.feature}: {'; '.join(f.why)}" for f in d.features[:limit]]
    for label, found in (("A", d.only_a), ("B", d.only_b)):
        lines += ["", f"Findings only in {label}:"]
        lines += [f"  {f.code} {f.severity.value} {f.rule} [{f.subject}]: {f.message}"
                  for f in found] or ["  none"]
    lines.append(f"\n{d.shared_findings} finding(s) in both runs.")
    return "\n".join(lines) + "\n"


def render_diff(diff, a, b) -> str:
    env = environment(trim_blocks=True, lstrip_blocks=True)
    loss = diff.loss
    context: dict[str, Any] = {
        "d": diff, "causes": diff.causes,
        "others": [c for c in diff.changes if c not in diff.causes],
        "rank_label": RANK_LABEL,
        "loss_svg": _loss_svg(a, b, loss.first_step if loss else None),
        "version": __version__,
    }
    return env.get_template("diff.html.j2").render(**context)


def write_diff_html(diff, a, b, path: Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_atomic(path, render_diff(diff, a, b))
