"""Recording compiled models (`torch.compile(model)`, `model.compile()`) without recompiles or
graph breaks.

A forward hook that computes statistics calls into Python (numpy, numba, `float()`), which
breaks a compiled graph; adding and removing hooks between steps changes what dynamo traced.
So the compiled graphs never contain the recorder: on the steps that record activations, and on
those only, the recorder sets the compiler's stance to "force_eager" from the end of the step
before to the end of that step (`torch.compiler.set_stance`, torch >= 2.6). That step runs the
user's module (the `_orig_mod` of a compiled one) eagerly, and the leaf modules' forward hooks
read its outputs as they do for an eager model; every other step runs the compiled code that
dynamo built once, without hooks. Statistics are those of an eager forward pass of the same
weights and batch, so they agree with an uncompiled run's within float tolerance.

BENCHMARKS.md has the measured alternatives: hooks registered before compiling that return at
once on steps that record nothing (dynamo guards on the flag: a second graph for recording
steps), and statistics computed inside the graph (the graph grows by every statistic's
reductions, and recording steps still need their own graph).

Without `set_stance` (torch < 2.6) activation statistics of a model known to be compiled are
not recorded: meta.json says so under "absent", and the report's "What was recorded" section
lists it.
"""
from __future__ import annotations

from typing import Any, Callable

import torch

ORIG_MOD = "_orig_mod"  # the attribute torch.compile's wrapper keeps the user's module in
NO_STANCE = (f"not recorded: the model is compiled, and torch {torch.__version__} cannot run "
             "its recording steps eagerly (torch.compiler.set_stance needs torch >= 2.6)")


def stance_available() -> bool:
    """Whether this torch can run compiled code eagerly on demand (torch.compiler.set_stance)."""
    return callable(getattr(torch.compiler, "set_stance", None))


def is_compiled(model: torch.nn.Module) -> bool:
    """Whether `model`, a wrapper on the way to the user's module, or one of its submodules is
    compiled: a torch.compile wrapper (OptimizedModule) or compiled in place (Module.compile)."""
    seen: set[int] = set()
    stack = [model]
    while stack:
        m = stack.pop()
        if id(m) in seen or not isinstance(m, torch.nn.Module):
            continue
        seen.add(id(m))
        if isinstance(getattr(m, ORIG_MOD, None), torch.nn.Module) \
                or getattr(m, "_compiled_call_impl", None) is not None:
            return True
        stack.append(getattr(m, "module", None))
        stack.extend(m.children())
    return False


def plain_name(path: str) -> str:
    """A module or parameter path without torch.compile's `_orig_mod` level: the name the
    uncompiled model gives it (`net._orig_mod.0.weight` -> `net.0.weight`)."""
    if ORIG_MOD not in path:
        return path
    return ".".join(part for part in path.split(".") if part != ORIG_MOD)


def outside_compile(hook: Callable[..., Any]) -> Callable[..., Any]:
    """`hook` run by Python even when dynamo traces its caller (a compiled `optimizer.step`):
    it is called there as one opaque call, never traced into the graph."""
    return torch.compiler.disable(hook, recursive=True)


class EagerSteps:
    """Holds the compiler's stance at "force_eager" while any holder asks for it.

    The stance is process-wide: holders are counted, so several recorders agree, and the
    stance before the first holder is the one restored after the last.
    """

    _holders: set[int] = set()
    _restore: Any = None  # the set_stance context whose exit restores the earlier stance

    def __init__(self, warn: Callable[[Any, str], None]):
        self._warn = warn
        self.on = False

    def hold(self, on: bool) -> None:
        if on == self.on or not stance_available():
            return
        cls = EagerSteps
        try:
            if on:
                if not cls._holders:
                    cls._restore = torch.compiler.set_stance("force_eager")
                cls._holders.add(id(self))
            else:
                cls._holders.discard(id(self))
                if not cls._holders and cls._restore is not None:
                    restore, cls._restore = cls._restore, None
                    restore.__exit__(None, None, None)
            self.on = on
        except Exception as exc:  # inside a compiled region: the step records as it can
            self._warn(("set_stance", type(exc).__name__),
                       f"could not switch compiled code to eager for a recording step "
                       f"({type(exc).__name__}: {exc}); warned once")
