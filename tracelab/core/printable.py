"""Text from a run (its name, paths, config, messages) made safe to show.

A run name may hold ESC or OSC sequences (a terminal clears its screen or sets its title when
it prints them), BEL, or U+202E (the rest of the line reads backwards). Every such character,
control (C0, DEL, C1) or invisible formatting (bidirectional marks and overrides, zero-width),
is shown as a `\\uXXXX` escape: in terminal lines, Markdown and HTML alike.
"""
from __future__ import annotations

import re

INVISIBLE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e"
                       "\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb\udc80-\udcff]")
_LINE_BREAKS = re.compile("[\t\n\r]")


def _escape(match: re.Match) -> str:
    return f"\\u{ord(match.group()):04x}"


def visible(text: str) -> str:
    """`text` with control and invisible formatting characters written as \\uXXXX; tabs and
    line breaks too, so that it stays one line."""
    return _LINE_BREAKS.sub(_escape, INVISIBLE.sub(_escape, text))


def visible_lines(text: str) -> str:
    """`text` with control and invisible formatting characters written as \\uXXXX, keeping its
    tabs and line breaks (\\r only before \\n: alone, it moves back over what the line said)."""
    return INVISIBLE.sub(_escape, text).replace("\r\n", "\n").replace("\r", "\\u000d")


class VisibleStream:
    """A text stream whose writes show control and invisible formatting characters escaped
    (`visible_lines`), whichever line prints them. JSON written through it stays JSON:
    `\\u202e` is its own escape, and it escapes the control characters itself."""

    def __init__(self, stream) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        return self._stream.write(visible_lines(text))

    @property
    def unescaped(self):
        """The stream written to, for text of tracelab's own that needs its carriage returns
        (a progress bar redrawing its line)."""
        return self._stream

    def __getattr__(self, name: str):
        return getattr(self._stream, name)
