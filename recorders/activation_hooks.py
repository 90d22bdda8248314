"""Forward hooks on a model's leaf modules, present only for the steps that record activations.

On the other steps a hooked leaf module would cost each forward pass a Python call for nothing,
and a compiled model would see its hooks change. A compiled model runs its recording steps
uncompiled (compiled.py); a hook that torch.compile traces anyway records nothing, and so does
one that compiled code the recorder cannot see skips. meta.json names the recording steps left
without activations either way as absent (`take`). A step's activations are those of its first
training forward pass (loop_checks.Passes): not of an evaluation (what runs without autograd
outside a training pass, even in train mode), nor of a second micro-batch, nor of a pass that
raised before its backward when the step is retried (a pass that raised with no retry keeps
the outputs it had). A module called several times in that pass (a decoder applying one Linear
at every time step) has each call read, up to MAX_CALLS; record_activations pools its calls
into the module's row, and meta.json's `activation_calls` names such modules with their calls.
The first recording step also keeps each call's input and output shapes (`shapes`, meta.json's
`module_shapes`). Modules that read a layout (environment.batch_first_of: RNN/LSTM/GRU, and
the Transformer layers and nn.MultiheadAttention, which are no leaves) have a second hook, on
while the others are: it keeps each distinct input shape such a module is called with on the
recording steps, in training passes and in an evaluation read as below (its split), a few per
module (MAX_LAYOUT_SHAPES), with the split and step (meta.json's `module_input_shapes`): an
epoch's smaller last batch or an evaluation of another batch size shows where the batch is
when the usual batch equals the sequence length. The first LAYOUT_EVALUATIONS evaluations that
run with the hooks off have that second hook alone put on as they begin (loop_checks.Passes'
`evaluating`, called by the model's pre-hook on a pass without autograd with the model in eval
mode: a no-grad rollout in train mode is none), and taken off at the `log()` that names their
split, as a training pass begins or at the end of the step: a few evaluations' cost in a run,
none on the training steps, none on a compiled model. Their shapes wait for that `log()` as
the evaluation rows below do, and reach meta.json when taken (at a `log()`, a step's end or
`close()`), after the last recording step too. A scripted module (torch.jit.ScriptModule)
takes no Python hook: it is left out of both kinds, and a hook that cannot be put on stops the
capture, never the training. The hooks hold the recorder weakly, and a
copy of a hooked model (deepcopy, torch.save) carries hooks that do nothing (hook_refs).

An evaluation that runs while the hooks are on (between `step()` of the step before a recording
step and that step's training forward pass: the same weights as that pass) has its first
forward pass read the same way, calls pooled, into rows of its own (`take_evaluation`): the
recorder writes them at the recording step with the split of the next `log()` call, or as
"eval" when none comes before the next step ends. What the model runs in eval mode counts as an
evaluation too. A compiled model given to the Recorder runs its evaluations compiled
(compiled.py): none is read.
"""
from __future__ import annotations

import time
from typing import Any, Callable

import torch

from tracelab.recorders import compiled
from tracelab.recorders.activations import ActivationStats, activation_stats
from tracelab.recorders.environment import batch_first_of
from tracelab.recorders.hook_refs import WeakHook
from tracelab.recorders.loop_checks import Passes

MAX_CALLS = 64  # calls of one module read per step; a longer recurrence's later calls are not
MAX_LAYOUT_SHAPES = 4  # distinct input shapes kept per module with a bool batch_first
LAYOUT_EVALUATIONS = 2  # evaluations off the recording steps whose layout shapes are read
INPUT_NAMES = ("input", "src", "tgt", "query", "x")  # a first input passed by keyword


