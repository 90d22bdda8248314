"""The HTML page of `tracelab diff`: one self-contained file (Jinja2, autoescaped, inline SVG)."""
from __future__ import annotations

import io
from pathlib import Path
from typing import Any, Optional

import jinja2
import numpy as np

from tracelab._version import __version__

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


def render_diff(diff, a, b) -> str:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(Path(__file__).parent / "templates"),
                             autoescape=True, trim_blocks=True, lstrip_blocks=True)
    loss = diff.loss
    context: dict[str, Any] = {
        "d": diff, "causes": diff.causes,
        "others": [c for c in diff.changes if c not in diff.causes],
        "rank_label": {0: "cause", 1: "version", 2: "incidental"},
        "loss_svg": _loss_svg(a, b, loss.first_step if loss else None),
        "version": __version__,
    }
    return env.get_template("diff.html.j2").render(**context)


def write_diff_html(diff, a, b, path: Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(render_diff(diff, a, b), encoding="utf-8")
    tmp.replace(path)
    return path
