"""The recorder's hooks on the user's modules and tensors, held by them weakly.

A hook that a module keeps goes wherever the module goes: into `copy.deepcopy(model)` (an EMA
or teacher copy) and into the pickle of `torch.save(model)`. So a recorder's hook holds its
owner (the recorder's part that hooked) through a weak reference, and does nothing once the
owner is gone (a Recorder dropped unclosed), and a copy of the hook is one that does nothing:
- a forward pre-hook's or a tensor hook's copy is `{}.get`, which given (module, args) returns
  the args unchanged and given a grad returns None, and which loading needs nothing of
  tracelab for;
- a forward hook's copy (module, args, output) is `NoHook()`, which loading a pickle needs
  tracelab for. The leaf modules' forward hooks are on the model only from the end of the step
  before a recording step to the end of that step: a `torch.save(model)` in that window loads
  only where tracelab is installed (`torch.save(model.state_dict())` never holds hooks).

A hook on the module that a compiled wrapper calls runs as a Python frame of its own, which
dynamo would try to compile; once dynamo is loaded, the hooks' frames are marked to be skipped
(`_skip_frames`): a Recorder attached after warm-up must not make a compiled model under
`torch.compiler.set_stance("fail_on_recompile")` raise. Such a hook's method calls no Python
function of its own (each would be a frame dynamo compiles). Traced inline (a module compiled
in place), the hook is traced as any other code.
"""
from __future__ import annotations

import sys
import weakref
from typing import Any, Callable


class NoHook:
    """A hook that does nothing: what a copy of a recorder's forward hook becomes."""

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        return None


class WeakHook:
    """`method` of its owner, called as a hook while the owner lives (module docstring)."""

    def __init__(self, method: Callable[..., Any], *, copies_as_get: bool = False):
        self._owner = weakref.ref(method.__self__)
        self._func = method.__func__
        self._copies_as_get = copies_as_get
        if "torch._dynamo" in sys.modules:
            _skip_frames(self._func.__code__)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        owner = self._owner()
        return None if owner is None else self._func(owner, *args, **kwargs)

    def __reduce__(self) -> tuple:
        return (getattr, ({}, "get")) if self._copies_as_get else (NoHook, ())


_SKIPPED: set = set()


def _skip_frames(code: Any) -> None:
    """Dynamo never compiles the frames of `code` and of WeakHook's call (torch >= 2.6; else
    it tries once, and skips them after)."""
    if code in _SKIPPED:
        return
    try:
        from torch._dynamo.eval_frame import skip_code
        for c in (code, WeakHook.__call__.__code__):
            skip_code(c)
    except (ImportError, AttributeError, RuntimeError):
        pass
    _SKIPPED.add(code)