class ActivationHooks:
    def __init__(self, warn: Any, failed: Callable[[], bool], passes: Passes | None = None):
        self._warn = warn
        self._failed = failed  # whether the writer has failed: then nothing is captured
        self._passes = passes if passes is not None else Passes()  # (loop_checks)
        self._pass_seen = 0  # the training pass the last captured output was of
        self._pass_from: int | None = None  # where its rows begin in _activations
        self._model: torch.nn.Module | None = None
        self._leaves: list[torch.nn.Module] = []
        self._handles: list[Any] = []
        self._layouts: dict[int, tuple[torch.nn.Module, str]] = {}  # batch_first modules
        self._layout_shapes: dict[str, list[dict[str, Any]]] = {}  # module_input_shapes
        self._layout_pending: list[tuple[str, dict[str, Any]]] = []  # an evaluation's, unnamed
        self._layout_new = False  # a shape was added since meta.json last learned them
        self._layout_handles: list[Any] = []  # the layout hooks of an evaluation's, alone
        self._layout_evaluations = 0  # evaluations read so (LAYOUT_EVALUATIONS at most)
        self._names: dict[int, tuple[str, str]] = {}
        self._calls: dict[str, int] = {}  # the leaf modules captured this step: their calls
        self._later_pass = False  # the pass in progress is not the step's first
        self._repeated: dict[str, int] = {}  # most calls captured of a module called repeatedly
        self._shapes: dict[str, list[dict[str, Any]]] = {}  # each call's, on the first step
        self._shapes_taken = False
        self._activations: list[tuple[str, int, ActivationStats]] = []
        self._eager: Any = compiled.EagerSteps(warn)
        self._ran = False  # a hook ran on a training forward pass of this step
        self._traced = False  # a hook was traced by torch.compile
        self._absent: dict[str, list[int]] = {"traced": [], "not_run": []}
        self._window = 0  # the step whose training pass the hooks wait for (the next take's)
        self._eval: list[tuple[str, int, ActivationStats]] = []  # the evaluation pass's rows
        self._eval_calls: dict[str, int] = {}
        self._eval_pass: int | None = None  # which model call (Passes.calls) it was
        self._eval_step = 0  # the window it ran in
        self._eval_steps = 0  # steps ended since, with no log() to claim it
        self.cost = 0.0  # seconds the hooks spent on the training thread

    def attach(self, model: torch.nn.Module, points: Any) -> None:
        """Hook `model`'s leaf modules (unhooked until `arm`); `points` are its compiled
        wrappers (compiled.compiled_points), run uncompiled while the hooks are on."""
        self.arm(False)
        self._model, self._leaves, self._names, self._layouts = model, [], {}, {}
        for path, module in model.named_modules():
            if isinstance(module, torch.jit.ScriptModule):
                continue  # a scripted module takes no Python hook (register_forward_hook raises)
            if batch_first_of(module) is not None:
                self._layouts[id(module)] = (
                    module, compiled.plain_name(path) or type(module).__name__)
            if next(module.children(), None) is None:
                self._leaves.append(module)
                self._names[id(module)] = (compiled.plain_name(path) or type(module).__name__,
                                           type(module).__name__)
        self._eager = compiled.EagerModel(points, self._warn) if points \
            else compiled.EagerSteps(self._warn)
        # An evaluation off the recording steps has its layout modules' input shapes read, a
        # few times in a run (a compiled model's are not: hooks would change its guards).
        self._passes.evaluating = WeakHook(self._evaluation_began) \
            if self._layouts and not points else None

    def _evaluation_began(self) -> None:
        """An evaluation forward pass began eagerly (loop_checks.EvalModes): with the hooks
        off, hook the layout modules alone until the step ends or a log() takes the shapes."""
        if self._handles or self._layout_handles or self._failed():
            return
        if self._layout_evaluations >= LAYOUT_EVALUATIONS:
            self._passes.evaluating = None  # no cost on later evaluations
            return
        self._layout_evaluations += 1
        layout = WeakHook(self._layout_hook)
        try:
            for m, _ in self._layouts.values():
                self._layout_handles.append(m.register_forward_hook(layout, with_kwargs=True))
        except Exception:  # a module that takes no hook: no evaluation's shapes, never a raise
            self._layout_off()
            self._passes.evaluating = None
            return
        # Off as a training pass begins (a step that follows the evaluation with no log()).
        self._passes.training_began = WeakHook(self._layout_off)

    def _layout_off(self) -> None:
        for handle in self._layout_handles:
            handle.remove()
        self._layout_handles = []
        self._passes.training_began = None

    def arm(self, on: bool) -> None:
        """Hook the leaf modules' forward passes, or unhook them; compiled code runs eagerly
        while they are hooked."""
        if on and self._leaves and not self._handles:
            self._layout_off()
            hook = WeakHook(self._hook)
            self._handles = [m.register_forward_hook(hook) for m in self._leaves]
            layout = WeakHook(self._layout_hook)
            self._handles += [m.register_forward_hook(layout, with_kwargs=True)
                              for m, _ in self._layouts.values()]
        if not on:
            self._layout_off()  # an evaluation's, if any (the run closes)
        if not on and self._handles:
            for handle in self._handles:
                handle.remove()
            self._handles = []
        self._eager.hold(bool(self._handles))

    def _new_pass(self) -> None:
        """A training pass began since the last output captured: if the pass before it reached
        no backward (it raised, and the step was retried), its rows are not the step's."""
        passes = self._passes
        if passes.retry and self._pass_from is not None:
            del self._activations[self._pass_from:]
            self._calls = {}
            for name, _, _ in self._activations:
                self._calls[name] = self._calls.get(name, 0) + 1
        self._pass_seen, self._pass_from = passes.begun, len(self._activations)
        # A second micro-batch's pass: the step's activations are its first pass's.
        self._later_pass = self._pass_from > 0

    def take(self, step: int) -> tuple[list[tuple[str, int, ActivationStats]], str | None]:
        """The step's captured activations, and when it should have some and has none,
        meta.json's note of the steps whose activations are absent so far (else None). Called
        before `arm` for the next step: the hooks still on are the ended step's.

        Absent: the hooks were traced by torch.compile, or none of them ran on a training
        forward pass, which is what compiled code the recorder could not run eagerly does
        (the model compiled again after the Recorder was given it, or called from another
        compiled function)."""
        self._layout_off()  # an evaluation's since the step before: the step ended
        activations, self._activations = self._activations, []
        self._window = step + 1
        self._calls = {}
        self._later_pass = False
        self._pass_from = None  # a later pass's retry leaves this step's rows alone
        ran, traced, self._ran, self._traced = self._ran, self._traced, False, False
        if not self._handles or activations or (ran and not traced):
            return activations, None
        self._absent["traced" if traced else "not_run"].append(step)
        return activations, compiled.absent(**self._absent)

    def _hook(self, module: torch.nn.Module, args: Any, output: Any) -> None:
        # Hooked only while the step in progress records activations (arm).
        if compiled.is_compiling():  # traced: the step records no activations (compiled.py)
            self._traced = True
            return
        if module.training or torch.is_grad_enabled():
            self._ran = True
        # The model's mode, not the module's: a module frozen in eval mode (a BatchNorm) inside
        # a training pass has outputs of the step all the same. Without autograd, outside a
        # training pass (a frozen part run under no_grad is inside one), it is an evaluation.
        passes = self._passes
        if self._failed():
            return
        if not self._model.training or not (torch.is_grad_enabled() or passes.training):
            self._evaluation(module, output)
            return
        if passes.begun != self._pass_seen:
            self._new_pass()
        name, mtype = self._names[id(module)]
        calls = self._calls.get(name, 0)
        if self._later_pass or calls >= MAX_CALLS:
            return
        start = time.perf_counter()
        out = output[0] if isinstance(output, (tuple, list)) and output else output
        if isinstance(out, torch.Tensor) and out.is_floating_point() and out.numel():
            self._calls[name] = calls + 1
            # activation_stats reads a detached view: no autograd work to switch off.
            self._activations.append((name, out.numel(), activation_stats(out, mtype)))
            if not self._shapes_taken:  # the first recording step
                self._shapes.setdefault(name, []).append(
                    {"inputs": [list(a.shape) for a in args if isinstance(a, torch.Tensor)],
                     "output": list(out.shape)})
        self.cost += time.perf_counter() - start

    def _layout_hook(self, module: torch.nn.Module, args: Any, kwargs: Any, output: Any) -> None:
        """A batch_first module's call on a recording step: its first input's shape, kept when
        new (module docstring); an evaluation's waits for its split (take_evaluation)."""
        if compiled.is_compiling() or self._failed():
            return
        _, name = self._layouts.get(id(module), (None, None))
        shapes = self._layout_shapes.setdefault(name, []) if name is not None else None
        if shapes is None or len(shapes) >= MAX_LAYOUT_SHAPES:
            return
        first = next((a for a in args if isinstance(a, torch.Tensor)), None)
        if first is None and isinstance(kwargs, dict):
            first = next((kwargs[k] for k in INPUT_NAMES
                          if isinstance(kwargs.get(k), torch.Tensor)), None)
        if first is None:
            return
        shape = list(first.shape)
        passes = self._passes
        if not self._handles and self._model.training:
            return  # an evaluation's hook alone, and a pass in train mode: not the evaluation
        if not self._model.training or not (torch.is_grad_enabled() or passes.training):
            pending = [s for n, s in self._layout_pending if n == name]
            if len(pending) < MAX_LAYOUT_SHAPES and \
                    all(s["inputs"] != shape for s in pending):
                self._layout_pending.append((name, {"inputs": shape, "step": self._window}))
            return
        if all(s["inputs"] != shape or s["split"] != "train" for s in shapes):
            shapes.append({"inputs": shape, "split": "train", "step": self._window})
            self._layout_new = True

    def _evaluation(self, module: torch.nn.Module, output: Any) -> None:
        """A hooked module's output in an evaluation: read on its first pass in the window."""
        passes = self._passes
        if self._eval_pass is None or (self._eval_step != self._window and not self._eval):
            self._eval_pass, self._eval_step, self._eval_steps = passes.calls, self._window, 0
        if passes.calls != self._eval_pass or self._eval_step != self._window:
            return  # a later evaluation pass (the next batch), or an unclaimed window's
        name, mtype = self._names[id(module)]
        calls = self._eval_calls.get(name, 0)
        if calls >= MAX_CALLS:
            return
        start = time.perf_counter()
        out = output[0] if isinstance(output, (tuple, list)) and output else output
        if isinstance(out, torch.Tensor) and out.is_floating_point() and out.numel():
            self._eval_calls[name] = calls + 1
            self._eval.append((name, out.numel(), activation_stats(out, mtype)))
        self.cost += time.perf_counter() - start

    def take_evaluation(self, claimed: bool, split: str = "eval"
                        ) -> tuple[int, list[tuple[str, int, ActivationStats]]]:
        """The rows of the evaluation pass read and not yet taken, with the step to record
        them at: when `claimed` (a `log()` names their split), or once a whole step ended
        without one (else none, kept for a later call). The batch_first modules' input shapes
        read in the evaluation take the split as well (`claimed`: `split`, else "eval")."""
        if self._layout_pending:
            # Unclaimed, a shape waits as the rows do: until a whole step ended after the one
            # it was read in (its window), for a log() that names its split.
            keep = []
            for name, shape in self._layout_pending:
                if not claimed and shape["step"] > self._window - 2:
                    keep.append((name, shape))
                    continue
                shapes = self._layout_shapes.setdefault(name, [])
                entry = {"inputs": shape["inputs"], "split": split if claimed else "eval",
                         "step": shape["step"]}
                if len(shapes) < MAX_LAYOUT_SHAPES and all(
                        (s["inputs"], s["split"]) != (entry["inputs"], entry["split"])
                        for s in shapes):
                    shapes.append(entry)
                    self._layout_new = True
            self._layout_pending = keep
        if claimed:
            self._layout_off()
        rows = self._eval
        if not rows or not (claimed or self._eval_steps >= 1):
            self._eval_steps += bool(rows)
            return self._eval_step, []
        self._eval, self._eval_calls, self._eval_pass = [], {}, None
        return self._eval_step, rows

    def new_input_shapes(self) -> dict:
        """meta.json's `module_input_shapes` when a shape was added since it last learned them
        (an evaluation's, taken at its log(), at a step's end or at close), else {}."""
        if not self._layout_new:
            return {}
        self._layout_new = False
        return {"module_input_shapes": {n: list(s) for n, s in self._layout_shapes.items() if s}}

    def calls_and_shapes(self, activations: list[tuple[str, int, ActivationStats]]) -> dict:
        """What meta.json should learn of a step's `activations` (taken): `activation_calls`
        when a module was called more often than before, `module_shapes` after the first step
        that captured any."""
        new: dict[str, Any] = {}
        counts: dict[str, int] = {}
        for name, _, _ in activations:
            counts[name] = counts.get(name, 0) + 1
        grown = {n: k for n, k in counts.items() if k > max(1, self._repeated.get(n, 0))}
        if grown:
            self._repeated.update(grown)
            new["activation_calls"] = dict(self._repeated)
        if activations and not self._shapes_taken:  # later steps add no shapes
            self._shapes_taken = True
            new["module_shapes"] = self._shapes
        new.update(self.new_input_shapes())
        return new
