"""Recording compiled models (`torch.compile(model)`, `model.compile()`) without recompiles or
graph breaks.

A forward hook that computes statistics calls into Python (numpy, `float()`), which
breaks a compiled graph; adding and removing hooks between steps changes what dynamo traced.
So the compiled graphs never contain the recorder: on the steps that record activations, and on
those only, the model's training forward (autograd on) runs uncompiled (the `_orig_mod` of a
compiled wrapper, the plain `_call_impl` of a module compiled in place: EagerModel), and the
leaf modules' forward hooks read its outputs as they do for an eager model; every other step,
and every evaluation (no autograd), runs the compiled code that dynamo built once, without
hooks. A Recorder dropped unclosed lets go of the model (its hooks hold it weakly:
hook_refs). The loss, the backward of the other steps and a compiled optimizer step stay
compiled. A model the recorder was given before it was wrapped by
torch.compile has no wrapper the recorder can see: then the compiler's stance is "force_eager"
from the end of the step before a recording step to the end of that step
(`torch.compiler.set_stance`, torch >= 2.6: EagerSteps). Statistics are those of an eager
forward pass of the same weights and batch, so they agree with an uncompiled run's within float
tolerance. BENCHMARKS.md compares this with hooks added and removed around recording steps.
With batch sizes that change from step to step, the first step dynamo compiles is step 1, not
0 (which records activations uncompiled); where it specializes that step's sizes (under
dynamic=True, a batch the size of one of the model's own dimensions: duck sizing), the run can
compile one graph more than without the recorder. So does compiled autograd: the backward of a
recording step, whose forward ran eagerly, is captured as a graph of its own, once, at the first
recording step, and reused after. Under `torch.compile(DDP(model))` the recorder's one hook on
the module inside (loop_checks.EvalModes) goes on the compiled wrapper instead: on the module,
dynamo would compile it where the unrecorded run does not.

Without `set_stance` (torch < 2.6), a model compiled after the recorder was given it traces the
recorder's forward hooks into its graph: they see that they are traced and return, without a
graph break, and meta.json records the activations as absent (schema.META_ABSENT); the
report's "What was recorded" section lists them.
"""
from __future__ import annotations

import sys
import weakref
from typing import Any, Callable

import torch

from tracelab.recorders import environment as env

ORIG_MOD = "_orig_mod"  # the attribute torch.compile's wrapper keeps the user's module in


def absent(traced: list[int], not_run: list[int]) -> str:
    """meta.json's "absent" entry for activations at recording steps that have none: steps
    whose hooks dynamo traced, and steps on which no hook ran (blamed on compiled code only
    where the process compiled any)."""
    notes = []
    if traced:
        notes.append(f"not recorded at {_steps(traced)}: torch.compile traced the recorder's "
                     "forward hooks, so they could not read the outputs (a model compiled "
                     "after the Recorder was given it, on its first compiled step, or on a "
                     "torch without torch.compiler.set_stance, < 2.6); give the Recorder the "
                     "compiled model")
    if not_run:
        leaves = ("none of the model's leaf modules ran (a model that uses its parameters "
                  "directly, or a model other than the Recorder's)")
        if traced or anything_compiled():
            leaves = ("the recorder's forward hooks did not run, so the training loop called "
                      "compiled code that the recorder could not run uncompiled (a model "
                      "compiled again after the Recorder was given it, a compiled function that "
                      "calls the model, or a compiler stance set on a recording step), or "
                      f"{leaves}; give the Recorder the module that the training loop calls")
        notes.append(f"not recorded at {_steps(not_run)}: {leaves}")
    return "; ".join(notes)


def _steps(steps: list[int]) -> str:
    shown = ", ".join(map(str, steps[:5])) + (", ..." if len(steps) > 5 else "")
    return f"{len(steps)} recording step(s) ({shown})"


def dynamo_loaded() -> bool:
    """Whether anything was compiled or is about to be: torch.compile imports dynamo, and
    importing it takes seconds, which an eager run never pays for the recorder."""
    return "torch._dynamo" in sys.modules


def anything_compiled() -> bool:
    """Whether dynamo compiled a graph in this process (optimizers import it, unused)."""
    if not dynamo_loaded():
        return False
    try:
        from torch._dynamo.utils import counters
        return counters["stats"]["unique_graphs"] > 0
    except (ImportError, AttributeError, KeyError, TypeError):
        return True  # cannot tell: name compiled code among the causes


