"""The Jinja2 environment every HTML page is rendered with, and the page scripts.

- Autoescape is on, and every value is also made visible: control characters (NUL and the
  like) and the invisible or bidirectional formatting characters (U+202E turns the rest of a
  line around) are shown as `\\uXXXX` escapes. A run name cannot hide or disguise text.
- A page's script is a file beside the templates, inlined with its SHA-256 in the page's
  Content-Security-Policy (`script-src 'sha256-...'`): the browser runs that script and no
  other, so an injected inline script would not run even if escaping ever failed.
"""
from __future__ import annotations

import base64
import functools
import hashlib
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader
from markupsafe import Markup

from tracelab.core.printable import visible_lines

TEMPLATES = Path(__file__).parent / "templates"


def _finalize(value: Any) -> Any:
    # Markup is HTML the renderers built themselves (plots, scripts); everything else may
    # come from a run.
    if isinstance(value, str) and not isinstance(value, Markup):
        return visible_lines(value)
    return value


def environment(**options: Any) -> Environment:
    return Environment(loader=FileSystemLoader(str(TEMPLATES)), autoescape=True,
                       finalize=_finalize, **options)


@functools.lru_cache(maxsize=None)
def page_script(*names: str) -> tuple[Markup, str]:
    """Script files beside the templates, as one script, and the CSP source that allows
    exactly it."""
    text = "\n;\n".join((TEMPLATES / n).read_text(encoding="utf-8") for n in names)
    digest = base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii")
    return Markup(text), f"'sha256-{digest}'"
