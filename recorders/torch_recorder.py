"""Recorder: attaches to a PyTorch training loop and writes its trace.

    with tracelab.Recorder("runs/exp1", model=model, optimizer=opt, config=hparams) as rec:
        for x, y in rec.iterate(loader):
            opt.zero_grad(); loss = loss_fn(model(x), y); loss.backward(); opt.step()
            rec.step(loss=loss, inputs=x, targets=y, metrics={"acc": acc})
        rec.log("val", metrics={"loss": val_loss, "acc": val_acc}, inputs=x_val, targets=y_val)

Each step's producers (its scalars, ParameterStats, record_activations, InputStats) add their
rows to the step's StepRecord (transfer.py), each with the device tensors it needs. Every step
also checks its input and target batches (sentinel.py: min, max, NaN and Inf counts), and the
loop itself (loop_checks.py: gradient resets, modes at evaluation, the GradScaler's scale).

Which steps record what is fixed in advance (cadence.py): per-layer grad norms every step, the
grads' full statistics every 10th step, weights, updates, activations and the input profile
every 25th step, the grads', weights' and updates' statistics on each of the first 20 steps too.
The recorder never changes it by itself: the same script records the same steps on any machine.
meta.json's `recorder` holds it.

Cost model. The statistics are torch's own ops on the tensors' device, the same on the CPU and
on accelerators (stats.py): a few fused foreach reductions, one `_foreach_copy_` of the weights
before the optimizer step on the steps that record updates, and everything a step produced is
packed into one tensor per device and copied once (non-blocking into pinned memory on a GPU).
A step that records nothing beyond its scalars and grad norms launches one small copy and never
syncs the host. Building rows and writing Parquet happen on the writer thread; `cost` says what
all of it took.
"""
from __future__ import annotations

import math
import time
import traceback
import weakref
from typing import Any, Iterable, Iterator, Mapping, Sequence

import torch

from tracelab.recorders import compiled
from tracelab.recorders import environment as env
from tracelab.recorders.activation_hooks import ActivationHooks
from tracelab.recorders.activations import record_activations
from tracelab.recorders.cadence import DEFAULT_EVERY, SPARSE_EVERY, Cadence
from tracelab.recorders.classes import record_classes
from tracelab.recorders.fingerprints import Fingerprints
from tracelab.recorders.graph_parameters import UnregisteredParameters
from tracelab.recorders.hook_refs import WeakHook
from tracelab.recorders.inputs import InputStats
from tracelab.recorders.rows import JointRows
from tracelab.recorders.loop_checks import (EvalModes, GradNorms, GradResets, Passes,
                                            add_signals, amp_scale)
from tracelab.recorders.outputs import OutputFacts
from tracelab.recorders.parameters import ParameterStats
from tracelab.recorders.scalars import Scalars, Skip, WarnOnce, scalar_value
from tracelab.recorders.sentinel import Sentinel, as_tensors
from tracelab.recorders.transfer import StepRecord
from tracelab.core.schema import (DATA_TIME, EVAL, LOSS_NAME, LR_PREFIX, META_ABSENT,
                                   META_UNREGISTERED,
                                   META_OPTIMIZERS, META_SCHEDULERS, META_LOSS_FN,
                                   META_OUTPUTS, OPTIMIZER_STEPS, STEP_TIME, TARGETS, TRAIN)
from tracelab.core.writer import RunWriter


# The series the recorder writes itself under a metric's name: a metric of that name is renamed.
_OWN_SCALARS = frozenset({STEP_TIME, DATA_TIME})
_OWN_SCALARS_AND_LOSS = _OWN_SCALARS | {LOSS_NAME}


def _parameter_count(optimizers: Iterable[torch.optim.Optimizer]) -> int:
    return sum(len(group["params"]) for opt in optimizers for group in opt.param_groups)


def _named(given: Any) -> dict[str, Any]:
    """Optimizers (or schedulers) by name: a dict's keys, a list's positions ("0", "1", ...)."""
    if given is None:
        return {}
    if isinstance(given, Mapping):
        return {str(k): v for k, v in given.items() if v is not None}
    if isinstance(given, (list, tuple)):
        return {str(i): v for i, v in enumerate(given) if v is not None}
    return {"0": given}


