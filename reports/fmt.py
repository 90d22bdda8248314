"""Formatting of values for people: numbers, durations, step ranges, rule docstrings."""
from __future__ import annotations

import math
import re
from datetime import datetime, timezone
from typing import Any, Optional

from tracelab.core.rules import DOC_SECTIONS

MAX_ITEMS = 12


def ordinal(n: int) -> str:
    """2nd, 3rd, 4th, 11th, 21st."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n:,}{suffix}"


def number(value: Any) -> str:
    """A compact, exact-enough rendering: 0.0123, 1.23e-07, 12,345, yes/no."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "∞" if value > 0 else "−∞"
        if value == int(value) and abs(value) < 1e15:
            return f"{int(value):,}"
        a = abs(value)
        return f"{value:.3g}" if a >= 1e5 or a < 1e-3 else f"{value:.4g}"
    return str(value)


def value(v: Any) -> str:
    """Any evidence or config value as one line of text."""
    if isinstance(v, dict):
        return ", ".join(f"{k}={value(x)}" for k, x in list(v.items())[:MAX_ITEMS]) + (
            f", … (+{len(v) - MAX_ITEMS})" if len(v) > MAX_ITEMS else "")
    if isinstance(v, (list, tuple, set)):
        items = list(v)
        shown = ", ".join(value(x) for x in items[:MAX_ITEMS])
        return shown + (f", … (+{len(items) - MAX_ITEMS})" if len(items) > MAX_ITEMS else "")
    return number(v)


def plain(v: Any) -> str:
    """A value as its user wrote it (config, environment): no digit grouping, yes/no for bools,
    shortest float repr."""
    if isinstance(v, bool):
        return "yes" if v else "no"
    if v is None:
        return "—"
    if isinstance(v, (int, float, str)):
        return str(v)
    if isinstance(v, dict):
        return ", ".join(f"{k}={plain(x)}" for k, x in v.items())
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(plain(x) for x in v) + "]"
    return str(v)


def humanize(key: str) -> str:
    return str(key).replace("_", " ")


def steps(rng: Optional[tuple[int, int]]) -> str:
    if not rng:
        return "—"
    a, b = rng
    return f"step {a:,}" if a == b else f"steps {a:,}–{b:,}"


def duration(seconds: Optional[float]) -> str:
    if seconds is None or not math.isfinite(seconds) or seconds < 0:
        return "—"
    if seconds < 60:
        return f"{seconds:.1f} s"
    m, s = divmod(int(round(seconds)), 60)
    if m < 60:
        return f"{m} min {s:02d} s"
    h, m = divmod(m, 60)
    if h < 48:
        return f"{h} h {m:02d} min"
    d, h = divmod(h, 24)
    return f"{d} d {h} h"


def timestamp(epoch: Any) -> str:
    if not isinstance(epoch, (int, float)) or isinstance(epoch, bool):
        return "—" if epoch is None else str(epoch)
    try:
        return datetime.fromtimestamp(epoch, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    except (OverflowError, OSError, ValueError):
        return str(epoch)


def moment(epoch: Any) -> str:
    """Epoch seconds as a date, with the time of day only when it is not midnight."""
    try:
        t = datetime.fromtimestamp(float(epoch), tz=timezone.utc)
    except (TypeError, ValueError, OverflowError, OSError):
        return "—"
    return t.strftime("%Y-%m-%d") if (t.hour, t.minute, t.second) == (0, 0, 0) else \
        t.strftime("%Y-%m-%d %H:%M:%S")


def flatten(data: Any, prefix: str = "") -> list[tuple[str, str]]:
    """Nested config to (dotted.key, text) rows."""
    if isinstance(data, dict):
        rows: list[tuple[str, str]] = []
        for k, v in data.items():
            rows.extend(flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return rows
    return [(prefix or "(value)", plain(data))]


# -- rule docstrings ---------------------------------------------------------------------------
Segments = list[tuple[bool, str]]   # (is_code, text)
_CODE = re.compile(r"``(.+?)``|`([^`]+)`")  # reST literals, or Markdown-style code spans


def segments(text: str) -> Segments:
    """Code spans (``x`` or `x`) split out of a line of prose, left as data for the template
    to escape."""
    out: Segments = []
    last = 0
    for m in _CODE.finditer(text):
        if m.start() > last:
            out.append((False, text[last:m.start()]))
        out.append((True, m.group(1) or m.group(2)))
        last = m.end()
    if last < len(text):
        out.append((False, text[last:]))
    return out


def parse_doc(doc: str) -> dict[str, Any]:
    """A rule's module docstring as {summary, sections: [{heading, blocks}]}.

    Headings are unindented lines (the STYLE.md sections); their bodies are indented. A block is
    {"kind": "p" | "ul", "items": [Segments]}.
    """
    lines = doc.strip("\n").splitlines()
    if not lines:
        return {"summary": "", "sections": []}
    first = lines[0]
    summary = first.split(":", 1)[1].strip() if ":" in first else first.strip()
    sections: list[dict[str, Any]] = []
    current: Optional[dict[str, Any]] = None
    para: list[str] = []

    def close_para() -> None:
        if current is None or not para:
            para.clear()
            return
        if para[0].lstrip().startswith(("- ", "* ")):
            items: list[str] = []
            for p in para:
                if p.lstrip().startswith(("- ", "* ")):
                    items.append(p.lstrip()[2:].strip())
                else:  # a continuation line of the item above
                    items[-1] += " " + p.strip()
            current["blocks"].append({"kind": "ul", "items": [segments(i) for i in items]})
        else:
            current["blocks"].append({"kind": "p",
                                      "items": [segments(" ".join(p.strip() for p in para))]})
        para.clear()

    for line in lines[1:]:
        stripped = line.strip()
        is_heading = stripped and not line[:1].isspace() and (
            stripped in DOC_SECTIONS or (len(stripped) < 40 and not stripped.endswith(".")))
        if is_heading:
            close_para()
            current = {"heading": stripped, "blocks": []}
            sections.append(current)
        elif not stripped:
            close_para()
        else:
            if current is None:
                current = {"heading": "", "blocks": []}
                sections.append(current)
            para.append(line)
    close_para()
    return {"summary": summary, "sections": sections}