def is_compiling() -> bool:
    """Whether dynamo is tracing the caller (constant while tracing: no graph break)."""
    check = getattr(torch.compiler, "is_compiling", None)
    return bool(check()) if check is not None else False


def stance_available() -> bool:
    """Whether this torch can run compiled code eagerly on demand (torch.compiler.set_stance)."""
    return callable(getattr(torch.compiler, "set_stance", None))


def compiled_points(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The compiled modules on the way to and inside the user's module: torch.compile wrappers
    (OptimizedModule) and modules compiled in place (Module.compile)."""
    seen: set[int] = set()
    stack, found = [model], []
    while stack:
        m = stack.pop()
        if id(m) in seen or not isinstance(m, torch.nn.Module):
            continue
        seen.add(id(m))
        if isinstance(getattr(m, ORIG_MOD, None), torch.nn.Module) \
                or getattr(m, "_compiled_call_impl", None) is not None:
            found.append(m)
        stack.append(getattr(m, "module", None))
        stack.append(getattr(m, ORIG_MOD, None))
        stack.extend(m.children())
    return found


def compiles_a_wrapper(model: torch.nn.Module) -> bool:
    """Whether a torch.compile wrapper on the way to the user's module wraps another wrapper
    (`torch.compile(DDP(model))`): dynamo skips DDP's forward and its graph break, and then
    what it compiles of the module inside depends on that module's hooks."""
    compiling = False
    while True:
        inner = env.wrapped(model)
        if inner is None:
            return False
        if isinstance(getattr(model, ORIG_MOD, None), torch.nn.Module):
            compiling = True
        elif compiling:
            return True
        model = inner


def is_compiled(model: torch.nn.Module) -> bool:
    """Whether `model`, a wrapper on the way to the user's module, or one of its submodules is
    compiled."""
    return bool(compiled_points(model))


def plain_name(path: str) -> str:
    """A module or parameter path without torch.compile's `_orig_mod` level: the name the
    uncompiled model gives it (`net._orig_mod.0.weight` -> `net.0.weight`)."""
    if ORIG_MOD not in path:
        return path
    return ".".join(part for part in path.split(".") if part != ORIG_MOD)


def plain_summary(summary: dict[str, Any]) -> dict[str, Any]:
    """environment.model_summary with plain names: module paths and parameter names without
    `_orig_mod`, and no entry for the torch.compile wrapper itself (its path is its module's)."""
    modules = [dict(m, path=plain_name(m["path"])) for m in summary.get("modules", [])
               if m.get("type") != "OptimizedModule"]
    params = [dict(p, name=plain_name(p["name"])) for p in summary.get("parameters", [])]
    return dict(summary, modules=modules, parameters=params)


def outside_compile(hook: Callable[..., Any]) -> Callable[..., Any]:
    """`hook` run by Python even when dynamo traces its caller (a compiled `optimizer.step`):
    it is called there as one opaque call, never traced into the graph."""
    return torch.compiler.disable(hook, recursive=True)


class EagerModel:
    """While held, each compiled point of a model calls its uncompiled module on a training
    forward (autograd on): a wrapper's forward calls the `_orig_mod` itself, a module compiled
    in place runs its own `_call_impl` (_Swap); an evaluation runs compiled.
    Nothing dynamo traced or guards on changes (the swapped attributes are read before any
    compiled frame), and other compiled code in the process keeps running compiled.

    Several recorders of one model agree: a point is swapped by its first holder and gets its
    compiled call back when the last one lets go (`_HELD`), never a holder's swap for the
    compiled call. A second holder is warned about once: a Recorder left unclosed keeps its
    hold, and the model runs uncompiled on its recording steps until it is closed."""

    def __init__(self, points: list[torch.nn.Module], warn: Callable[[Any, str], None]):
        self.points = points
        self._warn = warn
        self.on = False

    def hold(self, on: bool) -> None:
        if on == self.on:
            return
        for m in self.points:
            held = _HELD.get(m)
            if on:
                if held is None:
                    held = _HELD[m] = _Swap(m)
                elif len(held.holders) and m not in _WARNED:
                    _WARNED.add(m)
                    self._warn(("held", id(m)), "another Recorder of this model holds it "
                               "uncompiled too (an earlier Recorder not closed?): the model "
                               "runs uncompiled while either holds it, on every step if that "
                               "one stopped on a recording step, until both are closed; "
                               "warned once")
                held.holders.add(self)
            elif held is not None:
                held.holders.discard(self)
                if not len(held.holders):
                    held.restore(m)
                    del _HELD[m]
        self.on = on


class _Swap:
    """A compiled point's compiled call, routed past while `holders` (EagerModels) hold it.

    The call is replaced by a router: a forward with autograd on (training) runs the
    uncompiled module while any holder lives; one without (an evaluation between steps, even
    just before a recording step) runs the compiled code, as does every call once the last
    holder is gone, released or garbage-collected (a Recorder dropped unclosed)."""

    def __init__(self, m: torch.nn.Module):
        self.holders: weakref.WeakSet[EagerModel] = weakref.WeakSet()
        holders = self.holders
        inner = getattr(m, ORIG_MOD, None)
        if isinstance(inner, torch.nn.Module):
            self._attr, self._value = "forward", m.__dict__.get("forward")
            eager, compiled = inner.__call__, m.forward
        else:
            self._attr, self._value = "_compiled_call_impl", m._compiled_call_impl
            eager, compiled = m._call_impl, m._compiled_call_impl

        def route(*args: Any, **kwargs: Any) -> Any:
            if holders and torch.is_grad_enabled():
                return eager(*args, **kwargs)
            return compiled(*args, **kwargs)
        setattr(m, self._attr, route)

    def restore(self, m: torch.nn.Module) -> None:
        if self._value is None:
            m.__dict__.pop(self._attr, None)
        else:
            setattr(m, self._attr, self._value)


_HELD: "weakref.WeakKeyDictionary[torch.nn.Module, _Swap]" = weakref.WeakKeyDictionary()
# Points warned about: once per model, though each release by the last holder ends its _Swap.
_WARNED: "weakref.WeakSet[torch.nn.Module]" = weakref.WeakSet()


class EagerSteps:
    """For a model whose compiled wrapper the recorder never saw (compiled after the recorder
    was given it): holds the compiler's stance at "force_eager" while any holder asks for it.

    The stance is process-wide: holders are counted, so several recorders agree, and the
    stance before the first holder is the one restored after the last, unless the user set
    another one meanwhile: that one is kept. A user's `with set_stance(...)` block begun while
    the stance was held ends by setting the held stance object again; so when the hold ends
    under the user's stance, that object takes the values of the stance from before the hold,
    and the block's end restores those.
    """

    _holders: set[int] = set()
    _restore: Any = None  # the set_stance context whose exit restores the earlier stance

    def __init__(self, warn: Callable[[Any, str], None]):
        self._warn = warn
        self.on = False
        self._dropped: Any = None  # releases the hold if this holder is collected holding it

    def hold(self, on: bool) -> None:
        if on == self.on or not stance_available() or (on and not dynamo_loaded()):
            return
        cls = EagerSteps
        try:
            if on:
                if not cls._holders:
                    cls._restore = torch.compiler.set_stance("force_eager")
                cls._holders.add(id(self))
                # A Recorder dropped unclosed mid-hold must not leave the process eager.
                self._dropped = weakref.finalize(self, cls._release, id(self))
                self._dropped.atexit = False
            else:
                if self._dropped is not None:
                    self._dropped.detach()
                    self._dropped = None
                cls._release(id(self))
            self.on = on
        except Exception as exc:  # inside a compiled region: the step records as it can
            self._warn(("set_stance", type(exc).__name__),
                       f"could not switch compiled code to eager for a recording step "
                       f"({type(exc).__name__}: {exc}); warned once")

    @classmethod
    def _release(cls, holder: int) -> None:
        """`holder` lets go; the last one restores the stance from before the first."""
        cls._holders.discard(holder)
        if cls._holders or cls._restore is None:
            return
        restore, cls._restore = cls._restore, None
        held, before = getattr(restore, "stance", None), getattr(restore, "prev", None)
        now = _current()
        if held is None or before is None or now is None or now is held:
            restore.__exit__(None, None, None)
        else:  # the user's stance, set since: kept
            vars(held).update(vars(before))


def _current() -> Any:
    """The compiler's stance object now (torch._dynamo's DynamoStance; None where this torch
    has none)."""
    try:
        from torch._dynamo import eval_frame
        return eval_frame._stance
    except (ImportError, AttributeError):
        return None
