"""Moving a step's statistics off the training thread.

A step's producers (scalars, parameters, activations, inputs) each add to the step's
`StepRecord` the function that makes their rows and the device tensors those rows need. The
statistics are reductions on the tensors' device, and `Packed` gathers all of a step's
tensors into one copy per device (non-blocking from an accelerator); the writer thread hands
each producer the host values of exactly the tensors it added.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np
import torch

Rows = list[tuple[str, dict]]
# A producer's writer-thread half: the host values of the tensors it added, in its order.
MakeRows = Callable[[list[np.ndarray]], Rows]


class StepRecord:
    """What one step (or one `Recorder.log` call) hands to the writer thread.

    warn(key, message), when given, hears of a producer whose copy or rows failed: that
    producer's rows are left out, the others' are written (one odd value never stops recording).
    """

    __slots__ = ("_parts", "_producers", "_warn")

    def __init__(self, warn: Callable[[Any, str], None] | None = None) -> None:
        self._parts: list[torch.Tensor] = []
        self._producers: list[tuple[MakeRows, int, int]] = []  # rows, its parts' start, stop
        self._warn = warn

    def add(self, rows: MakeRows, tensors: Sequence[torch.Tensor] = ()) -> None:
        """Queue a producer: `rows` receives the host values of `tensors`."""
        start = len(self._parts)
        self._parts.extend(tensors)
        self._producers.append((rows, start, len(self._parts)))

    def seal(self) -> Callable[[], Rows]:
        """Launch the step's copies now (training thread); return the writer thread's work."""
        # (copy, its producers): one copy of every part, or, when some producer's tensors
        # cannot be copied, one per producer and none for those that failed.
        groups: list[tuple[Packed | None, list[tuple[MakeRows, int, int]]]]
        try:
            groups = [(Packed(self._parts) if self._parts else None, self._producers)]
        except Exception:
            groups = []
            for produce, start, stop in self._producers:
                try:
                    part = Packed(self._parts[start:stop]) if stop > start else None
                    groups.append((part, [(produce, 0, stop - start)]))
                except Exception as exc:
                    self._failed(produce, exc)
        failed = self._failed

        def rows() -> Rows:
            out: Rows = []
            for packed, producers in groups:
                values = packed.resolve() if packed is not None else []
                for produce, start, stop in producers:
                    try:
                        out.extend(produce(values[start:stop]))
                    except Exception as exc:
                        failed(produce, exc)
            return out
        return rows

    def _failed(self, produce: Any, exc: Exception) -> None:
        if self._warn is None:
            raise exc
        what = getattr(produce, "__qualname__", "a producer").split(".<locals>")[0]
        self._warn(("rows", what, type(exc).__name__), f"{what} left out a step's rows "
                   f"({type(exc).__name__}: {exc}); the other statistics are recorded, "
                   "warned once")


class Packed:
    """Tensors from any devices, gathered into one host copy per device."""

    def __init__(self, parts: Sequence[torch.Tensor]):
        self.sizes = [p.numel() for p in parts]
        self.groups: list[tuple[list[int], torch.Tensor, Any]] = []
        by_device: dict[torch.device, list[int]] = {}
        for i, p in enumerate(parts):
            by_device.setdefault(p.device, []).append(i)
        for device, idx in by_device.items():
            flat = torch.cat([parts[i].detach().reshape(-1).to(torch.float64) for i in idx])
            event = None
            if device.type == "cuda":
                flat = flat.to("cpu", non_blocking=True)  # lands in pinned memory
                event = torch.cuda.Event()
                event.record()
            elif device.type != "cpu":
                flat = flat.cpu()
            self.groups.append((idx, flat, event))

    def resolve(self) -> list[np.ndarray]:
        """On the writer thread: wait for the copies, then split them back into parts."""
        out: list[np.ndarray] = [None] * len(self.sizes)  # type: ignore[list-item]
        for idx, flat, event in self.groups:
            if event is not None:
                event.synchronize()
            values = flat.numpy()
            offset = 0
            for i in idx:
                out[i] = values[offset:offset + self.sizes[i]]
                offset += self.sizes[i]
        return out