class Recorder:
    """Record a training run into `run_dir` (see the module docstring).

    Which steps record what (cadence.py; steps counted from 0, a step records when its index is
    a multiple of the setting): fixed in advance, never changed by the recorder.
    every: the grads' full statistics (None: every 10th step), and on each of the first 20
    steps (cadence.DENSE_STEPS).
    grad_norm_every: the grads' per-layer norms on the other steps (every step).
    weight_every: weight and update statistics (every 25th step, and the first 20 steps):
    weights change slowly, and reading them and their pre-step copy is most of the
    statistics' cost on a large model.
    activation_every: activation statistics (forward hooks on leaf modules), every 25th step.
    activations: False records no activations, and a compiled model then never leaves its
    compiled graph (compiled.py): its numbers are those of the same compiled run without the
    recorder. meta.json's `absent` says why they are missing.
    input_every: input-batch (and target) profile for `step(inputs=..., targets=...)`; None:
    every 25th step. `log()` always profiles. Every step checks its batches' range and NaN/Inf
    (the sentinel).
    feature_names: names of the input features (dim 1), or a dict of them per input key.
    sample_size: values kept per (split, feature) in the uniform reservoir (the samples table).
    rank: the process's rank; None takes torch.distributed's rank when it is initialized.
    scaler: a `torch.amp.GradScaler` whose scale is recorded every step.
    optimizer: one optimizer, a list of them, or a dict of them by name (a GAN's generator
    and discriminator): each one's param groups go in meta.json's `optimizers`, the learning
    rate of each group is recorded every step, and each one's step pre-hook reads the grads
    it used. Without one, meta.json records `optimizers: {}` (the LR is unknown).
    scheduler: LR scheduler(s), given the same way: their class and settings in meta.json (the
    LR they set is read from the param groups each step anyway).
    fingerprints: input rows hashed per split (a bounded sample), for train/val overlap.
    loss_fn: the loss module (or function): its type, reduction and settings go to meta.json.
    """

    def __init__(self, run_dir: str, model: torch.nn.Module | None = None,
                 optimizer: (torch.optim.Optimizer | Sequence[torch.optim.Optimizer]
                             | Mapping[str, torch.optim.Optimizer] | None) = None, *,
                 config: Mapping[str, Any] | None = None, every: int | None = None,
                 grad_norm_every: int = 1, weight_every: int = SPARSE_EVERY,
                 activation_every: int = SPARSE_EVERY, input_every: int | None = None,
                 activations: bool = True,
                 feature_names: Sequence[str] | Mapping[str, Sequence[str]] | None = None,
                 sample_size: int = 2_000, flush_interval: float = 1.0,
                 rank: int | None = None, scaler: Any = None, fingerprints: int = 2_048,
                 scheduler: Any = None,
                 loss_fn: Any = None):
        self.cadence = Cadence(
            grad_norm_every=grad_norm_every, every=DEFAULT_EVERY if every is None else every,
            weight_every=weight_every, activation_every=activation_every,
            input_every=SPARSE_EVERY if input_every is None else input_every)
        if isinstance(sample_size, bool) or not isinstance(sample_size, int) or sample_size < 1:
            raise ValueError(f"Recorder: sample_size must be a positive integer, got "
                             f"{sample_size!r}")
        _check_model(model)  # before the run's folder is made
        if rank is None:
            dist = torch.distributed
            rank = dist.get_rank() if dist.is_available() and dist.is_initialized() else 0
        distributed = rank != 0 or (torch.distributed.is_available()
                                    and torch.distributed.is_initialized())
        self._settings = dict(self.cadence.settings(), sample_size=sample_size)
        meta = {"config": dict(config or {}), "environment": env.environment(),
                "recorder": dict(self._settings), META_OPTIMIZERS: {}}
        schedulers = _named(scheduler)
        if schedulers:
            meta[META_SCHEDULERS] = {k: env.scheduler_summary(v) for k, v in schedulers.items()}
        if distributed:
            meta["world_size"] = torch.distributed.get_world_size() \
                if torch.distributed.is_initialized() else None
        self.writer = RunWriter(run_dir, meta, rank=rank, flush_interval=flush_interval)
        _close_when_dropped(self)
        self._records_activations = bool(activations)
        if not activations:
            self._settings["activations"] = False
            self.writer.update_meta(recorder=dict(self._settings),
                                    **{META_ABSENT: {"activations": ACTIVATIONS_OFF}})
        self.rank = rank
        self._warn = WarnOnce()  # recording never raises: each kind of problem warns once
        self._inputs = InputStats(feature_names, sample_size=sample_size, rank=rank,
                                  on_devices=lambda d: self.writer.update_meta(input_devices=d),
                                  warn=self._warn)
        self._targets = InputStats(None, sample_size=1, rank=rank, on_devices=lambda d: None,
                                   warn=self._warn, table=TARGETS, base="target")
        self._sentinel = Sentinel(self._warn)
        self._output_shapes: dict[str, dict[str, Any]] = {}
        self._outputs = OutputFacts(self._new_output_shapes)
        if loss_fn is not None:
            self.writer.update_meta(**{META_LOSS_FN: env.loss_summary(loss_fn)})
        self._fingerprints = Fingerprints(fingerprints, seed=0)
        self._rows = JointRows(lambda: self._inputs.feature_names, seed=rank)
        passes = Passes()  # the model's training passes, as EvalModes and GradResets see them
        self._grad_resets = GradResets(passes)
        self._eval_modes = EvalModes(passes)
        # On the steps that record the grads' full statistics: each total norm is a pass over
        # every grad, too dear on every step of a large model.
        self._grad_norms = GradNorms(self._warn, due=lambda: self.cadence.grads(self._step))
        self.scaler = scaler
        self._stepped = False  # the optimizer stepped since the last step()
        self._step_calls: dict[str, int] = {}  # optimizer.step() calls since the last step()
        self._step = 0  # the step in progress: the one the next step() records
        self._losses: list[torch.Tensor] = []  # accumulate_loss of the step in progress
        self._losses_summed = False
        self._last_step_end: float | None = None
        self._data_time: float | None = None
        self.model: torch.nn.Module | None = None
        self._given_model: torch.nn.Module | None = None  # as given: compiled, wrapped, ...
        self.optimizer: torch.optim.Optimizer | None = None  # the first of `optimizers`
        self.optimizers: dict[str, torch.optim.Optimizer] = {}
        self._unregistered = UnregisteredParameters()  # modules kept in a plain list
        self._optimizer_size = 0  # the optimizers' parameters when last looked at
        self._tracked: list[tuple[str, torch.nn.Parameter]] = []
        self._parameters = ParameterStats([])
        self._handles: list[Any] = []
        self._hooks = ActivationHooks(self._warn, lambda: self.writer.failed, passes)
        self._cost = 0.0  # seconds the training thread spent in the recorder
        if model is not None or optimizer is not None:
            self.watch(model, optimizer)

    # -- attaching ----------------------------------------------------------------------------
    def watch(self, model: torch.nn.Module | None = None, optimizer: Any = None, *,
              scaler: Any = None) -> "Recorder":
        """Attach a model, optimizer(s) (one, a list or a dict by name; they replace those
        watched before) and/or GradScaler (frameworks create them after the recorder)."""
        if scaler is not None:
            self.scaler = scaler
        if model is None and optimizer is not None and self._changed_parameters():
            model = self._given_model  # a module was replaced: track the parameters it has now
        _check_model(model)
        if model is not None:
            self._given_model = model
            points = compiled.compiled_points(model)
            self.model = env.unwrap(model)
            self._tracked = [(compiled.plain_name(n), p)
                             for n, p in self.model.named_parameters() if p.requires_grad]
            self._parameters = ParameterStats(self._tracked)
            self._grad_resets.attach([p for _, p in self._tracked])
            self._grad_norms.attach([p for _, p in self._tracked])
            # On the user's module, so that evaluations calling it directly are seen too;
            # inside torch.compile(DDP(model)) a hook there would make dynamo compile the
            # module, which it does not without the recorder: there the wrapper is hooked.
            self._eval_modes.attach(
                self.model, model if compiled.compiles_a_wrapper(model) else self.model)
            sharded = self._parameters.sharded_names()
            if sharded:  # the reader merges these names' statistics over the ranks
                self.writer.update_meta(sharded_parameters=sharded)
            if self._records_activations:  # else no hook, and compiled code stays compiled
                self._hooks.attach(self.model, points)
            if points:
                self._settings["compiled"] = True
                self.writer.update_meta(recorder=dict(self._settings))
            self._hooks.arm(self.cadence.activations(self._step))
        optimizers = _named(optimizer)
        if optimizers and list(optimizers.items()) != list(self.optimizers.items()):
            self.optimizers = optimizers
            self.optimizer = next(iter(optimizers.values()))
            self._optimizer_size = _parameter_count(optimizers.values())
            for handle in self._handles:  # the replaced optimizers' hooks
                handle.remove()
            # Outside the graph of a compiled optimizer.step: the snapshot copies in Python.
            # (This imports dynamo, as torch's own first optimizer step does anyway.)
            self._handles = [opt.register_step_pre_hook(
                compiled.outside_compile(WeakHook(self._before_optimizer_step)))
                for opt in optimizers.values()]
        if optimizers or model is not None:
            self._describe_optimizers()
        if self.model is not None:
            self.writer.update_meta(model=compiled.plain_summary(
                env.model_summary(self.model, list(self.optimizers.values()))))
        return self

    def _describe_optimizers(self) -> None:
        """meta.json's optimizers, their groups naming the tracked parameters they hold."""
        if not self.optimizers:
            return
        names = {id(p): n for n, p in self._tracked}
        summaries = {k: env.optimizer_summary(opt, names) for k, opt in self.optimizers.items()}
        self.writer.update_meta(**{META_OPTIMIZERS: summaries,
                                   "optimizer": next(iter(summaries.values()))})

    def _changed_parameters(self) -> bool:
        """Whether the watched model's trainable parameters are no longer the tracked ones."""
        if self.model is None:
            return False
        now = [id(p) for p in self.model.parameters() if p.requires_grad]
        return now != [id(p) for _, p in self._tracked]

    def _track_added_parameters(self) -> None:
        """After an `add_param_group` (the optimizer's parameter count moved), track the model
        anew if its parameters changed: a module added with the group, perhaps."""
        count = _parameter_count(self.optimizers.values())
        if self.optimizers and count != self._optimizer_size:
            self._optimizer_size = count
            if self._changed_parameters():
                self.watch(self._given_model)

    # -- hooks (training thread) ----------------------------------------------------------------
    def _before_optimizer_step(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        if len(self.optimizers) <= 1:
            self._grad_resets.optimizer_stepped()
        else:
            # With several, a backward legitimately adds to another optimizer's stale grads
            # (a GAN's generator pass through the discriminator): resets are judged between
            # the steps of the optimizer that holds the watched parameter.
            self._grad_resets.owner_stepped(optimizer)
        self._stepped = True
        name = next((k for k, v in self.optimizers.items() if v is optimizer), "0")
        self._step_calls[name] = self._step_calls.get(name, 0) + 1
        if not self.writer.failed and self.cadence.grads(self._step):
            self._produce("grad norm at the optimizer step", self._grad_norms.stepped, name,
                          optimizer)
        # Before the snapshot: a module added this step has its update recorded too.
        self._track_added_parameters()
        if self.writer.failed or not self.cadence.weights(self._step):
            return
        start = time.perf_counter()
        self._produce("parameter snapshot", self._parameters.snapshot)
        self._cost += time.perf_counter() - start

    # -- the loop -------------------------------------------------------------------------------
    def iterate(self, iterable: Iterable) -> Iterator:
        """Yield from `iterable`, timing each wait for the next batch (the data_time scalar)."""
        iterator = iter(iterable)
        while True:
            start = time.perf_counter()
            try:
                batch = next(iterator)
            except StopIteration:
                return
            self._data_time = time.perf_counter() - start
            yield batch

    def step(self, loss: Any = None, inputs: Any = None,
             metrics: Mapping[str, Any] | None = None, *, targets: Any = None,
             outputs: Any = None, data_time: float | None = None) -> None:
        """Record one optimizer step. Call it once per step, after `optimizer.step()`.

        loss: the step's loss; without one, that of the losses given to `accumulate_loss`.
        inputs, targets: the step's batch (a tensor, a tuple or dict of them); targets are the
        labels or regression targets the loss compares the model's output with.
        outputs: the tensor given to the loss (a mapping's "logits", a tuple's first tensor):
        on profiled steps its range, shapes and row facts (outputs.py).
        data_time: seconds this step waited for its batch, when the loop does not use
        `iterate()` (framework callbacks measure it themselves).
        """
        start = time.perf_counter()
        try:
            self._record_step(loss, inputs, targets, metrics, data_time, outputs)
        except Exception as exc:  # never raise into the training loop
            self._failed("step", exc)
        finally:
            self._cost += time.perf_counter() - start

    def _failed(self, what: str, exc: Exception) -> None:
        self._warn((what, type(exc).__name__), f"recording {what} failed at step "
                   f"{self._last_step} ({type(exc).__name__}: {exc}); training continues, "
                   "warned once")

    def accumulate_loss(self, loss: torch.Tensor, *, scale: float = 1,
                        summed: bool = False) -> None:
        """Add one micro-batch's loss (a one-element tensor) to the step in progress, for a
        `step()` given no loss: it records their mean, or their sum when `summed` (each loss
        was divided by the whole step's count). scale undoes a division of each loss by the
        number of micro-batches (a framework's gradient accumulation). A loss of several values
        (reduction='none') adds its mean, warned about once."""
        start = time.perf_counter()
        try:
            self._accumulate(loss, scale, summed)
        except Exception as exc:  # never raise into the training loop
            self._failed("accumulate_loss", exc)
        finally:
            self._cost += time.perf_counter() - start

    def _accumulate(self, loss: Any, scale: float, summed: bool) -> None:
        if not (isinstance(loss, torch.Tensor) and loss.is_floating_point() and not loss.is_meta
                and loss.layout == torch.strided and loss.numel() == 1):
            try:
                value, _ = scalar_value(loss)
            except Skip as skip:
                self._warn(("accumulate_loss", skip.args[0]), f"accumulate_loss: {skip.args[1]}"
                           "; warned once")
                return
            if isinstance(loss, torch.Tensor) and loss.numel() != 1:
                self._warn(("accumulate_loss", "values"), f"accumulate_loss: a loss of "
                           f"{loss.numel()} values, not one (reduction='none'?); their mean is "
                           "added; warned once")
            loss = torch.as_tensor(value, dtype=torch.float32)
        value = loss.detach()
        if scale != 1:
            value = value * scale
        self._losses.append(value.float().reshape(()))
        self._losses_summed = summed

    @property
    def step_index(self) -> int:
        """The step in progress, counted from 0: the one the next `step()` records."""
        return self._step

    @property
    def records_inputs(self) -> bool:
        """Whether the step in progress profiles the inputs given to `step()` (input_every)."""
        return self.cadence.inputs(self._step)

    def _record_step(self, loss: Any, inputs: Any, targets: Any,
                     metrics: Mapping[str, Any] | None, data_time: float | None,
                     outputs: Any = None) -> None:
        if self.writer.closed:  # recorded nothing: not a step of the run
            return
        if data_time is not None:
            self._data_time = data_time
        self._track_added_parameters()
        step = self._step
        self._step += 1
        now = time.perf_counter()
        stopped = self.writer.failed or self.writer.closed
        activations, absent = self._hooks.take(step)
        self._hooks.arm(self.cadence.activations(step + 1) and not stopped)
        if absent:
            self.writer.update_meta(**{META_ABSENT: {"activations": absent}})
        if activations:
            calls = self._hooks.calls_and_shapes(activations)
            if calls:  # a module called several times per forward, the first step's shapes
                self.writer.update_meta(**calls)
        updates = self._parameters.end_step()
        modes = self._eval_modes.train_step()
        stepped, self._stepped = self._stepped, False
        calls, self._step_calls = self._step_calls, {}
        signals = modes + self._grad_resets.take() + self._grad_norms.take(
            len(self.optimizers) <= 1) + amp_scale(
            self.scaler, stepped if self.optimizer is not None else None) + [
            (OPTIMIZER_STEPS if len(self.optimizers) <= 1 else f"{OPTIMIZER_STEPS}/{name}", n)
            for name, n in calls.items() if n >= 2]
        if not self.optimizers:  # a hand-written update: step() ends the optimizer step
            self._grad_resets.optimizer_stepped()
        found = None if self._unregistered.done else self._produce(
            "unregistered parameters", self._unregistered.check, loss, self.model,
            self.optimizers.values())
        if found:
            self.writer.update_meta(**{META_UNREGISTERED: found})
        if self._losses:
            loss = self._accumulated_loss(loss)
        if stopped:
            return
        scalars = Scalars(step, TRAIN, self._warn)
        if loss is not None:
            scalars.add(LOSS_NAME, loss)
        single = len(self.optimizers) == 1
        for name, optimizer in self.optimizers.items():
            for i, group in enumerate(optimizer.param_groups):
                scalars.add(f"{LR_PREFIX}{i}" if single else f"{LR_PREFIX}{name}/{i}",
                            group.get("lr", math.nan))
        step_time = None if self._last_step_end is None else now - self._last_step_end
        if step_time is not None:
            scalars.add(STEP_TIME, step_time)
        if self._data_time is not None:
            scalars.add(DATA_TIME, self._data_time)
            self._data_time = None
        self._last_step_end = now
        scalars.add_all(metrics, _OWN_SCALARS if loss is None else _OWN_SCALARS_AND_LOSS,
                        LR_PREFIX if self.optimizer is not None else None)

        record = StepRecord(self._warn)
        record.add(scalars.rows, scalars.tensors)
        # Each producer on its own: one that fails is warned about, the others still record.
        cadence = self.cadence
        with torch.no_grad():
            grads, norms, weights = (cadence.grads(step), cadence.grad_norms(step),
                                     cadence.weights(step))
            if self.model is not None and (grads or norms or weights):
                self._produce("parameter statistics", self._parameters.record, step, record,
                              weights, updates, grads, norms)
            if activations:
                self._produce("activations", record_activations, step, activations, record)
            self._evaluation(record, EVAL, claimed=False)
            self._produce("signals", add_signals, record, step, TRAIN, signals)
            self._batch(step, TRAIN, inputs, targets, record, cadence.inputs(step), outputs)
        self.writer.write(record.seal())

    def _batch(self, step: int, split: str, inputs: Any, targets: Any, record: StepRecord,
               profile: bool, outputs: Any = None) -> None:
        """A batch's sentinel, and when `profile`, its input and target profiles, its rows'
        fingerprints, its classes and the facts of the outputs given to the loss."""
        if profile and outputs is not None:
            self._produce("outputs", self._outputs.record, step, split, outputs, targets, record)
        if inputs is None and targets is None:
            return
        try:  # numpy arrays and Series as what the producers read
            inputs, targets = as_tensors(inputs), as_tensors(targets)
        except Exception as exc:  # never the step's other rows
            self._failed("batch check", exc)
        self._produce("batch check", self._sentinel.record, step, split, inputs, targets, record)
        if not profile:
            return
        if inputs is not None:
            self._produce("inputs", self._inputs.record, step, split, inputs, record)
            self._produce("fingerprints", self._fingerprints.record, step, split, inputs, record)
        if targets is not None:
            self._produce("targets", self._targets.record, step, split, targets, record)
            self._produce("classes", record_classes, step, split, targets, record)
        if inputs is not None and targets is not None:
            self._produce("rows", self._rows.record, step, split, inputs, targets, record)

    def _evaluation(self, record: StepRecord, split: str, claimed: bool) -> None:
        """The activations of an evaluation forward pass (activation_hooks), as `split`, at
        the recording step they were read in; unless `claimed`, only once a whole step ended
        since they were read without a log() naming their split."""
        step, rows = self._hooks.take_evaluation(claimed, split)
        if rows:
            self._produce("evaluation activations", record_activations, step, rows, record,
                          split)
        shapes = self._hooks.new_input_shapes()  # an evaluation's, even after the last step
        if shapes:
            self.writer.update_meta(**shapes)

    def _new_output_shapes(self, split: str, shapes: dict[str, Any]) -> None:
        self._output_shapes[split] = shapes
        self.writer.update_meta(**{META_OUTPUTS: dict(self._output_shapes)})

    def _produce(self, what: str, produce: Any, *args: Any) -> Any:
        """produce(*args), or None when it raised (warned about once)."""
        try:
            return produce(*args)
        except Exception as exc:
            self._failed(what, exc)
            return None

    def _accumulated_loss(self, loss: Any) -> Any:
        """The step's loss: `loss` when given, else that of the accumulated ones (then cleared)."""
        losses, self._losses = self._losses, []
        if loss is not None:
            return loss
        stacked = torch.stack(losses)
        return stacked.sum() if self._losses_summed else stacked.mean()

    def log(self, split: str, metrics: Mapping[str, Any] | None = None,
            inputs: Any = None, *, targets: Any = None, outputs: Any = None) -> None:
        """Record another split (val, test, ...) at the current step; with a model attached,
        also whether its Dropout and BatchNorm modules were in training mode. outputs: what the
        evaluation gave its loss (see `step`)."""
        if self.writer.failed or self.writer.closed:
            return
        try:
            step = self._last_step
            scalars = Scalars(step, str(split), self._warn)
            scalars.add_all(metrics)
            record = StepRecord(self._warn)
            record.add(scalars.rows, scalars.tensors)
            with torch.no_grad():
                if str(split) != TRAIN:
                    self._produce("signals", add_signals, record, step, str(split),
                                  self._eval_modes.take())
                    self._evaluation(record, str(split), claimed=True)
                self._batch(step, str(split), inputs, targets, record, True, outputs)
            self.writer.write(record.seal())
        except Exception as exc:  # never raise into the training loop
            self._failed(f"log({split!r})", exc)

    @property
    def feature_names(self) -> Sequence[str] | Mapping[str, Sequence[str]] | None:
        """Names of the input features (see the class docstring); InputStats reads them."""
        return self._inputs.feature_names

    @feature_names.setter
    def feature_names(self, names: Sequence[str] | Mapping[str, Sequence[str]] | None) -> None:
        self._inputs.feature_names = names

    # -- ending ---------------------------------------------------------------------------------
    @property
    def _last_step(self) -> int:
        """The step recorded last (0 before the first): where log() and a failure belong."""
        return max(self._step - 1, 0)

    @property
    def cost(self) -> dict[str, float]:
        """What recording has cost so far: seconds on the training thread (hooks and `step`),
        the writer thread's CPU seconds, and the steps recorded."""
        return {"steps": self._step,
                "training_thread_s": round(self._cost + self._hooks.cost, 6),
                "writer_cpu_s": round(self.writer.cpu_seconds, 6)}

    def close(self, status: Mapping[str, Any] | None = None) -> None:
        """Flush everything and mark the run completed (or with the given status, a mapping)."""
        try:
            self._close(status)
        except Exception as exc:  # never raise into the training loop, nor at its end
            self._failed("close", exc)

    def _close(self, status: Mapping[str, Any] | None) -> None:
        if status is not None and not isinstance(status, Mapping):
            self._warn(("close", "status"), f"close: the status must be a mapping, got a "
                       f"{type(status).__name__}; the run is closed as completed")
            status = None
        self._hooks.arm(False)
        if not (self.writer.closed or self.writer.failed):
            record = StepRecord(self._warn)  # an evaluation no log() or step() followed
            self._evaluation(record, EVAL, claimed=True)
            self.writer.write(record.seal())
        for handle in self._handles:
            handle.remove()
        self._handles.clear()
        self._grad_resets.detach()
        self._grad_norms.detach()
        self._eval_modes.detach()
        if not self.writer.closed:
            self.writer.close(status)
            self.writer.update_meta(recorder=dict(self._settings, cost=self.cost))
            changed = self._produce("unregistered parameters", self._unregistered.at_close)
            if changed:
                self.writer.update_meta(**{META_UNREGISTERED: changed})
            if self.model is not None:  # the frozen parameters' values at the end
                self.writer.update_meta(frozen_at_close={compiled.plain_name(n): v for n, v in
                                                         env.frozen_values(self.model).items()})

    def __enter__(self) -> "Recorder":
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        if exc_type is None:
            self.close()
            return False
        try:
            told = "".join(traceback.format_exception(exc_type, exc, tb))
        except Exception:  # not an exception as Python raises them
            told = repr(exc)
        self.close({"state": "failed", "step": self._last_step,
                    "exception_type": getattr(exc_type, "__name__", repr(exc_type)),
                    "exception_message": str(exc), "traceback": told})
        return False


ACTIVATIONS_OFF = ("not recorded: Recorder(activations=False), so that a compiled model never "
                   "leaves its compiled graph")


def _close_when_dropped(recorder: Recorder) -> None:
    """A Recorder garbage-collected unclosed closes its writer: the run is finished and the
    writer's thread ends. The callback holds the writer, never the Recorder; at interpreter exit
    the writer's own handler closes the run instead ("closed at interpreter exit")."""
    weakref.finalize(recorder, recorder.writer.close,
                     {"state": "completed", "note": "closed when the Recorder was dropped"},
                     wait=False).atexit = False


def _check_model(model: Any) -> None:
    if model is None or isinstance(model, torch.nn.Module):
        return
    hint = ""
    if getattr(model, "_torchdynamo_orig_callable", None) is not None:
        hint = " (torch.compile of a compiled module returns one): give the Recorder the " \
            "module or its torch.compile wrapper"
    raise TypeError(f"tracelab: the model must be a torch.nn.Module, got a "
                    f"{type(model).__name__}{hint}")
