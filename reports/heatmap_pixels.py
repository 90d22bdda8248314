"""A heatmap's pixels: values to RGBA bytes through a 256-step lookup table, and RGBA bytes
to a PNG data URI (zlib and four chunks, no image library).

The tables are built as matplotlib builds `LinearSegmentedColormap.from_list` ones, so a
heatmap's pixels are the ones a matplotlib image of the same data would have: values at or
below the low end take the first colour, at or above the high end the last, and NaN (a bin
holding a NaN or Inf) its own "bad" colour.
"""
from __future__ import annotations

import base64
import struct
import zlib
from functools import lru_cache

import numpy as np

N = 256
HEAT = ("#0d0887", "#6a00a8", "#b12a90", "#e16462", "#fca636", "#f0f921")
# ColorBrewer's RdBu, high values red (matplotlib's "RdBu_r").
RDBU_R = tuple(reversed((
    "#67001f", "#b2182b", "#d6604d", "#f4a582", "#fddbc7", "#f7f7f7", "#d1e5f0", "#92c5de",
    "#4393c3", "#2166ac", "#053061")))


def _rgb(color: str) -> tuple[float, float, float]:
    h = color.lstrip("#")
    return tuple(int(h[i:i + 2], 16) / 255 for i in (0, 2, 4))  # type: ignore[return-value]


def _table(positions: np.ndarray, values: np.ndarray) -> np.ndarray:
    """matplotlib's `_create_lookup_table` for one channel given at `positions`."""
    positions = positions * (N - 1)
    xind = (N - 1) * np.linspace(0, 1, N)
    ind = np.searchsorted(positions, xind)[1:-1]
    distance = (xind[1:-1] - positions[ind - 1]) / (positions[ind] - positions[ind - 1])
    inner = distance * (values[ind] - values[ind - 1]) + values[ind - 1]
    return np.clip(np.concatenate([[values[0]], inner, [values[-1]]]), 0, 1)


@lru_cache(maxsize=None)
def lookup(colors: tuple[str, ...], reverse_positions: bool = False) -> np.ndarray:
    """(N, 4) uint8 RGBA of a colour list spread evenly over 0..1."""
    rgb = np.array([_rgb(c) for c in colors])
    positions = np.linspace(0, 1, len(colors))
    if reverse_positions:  # a reversed map's positions as matplotlib computes them: 1 - x
        positions = 1.0 - positions[::-1]
    lut = np.column_stack([_table(positions, rgb[:, k]) for k in range(3)] + [np.ones(N)])
    return (lut * 255).astype(np.uint8)


def to_rgba(values: np.ndarray, lo: float, hi: float, *, diverging: bool = False,
            bad: str = "#00e5ff") -> np.ndarray:
    """RGBA bytes (h, w, 4) of a value matrix on the lo..hi scale; NaN in `bad`."""
    lut = lookup(RDBU_R, True) if diverging else lookup(HEAT)
    x = (np.asarray(values, dtype=float) - lo) / (hi - lo)
    nan = np.isnan(x)
    # Under: the first colour; over (and the top of the scale itself): the last.
    idx = np.clip(np.where(nan, 0, x * N), 0, N - 1).astype(int)
    out = lut[idx]
    out[nan] = (np.array(list(_rgb(bad)) + [1.0]) * 255).astype(np.uint8)
    return out


# -- the PNG ----------------------------------------------------------------------------------
def png_bytes(rgba: np.ndarray) -> bytes:
    """PNG of an (h, w, 4) uint8 array, unfiltered rows."""
    h, w = rgba.shape[:2]
    rows = np.concatenate([np.zeros((h, 1), np.uint8),
                           np.ascontiguousarray(rgba, np.uint8).reshape(h, w * 4)], axis=1)

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 6, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows.tobytes(), 6)) + chunk(b"IEND", b""))


def png_uri(rgba: np.ndarray) -> str:
    return "data:image/png;base64," + base64.b64encode(png_bytes(rgba)).decode("ascii")
