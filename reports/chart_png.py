"""A chart spec (reports/chart.py) drawn as a PNG file with matplotlib: the Markdown summary's
plots. Tickets take PNG attachments everywhere (GitHub, Jira, GitLab), SVG in few of them,
so the summary's plots stay images; matplotlib is imported here, on first use, and nowhere on
the HTML report's path.

Figures are built with the object API (`matplotlib.figure.Figure`), never pyplot, so nothing
lands in pyplot's global figure registry and nothing needs a display.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from tracelab.core.errors import TracelabError
from tracelab.core.files import atomic_path
from tracelab.reports.plots import MARK

# PNG files tracelab writes carry this in their Software text chunk: a rerun may replace its own
# plots, never a file of the user's that happens to have the same name.
PNG_SOFTWARE = "tracelab"
_RC = {
    "font.family": "sans-serif", "font.size": 9.5, "axes.titlesize": 10,
    "axes.titleweight": "bold", "axes.titlelocation": "left", "axes.spines.top": False,
    "axes.spines.right": False, "axes.grid": True, "grid.color": "#e4e4e4",
    "grid.linewidth": 0.6, "axes.edgecolor": "#888888", "legend.frameon": False,
    "legend.fontsize": 8.5, "image.interpolation": "none", "path.simplify": True,
}


def _text(s: str) -> str:
    """Run-derived text for matplotlib: a `$` would start mathtext."""
    return s.replace("$", r"\$")


def _png_is_ours(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            return b"Software\x00" + PNG_SOFTWARE.encode() in f.read(4096)
    except OSError:
        return False


def to_png(spec: dict[str, Any], path: Path) -> Path:
    """Draw `spec` into `path`; a file already there that tracelab did not write is refused."""
    if path.exists() and not _png_is_ours(path):
        raise TracelabError(f"{path}: a file tracelab did not write is in the way of a plot of the "
                            "Markdown summary; move it, or write the summary elsewhere")
    import matplotlib
    from matplotlib.figure import Figure

    with matplotlib.rc_context(_RC):
        fig = Figure(figsize=(spec["width"], spec["height"]), layout="constrained")
        cell = spec["panels"][0]["render"]["cell"]
        grid = fig.add_gridspec(cell["rows"], cell["cols"], height_ratios=cell["height_ratios"],
                                width_ratios=cell["width_ratios"])
        for p in spec["panels"]:
            ax = fig.add_subplot(grid[p["render"]["cell"]["row"], p["render"]["cell"]["col"]])
            _panel(fig, ax, p)
        with atomic_path(path) as tmp:
            fig.savefig(tmp, format="png", dpi=110, metadata={"Software": PNG_SOFTWARE})
    return path


def _panel(fig, ax, p: dict[str, Any]) -> None:
    from matplotlib.colors import Normalize
    from matplotlib.ticker import FuncFormatter, NullFormatter

    for s in p["spans"]:
        ax.axvspan(s["x0"], s["x1"], color=s["color"], alpha=s["alpha"], lw=0, zorder=0)
    for b in p["bands"]:
        ax.fill_between(b["x"], b["lo"], b["hi"], color=b["color"], alpha=b["alpha"], lw=0,
                        label=_text(b["label"]) or None)
    for r in p["rects"]:
        ax.add_patch(_rect(r))
    for label, color in p["render"]["labels"]:
        ax.bar([np.nan], [np.nan], color=color, alpha=0.5, label=_text(label))  # legend entry
    for s in p["series"]:
        style = {"ls": "none", "marker": "o", "ms": 4} if s["points"] else \
            {"ls": "--" if s["dash"] else "-", "lw": s["width"]}
        ax.plot(s["x"], s["y"], color=s["color"], alpha=s["alpha"],
                label=_text(s["label"]) or None, **style)
    for v in p["vlines"]:
        ax.axvline(v["x"], color=v["color"], lw=1.3, ls="--")
    for v in p["hlines"]:
        ax.axhline(v["y"], color=v["color"], lw=1.1, ls=":")
    if p["image"]:
        x0, x1, y0, y1 = p["image"]["extent"]
        ax.imshow(p["image"]["rgba"], aspect="auto", extent=(x0, x1, y0, y1))
        ax.grid(False)
        bar = p["render"]["colorbar"]
        if bar:
            import matplotlib
            name = "RdBu_r" if bar["diverging"] else None
            cmap = matplotlib.colormaps[name] if name else _heat()
            sm = matplotlib.cm.ScalarMappable(Normalize(bar["lo"], bar["hi"]), cmap)
            cb = fig.colorbar(sm, ax=ax, pad=0.03, fraction=0.03)
            cb.set_label(_text(bar["label"]), fontsize=7.5)
            cb.ax.tick_params(labelsize=7)
    for axis, log in (("x", p["xlog"]), ("y", p["ylog"])):
        if log:
            getattr(ax, f"set_{axis}scale")("log")
            a = getattr(ax, f"{axis}axis")
            a.set_major_formatter(FuncFormatter(_log_label))  # plain text, no mathtext
            a.set_minor_formatter(NullFormatter())
    ax.set_xlim(p["xlim"])
    ax.set_ylim(p["ylim"])
    if p["yticks"]:
        ticks = [t for t, _ in p["yticks"]]
        ax.set_yticks(ticks, [_text(s) for _, s in p["yticks"]], fontsize=7 if len(ticks) <= 30
                      else 6)
        marked = set(p["render"]["marked_ticks"])
        for t, pos in zip(ax.get_yticklabels(), ticks):
            if pos in marked:
                t.set_color(MARK)
    ax.set_title(_text(p["title"]))
    ax.set_xlabel(_text(p["xlabel"]))
    ax.set_ylabel(_text(p["ylabel"]))
    if p["notes"]:
        ax.text(1.0, 1.0, _text(" · ".join(p["notes"])),
                transform=ax.transAxes, ha="right", va="bottom", fontsize=7.5, color=MARK)
    if p["legend"] and ax.get_legend_handles_labels()[0]:
        if p["render"]["legend_outside"]:
            ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
        else:
            ax.legend(loc="best")


def _rect(r: dict[str, Any]):
    from matplotlib.patches import Rectangle
    return Rectangle((r["x"], r["y"]), r["w"], r["h"], color=r["color"], alpha=r["alpha"], lw=0)


def _heat():
    from matplotlib.colors import LinearSegmentedColormap

    from tracelab.reports.heatmap_pixels import HEAT
    return LinearSegmentedColormap.from_list("tracelab_heat", list(HEAT))


def _log_label(v: float, _pos=None) -> str:
    if v <= 0 or not np.isfinite(v):
        return ""
    e = np.log10(v)
    return f"1e{int(round(e))}" if abs(e - round(e)) < 1e-9 and abs(e) > 2 else f"{v:g}"
