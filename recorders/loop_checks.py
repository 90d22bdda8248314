"""What the recorder observes of the training loop itself: the signals table.

- Gradient resets (`GradResets`): one gradient hook on one small parameter sees, at the first
  backward pass after each optimizer step, what the parameter's grad held before that pass
  added to it. Reset by `zero_grad()` it is None or zero; otherwise it still holds the last
  step's gradient. Legitimate accumulation (several backward passes, one optimizer step, then
  zero_grad) reads 0: only the first pass after an optimizer step is looked at. What the hook
  reads counts once the pass's gradient is accumulated into .grad (a post-accumulate-grad
  hook): `torch.autograd.grad` (a gradient penalty, grads assigned by hand) runs the gradient
  hook and leaves .grad alone, and is no backward pass of the step. Cost: two Python calls per
  backward pass, and a reduction of the parameter's grad once per step.
  With several optimizers (a GAN's), a backward pass legitimately adds to another optimizer's
  grads (the generator's pass through the discriminator), so the first pass after a step says
  nothing: there the leftover is judged per owner, over the window from one step of the
  optimizer that holds the watched parameter to its next (`owner_stepped`): the least the grad
  held at any backward pass in between, 0 when one of them found it reset (its `zero_grad()`
  ran), and the least of those windows where it stepped several times in one `step()` --
  eagerly only. Cost: a reduction of the held grad per pass.
- Backward passes and resets between them (`GradResets` too): the same hook counts the step's
  backward passes that reached the model, and notes at each pass after the first whether the
  parameter's grad was reset (None, or all zero although an earlier pass of the step added a
  nonzero gradient): `zero_grad()` inside a gradient-accumulation loop, so that the optimizer
  step uses the last micro-batch only. A step here runs from the optimizer's step (with one
  optimizer) or `step()`, whichever came last, to the next. The hook also notes whether the
  parameter's value at a later pass differs from its value at the step's first pass (a copy of
  the small parameter taken then): the weights moved between the passes, as a two-pass method
  such as sharpness-aware minimization moves them (backward, perturb every weight, zero_grad,
  backward again, restore, step), which is not accumulation; a watched parameter larger than
  `_MOVED_COPY_MAX` (an Embedding-only model's table) is not copied, and that fact is then not
  recorded. A sparse grad is read by its stored values. Cost: a reduction of the small
  parameter's incoming grad per pass, and of its held grad and its value against the copy per
  pass after the first, and that copy once per step; on an accelerator they stay device tensors
  that ride the step's packed copy (no host sync).
  Under compiled autograd the hook is traced into the captured backward: there the counts, the
  resets, the leftover, the copy and the comparison with it are tensor ops of the graph (read at
  `step()`, with the packed copy), and the Python state the hook reads takes one set of values
  at a step's first pass and another at its later ones, so the backward compiles once per kind
  of pass (a first pass that finds the grad None or held, a later one) and no graph breaks or
  recompiles after.
- Modes at evaluation (`EvalModes`): a forward pre-hook on the model notes, for forward passes
  without autograd (evaluation), whether the model and its Dropout and BatchNorm modules were
  in training mode; `log()` of another split records what the last such pass saw (or the
  modes at the call when there was none). The same hook notes the modes at each step's first
  training pass (autograd on), which every training step records (`train_step`): a model left
  in eval mode after an evaluation shows at its next step. Under torch.compile the hook is
  traced into the compiled frame, a side effect with no graph break (dynamo guards on every
  module's training flag and on grad mode, so what it replays is what the pass saw), or runs as
  a Python frame that dynamo never compiles (hook_refs). Under `torch.compile(DDP(model))`
  the hook is on the compiled wrapper instead, outside the compiled frames (the recorder's
  `watch`): an evaluation that calls the module inside directly is then read at `log()`.
- Training passes (`Passes`): the same pre-hook notes each pass begun with autograd on, the
  gradient hook its backward. ActivationHooks leaves out what runs without autograd outside a
  training pass (an evaluation, even in train mode), and the rows of a pass that began and
  reached no backward before the next one began (it raised, and the step was retried). A
  model without a plain parameter for the gradient hook (FSDP2's DTensors) shows no backward:
  there a step's last pass is the one recorded.
- The grads' total norms (`GradNorms`): at the end of each backward pass (a callback the same
  kind of gradient hook queues on the autograd engine; the step's last pass is kept) and in each
  optimizer's step pre-hook, over the grads that optimizer holds: the gradients it used. A clip
  between backward and step shows as a step norm below the backward norm; a clip (or any change)
  after the step as tensors' grad norms, read at `Recorder.step()`, that differ from the step
  norm. Cost: one fused `_foreach_norm` per backward pass and per optimizer step, on the device,
  riding the step's packed copy (no host sync on an accelerator).
- The GradScaler's scale (`amp_scale`), read as its device tensor (no host sync), and whether
  the step's optimizer step ran: the scaler skips it on Inf/NaN gradients.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch.nn.parameter import is_lazy

from tracelab.recorders.hook_refs import WeakHook
from tracelab.recorders.transfer import StepRecord
from tracelab.recorders.parameters import local
from tracelab.recorders.stats import dense_equivalent, norms
from tracelab.core.schema import (AMP_SCALE, AMP_SKIPPED, BACKWARD_PASSES, BACKWARD_RESETS,
                                  BACKWARD_WEIGHTS_MOVED, DROPOUT_MODULES, GRAD_LEFTOVER,
                                  GRAD_NORM_BACKWARD, GRAD_NORM_STEP, NORM_MODULES, SIGNALS,
                                  TRAIN_MODE_DROPOUT, TRAIN_MODE_MODEL, TRAIN_MODE_NORM)

_NORMS = (torch.nn.modules.batchnorm._BatchNorm,)
_DROPOUTS = (torch.nn.modules.dropout._DropoutNd,)
# The id of the autograd backward running on this thread, -1 outside one (a C function: a hook
# may call it, hook_refs).
_GRAPH_TASK = getattr(torch._C, "_current_graph_task_id", None)
# The largest watched parameter whose value each step's first backward pass copies, to tell
# whether the weights moved before a later pass (GradResets).
_MOVED_COPY_MAX = 1 << 16


def add_signals(record: StepRecord, step: int, split: str,
                signals: list[tuple[str, Any]]) -> None:
    """Queue signals rows: (name, value) with a number or a one-element tensor (device tensors
    join the step's packed copy)."""
    if not signals:
        return
    names = [n for n, _ in signals]
    values = [v for _, v in signals]
    tensors = [v.detach().reshape(1).to(torch.float64) for v in values
               if isinstance(v, torch.Tensor)]

    def rows(host: list[np.ndarray]) -> list[tuple[str, dict]]:
        found = iter(host)
        column = np.array([float(next(found)[0]) if isinstance(v, torch.Tensor) else float(v)
                           for v in values])
        n = len(names)
        return [(SIGNALS, {"step": np.full(n, step, dtype=np.int64), "split": [split] * n,
                           "name": names, "value": column})]
    record.add(rows, tensors)


class Passes:
    """Where the model's training forward passes stand, as the recorder's hooks see them: set
    by EvalModes' pre-hook when the model is called (eagerly: compiled code replays no count)
    and by GradResets' hook in the backward pass; read by ActivationHooks."""

    def __init__(self) -> None:
        self.training = False  # a training pass (autograd on) began and reached no backward yet
        self.begun = 0  # training passes begun so far
        self.calls = 0  # forward passes of the model begun so far, training or evaluation
        self.retry = False  # the last one began while the one before reached no backward
        self.evaluating: Any = None  # called as an evaluation pass begins eagerly, when set
        self.training_began: Any = None  # called as a training pass begins eagerly, when set


class GradResets:
    """Whether the gradients were reset between optimizer steps (the module docstring)."""

    def __init__(self, passes: Passes | None = None) -> None:
        self._passes = passes if passes is not None else Passes()
        self._handle: Any = None
        self._param: torch.Tensor | None = None
        self._fresh = True  # the next backward pass is the first since an optimizer step
        self._leftover: Any = None  # what that pass found: a float, or a device tensor
        self._seen = False  # a backward pass of the step was seen
        self._count: Any = 0  # backward passes since the step began (optimizer step or step())
        self._resets: Any = 0  # those of them that found the grad reset: an int or a tensor
        self._added: Any = False  # an earlier pass of the step added a nonzero gradient
        self._value: torch.Tensor | None = None  # the parameter at the step's first pass
        self._moved: Any = False  # its value differed at a later pass: a bool or a tensor
        self._lazy: list[torch.Tensor] | None = None  # unmaterialized params to watch later
        # What the pass now in the backward found, until its gradient is accumulated into .grad:
        # (the largest |grad| held before it, None for no grad; whether it adds a nonzero one)
        self._pending: Any = None
        # Several optimizers: the window since the watched parameter's optimizer last stepped.
        self._open = False  # a window is open (its optimizer stepped once at least)
        self._window: Any = None  # the least |grad| held at a pass in it: a float or a tensor
        self._owners: dict[int, tuple[int, bool]] = {}  # id(optimizer): (params, holds it)

    def attach(self, params: list[torch.Tensor]) -> None:
        """Watch the smallest plain parameter of `params` (a tracked model's); when all of
        them are a Lazy module's, unmaterialized, once the first of them is (`take`)."""
        self.detach()
        self._open, self._window, self._owners = False, None, {}
        self._param = _smallest_plain(params)
        self._lazy = _lazy_only(params, self._param)
        if self._param is None:
            return
        self._handle = (
            self._param.register_hook(WeakHook(self._before_accumulation, copies_as_get=True)),
            self._param.register_post_accumulate_grad_hook(
                WeakHook(self._after_accumulation, copies_as_get=True)))

    def detach(self) -> None:
        if self._handle is not None:
            for handle in self._handle:
                handle.remove()
        self._handle = self._param = self._lazy = None
        self._pending = None

    def optimizer_stepped(self) -> None:
        self._fresh = True

    def owner_stepped(self, optimizer: Any) -> None:
        """With several optimizers, `optimizer` is about to step: when it holds the watched
        parameter, the window of backward passes since its last step closes (its leftover, the
        least the grad held at any of them, is what the step() ends with, or the least of
        the windows closed in it) and a new one opens."""
        if self._param is None or not self._holds(optimizer):
            return
        window, before = self._window, self._leftover
        if self._open and window is not None:
            # Several of its steps in one step(): the least of their windows (a grad left
            # over at every one of them).
            if before is None or (isinstance(before, float) and isinstance(window, float)):
                self._leftover = window if before is None else min(before, window)
            elif isinstance(before, float) or isinstance(window, float):
                # A Python number and a device tensor: clamped on the device (no host copy)
                number, tensor = (before, window) if isinstance(before, float) else (window, before)
                self._leftover = tensor.clamp(max=number)
            else:
                self._leftover = torch.minimum(before, window)
        self._open, self._window = True, None

    def _holds(self, optimizer: Any) -> bool:
        """Whether `optimizer`'s param groups hold the watched parameter (cached per optimizer
        while its parameter count stays)."""
        try:
            groups = [g["params"] for g in optimizer.param_groups]
        except (AttributeError, KeyError, TypeError):
            return False
        count = sum(len(g) for g in groups)
        known = self._owners.get(id(optimizer))
        if known is None or known[0] != count:
            known = (count, any(p is self._param for g in groups for p in g))
            self._owners[id(optimizer)] = known
        return known[1]

    def _before_accumulation(self, grad: torch.Tensor) -> None:
        """The pass's gradient hook, before the gradient is accumulated into .grad. It runs for
        `torch.autograd.grad` too, which leaves .grad alone (a gradient penalty, grads assigned
        by hand): eagerly, what it reads waits in `_pending` for `_after_accumulation`, which
        runs only when the gradient is accumulated (backward)."""
        self._passes.training = False  # the pass reached its backward
        old = self._param.grad if self._param is not None else None
        if torch.compiler.is_compiling():
            if grad.layout != torch.strided:
                grad = grad.to_dense()
            if old is not None and old.layout != torch.strided:
                old = old.to_dense()
            # Traced by compiled autograd (inline: hook_refs). Dynamo guards on the Python state
            # read here, and a host read (bool, float) breaks its graph: the state read takes
            # the same values at every step's first pass (a fresh step, nothing seen), and the
            # same at every later pass of a step (all tensors by then); the counts, the
            # leftover, the resets and the moved weights are tensor ops of the graph, read at
            # step().
            added = (grad.detach().abs().amax() > 0 if grad.numel()
                     else torch.zeros((), dtype=torch.bool, device=grad.device))
            if self._fresh:
                self._fresh, self._seen = False, False
                self._leftover = 0.0 if old is None else old.detach().abs().amax()
            if not self._seen:
                self._seen = True
                self._count = torch.ones((), dtype=torch.float64, device=grad.device)
                self._resets = torch.zeros((), dtype=torch.float64, device=grad.device)
                self._added = added
                self._value = (None if self._param is None
                               else self._param.detach().clone())
                self._moved = torch.zeros((), dtype=torch.bool, device=grad.device)
            else:
                before = torch.as_tensor(self._added, device=grad.device)
                reset = before if old is None else torch.logical_and(
                    before, old.detach().abs().amax() == 0)
                self._count = self._count + 1
                self._resets = self._resets + reset
                self._added = torch.logical_or(before, added)
                now = self._param.detach() if self._param is not None else None
                if self._value is not None and now is not None and (
                        self._value.shape == now.shape):
                    differ = torch.logical_and(now != self._value, torch.logical_not(
                        torch.logical_and(now.isnan(), self._value.isnan())))
                    self._moved = torch.logical_or(
                        torch.as_tensor(self._moved, device=grad.device), differ.any())
            return None
        # The largest |grad| held before this pass and whether the pass adds a nonzero one: a
        # float and a bool on the CPU, device tensors elsewhere (no host sync). A sparse grad
        # (an Embedding's with sparse=True) by its values once coalesced (accumulated, it holds
        # an index once per pass), never made dense. Inline: hook_refs.
        if old is None:
            held: Any = None
        else:
            values = old.coalesce().values() if old.layout == torch.sparse_coo else old
            if values.layout != torch.strided:
                values = values.to_dense()
            if not values.numel():
                held = 0.0
            elif values.device.type == "cpu":
                held = float(values.detach().abs().max())
            else:
                held = values.detach().abs().amax()
        if self._added is True and not self._fresh:
            added: Any = True  # the step's passes added a nonzero gradient already: not read
        else:
            values = grad.coalesce().values() if grad.layout == torch.sparse_coo else grad
            if values.layout != torch.strided:
                values = values.to_dense()
            if not values.numel():
                added = False
            elif values.device.type == "cpu":
                added = bool(values.detach().abs().max() > 0)
            else:
                added = values.detach().abs().amax() > 0
        self._pending = (held, added)
        return None

    def _after_accumulation(self, param: torch.Tensor) -> None:
        """The pass's gradient was accumulated into .grad: a backward pass of the step, with
        what `_before_accumulation` found (the module docstring). Inline: hook_refs."""
        pending, self._pending = self._pending, None
        if pending is None or torch.compiler.is_compiling():  # traced: the pre-hook did it all
            return None
        held, added = pending
        if self._open:  # several optimizers: the least the grad held in the window
            number = 0.0 if held is None else held
            window = self._window
            if window is None:
                self._window = number
            elif isinstance(window, float) and isinstance(number, float):
                self._window = min(window, number)
            elif isinstance(window, float) or isinstance(number, float):
                least, tensor = (window, number) if isinstance(window, float) else (number, window)
                self._window = tensor.clamp(max=least)
            else:
                self._window = torch.minimum(window, number)
        first = self._fresh or not self._seen  # the step's first pass
        if self._fresh:
            self._fresh = False
            self._count, self._resets, self._added = 0, 0, False
            self._leftover = 0.0 if held is None else held
        elif self._seen and self._added is not False:
            # A pass after the step's first, which added to the grad: is its sum still there?
            # (_added and _resets: Python values on the CPU, read there; on an accelerator,
            # or after a compiled pass, tensors, never read on the training thread.)
            if held is None:
                self._resets = self._resets + self._added
            else:
                zero = held == 0
                if isinstance(zero, bool) and self._added is True:
                    self._resets += zero
                else:
                    self._resets = self._resets + (
                        zero if self._added is True else torch.logical_and(self._added, zero))
        # Whether the weights moved between the step's passes: against a copy of the watched
        # parameter taken at its first pass, when it is small (the smallest parameter nearly
        # always is: a bias); a large one (an Embedding-only model's table) is not copied every
        # step, and the fact is then not recorded.
        now = param.detach() if param.numel() <= _MOVED_COPY_MAX else None
        if first:
            self._value, self._moved = (None if now is None else now.clone()), (
                False if now is not None else None)
        elif self._moved is not True and self._moved is not None and (
                self._value is not None and now is not None
                and self._value.shape == now.shape and now.layout == torch.strided):
            # Has the parameter moved since the step's first pass (NaN = NaN)? Read on the CPU
            # (a bool), a tensor on an accelerator or after a compiled pass.
            differ = torch.logical_and(now != self._value, torch.logical_not(
                torch.logical_and(now.isnan(), self._value.isnan()))).any()
            if differ.device.type == "cpu" and self._moved is False:
                self._moved = bool(differ)
            else:
                self._moved = differ if self._moved is False else torch.logical_or(
                    self._moved, differ)
        self._seen = True
        self._count += 1
        if self._added is not True and added is not False:
            self._added = added if self._added is False or added is True \
                else torch.logical_or(self._added, added)
        return None

    def take(self) -> list[tuple[str, Any]]:
        """The observations of the step that ends: the grad left over, if its first backward
        pass was seen; the backward passes since the step began, the resets between them and
        whether the weights moved between them, if any pass was seen (then a new step
        begins)."""
        if self._lazy is not None and self._param is None:  # a Lazy model's first forward
            self.attach(self._lazy)
        leftover, self._leftover = self._leftover, None
        out = [] if leftover is None else [(GRAD_LEFTOVER, leftover)]
        if self._seen:
            out += [(BACKWARD_PASSES, self._count), (BACKWARD_RESETS, self._resets)]
            if self._moved is not None:  # None: the watched parameter is too large to copy
                out.append((BACKWARD_WEIGHTS_MOVED, self._moved))
        self._seen, self._count, self._resets, self._added = False, 0, 0, False
        self._value, self._moved = None, False
        return out


def _lazy_only(params: list[torch.Tensor], watched: torch.Tensor | None
               ) -> list[torch.Tensor] | None:
    """`params` when none is watched for want of a materialized one, some being a Lazy
    module's (UninitializedParameter: a plain Parameter after the first forward)."""
    if watched is not None or not any(is_lazy(p) for p in params):
        return None
    return list(params)


def _smallest_plain(params: list[torch.Tensor]) -> torch.Tensor | None:
    """The last of the smallest plain (not DTensor) parameters: one whose gradient hook runs in
    every backward pass that reaches the model, at little cost."""
    plain = [p for p in params if type(p) in (torch.Tensor, torch.nn.Parameter) and p.numel()]
    return min(reversed(plain), key=lambda p: p.numel()) if plain else None


def total_norm(tensors: list[torch.Tensor]) -> torch.Tensor | None:
    """The L2 norm of all `tensors` together (float64, on the first one's device; None for
    none): one fused reduction per device, as torch.nn.utils.clip_grad_norm_ takes it."""
    by_device: dict[torch.device, list[torch.Tensor]] = {}
    for t in tensors:
        by_device.setdefault(t.device, []).append(dense_equivalent(t).detach())
    if not by_device:
        return None
    squares = [norms(ts).square().sum() for ts in by_device.values()]
    first = squares[0].device
    return torch.stack([s.to(first) for s in squares]).sum().sqrt()


class GradNorms:
    """The grads' total norm at the end of backward and as each optimizer used them (the module
    docstring). `warn(key, message)` hears of a norm that could not be taken."""

    def __init__(self, warn: Any, due: Any = None) -> None:
        self._warn = warn
        self._due = due  # whether the step in progress takes the norms (None: every step)
        self._params: list[torch.Tensor] = []
        self._handle: Any = None
        self._queued = False  # the end-of-backward callback waits in the running backward
        self._backward: torch.Tensor | None = None
        self._step: dict[str, torch.Tensor] = {}
        self._lazy = False  # no parameter watched: all are unmaterialized (Lazy modules)

    def attach(self, params: list[torch.Tensor]) -> None:
        self.detach()
        self._params = list(params)
        watched = _smallest_plain(self._params)
        self._lazy = _lazy_only(self._params, watched) is not None
        if watched is not None:
            # After accumulation: `torch.autograd.grad` (a gradient penalty) leaves .grad
            # alone and queues nothing.
            self._handle = watched.register_post_accumulate_grad_hook(
                WeakHook(self._on_grad, copies_as_get=True))

    def detach(self) -> None:
        if self._handle is not None:
            self._handle.remove()
        self._handle = None
        self._queued = False

    def _on_grad(self, param: torch.Tensor) -> None:
        # Traced by compiled autograd, a queued callback would break its graph: no backward
        # norm there (the step norms are still taken, in the optimizer's pre-hook).
        if self._queued or torch.compiler.is_compiling() or (self._due is not None
                                                             and not self._due()):
            return None
        try:
            torch.autograd.Variable._execution_engine.queue_callback(self._after_backward)
            self._queued = True
        except Exception as exc:  # compiled autograd, say: the backward norm is left out
            self._warn(("grad_norm", "backward"), f"the grads' norm at the end of backward "
                       f"is not recorded ({type(exc).__name__}: {exc}); warned once")
        return None

    def _after_backward(self) -> None:
        self._queued = False
        try:
            with torch.no_grad():
                self._backward = total_norm(
                    [local(p.grad) for p in self._params if p.grad is not None])
        except Exception as exc:
            self._warn(("grad_norm", "backward", type(exc).__name__), f"the grads' norm at "
                       f"the end of backward failed ({type(exc).__name__}: {exc}); warned once")

    def stepped(self, name: str, optimizer: Any) -> None:
        """In `optimizer`'s step pre-hook: the norm of the grads it is about to use; 0 where
        none of its parameters holds a grad (None): the step ran, on no gradient at all (its
        loss does not reach them, or zero_grad() ran between backward and step), which an
        absent norm would read as a step that never ran."""
        with torch.no_grad():
            norm = total_norm([local(p.grad) for g in optimizer.param_groups
                               for p in g["params"] if p.grad is not None])
        self._step[name] = 0.0 if norm is None else norm

    def take(self, single: bool) -> list[tuple[str, Any]]:
        """The step's norms as signals; `single`: one optimizer, named GRAD_NORM_STEP alone."""
        if self._lazy and self._handle is None:  # a Lazy model's first forward
            self.attach(self._params)
        out = [] if self._backward is None else [(GRAD_NORM_BACKWARD, self._backward)]
        for name, norm in self._step.items():
            out.append((GRAD_NORM_STEP if single else f"{GRAD_NORM_STEP}/{name}", norm))
        self._backward, self._step = None, {}
        return out


class EvalModes:
    """The modes of a model's Dropout and BatchNorm modules at evaluation (module docstring)."""

    def __init__(self, passes: Passes | None = None) -> None:
        self._model: torch.nn.Module | None = None
        self._dropouts: list[torch.nn.Module] = []
        self._norms: list[torch.nn.Module] = []
        self._handle: Any = None
        self._seen: tuple[int, int, int] | None = None
        self._trained: tuple[int, int, int] | None = None  # the step's first training pass's
        self.passes = passes if passes is not None else Passes()

    def attach(self, model: torch.nn.Module, called: torch.nn.Module | None = None) -> None:
        """Read the modes of `model`'s modules when `called` (`model` itself by default)
        runs a forward pass without autograd."""
        self.detach()
        self._model = model
        modules = list(model.modules())
        self._dropouts = [m for m in modules if isinstance(m, _DROPOUTS)
                          and float(getattr(m, "p", 1.0)) > 0]
        self._norms = [m for m in modules if isinstance(m, _NORMS)]
        called = model if called is None else called
        self._handle = called.register_forward_pre_hook(
            WeakHook(self._before_forward, copies_as_get=True))

    def detach(self) -> None:
        if self._handle is not None:
            self._handle.remove()
        self._handle = None

    def _modes(self) -> tuple[int, int, int]:
        return (int(self._model.training), sum([m.training for m in self._dropouts]),
                sum([m.training for m in self._norms]))

    def _before_forward(self, module: torch.nn.Module, args: Any) -> None:
        # _modes inline, in loops: a hook calls no Python function of its own (hook_refs).
        # The passes are counted eagerly only: traced, a count read would be guarded on.
        grad = torch.is_grad_enabled()
        # A pass that an autograd backward runs (activation checkpointing recomputing the
        # model) is the training pass's own, not a new one.
        eager = not torch.compiler.is_compiling() and (_GRAPH_TASK is None or _GRAPH_TASK() < 0)
        if eager:
            passes = self.passes
            passes.calls += 1
            if grad:
                passes.retry = passes.training
                passes.begun += 1
                if passes.training_began is not None:  # (an evaluation's layout hooks on)
                    try:
                        passes.training_began()
                    except Exception:  # never into the user's forward
                        passes.training_began = None
            elif passes.evaluating is not None and not self._model.training:
                # (ActivationHooks, a few evaluations: the model in eval mode, not a no-grad
                # pass in train mode such as a rollout or a target computation)
                try:
                    passes.evaluating()
                except Exception:  # never into the user's forward: the capture stops
                    passes.evaluating = None
            passes.training = grad
        # A training pass's modes: its step's first, read eagerly (traced, a read is guarded on).
        if grad and not (eager and self._trained is None):
            return None
        dropout = norm = 0
        for m in self._dropouts:
            dropout += m.training
        for m in self._norms:
            norm += m.training
        if grad:
            self._trained = (int(self._model.training), dropout, norm)
        else:
            self._seen = (int(self._model.training), dropout, norm)
        return None

    def train_step(self) -> list[tuple[str, Any]]:
        """A training step ended: forward passes seen so far were not the evaluation's. The
        modes of its first training pass (at the call when none was seen eagerly), as signals
        rows of the train split."""
        self._seen = None
        if self._model is None:
            return []
        trained, self._trained = self._trained, None
        model, dropout, norm = trained if trained is not None else self._modes()
        return [(TRAIN_MODE_MODEL, model), (TRAIN_MODE_DROPOUT, dropout),
                (TRAIN_MODE_NORM, norm)]

    def take(self) -> list[tuple[str, Any]]:
        """The modes of the evaluation that `log()` reports."""
        if self._model is None:
            return []
        seen, self._seen = self._seen, None
        model, dropout, norm = seen if seen is not None else self._modes()
        return [(TRAIN_MODE_MODEL, model), (TRAIN_MODE_DROPOUT, dropout),
                (TRAIN_MODE_NORM, norm), (DROPOUT_MODULES, len(self._dropouts)),
                (NORM_MODULES, len(self._norms))]


def amp_scale(scaler: Any, stepped: bool | None) -> list[tuple[str, Any]]:
    """The scale of an enabled GradScaler, as the tensor it keeps (reading it would sync), and
    whether it skipped the step: `stepped` says whether the optimizer's step ran (None: no
    optimizer is watched). GradScaler.step calls optimizer.step only for finite gradients."""
    if scaler is None or not getattr(scaler, "is_enabled", lambda: False)():
        return []
    scale = getattr(scaler, "_scale", None)
    if scale is None:  # before its first scale() call
        return []
    out = [(AMP_SCALE, scale if scale.device.type != "cpu" else float(scale))]
    return out + ([] if stepped is None else [(AMP_SKIPPED, 0.0 if stepped else 1.0)])
