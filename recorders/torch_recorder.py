"""Recorder: attaches to a PyTorch training loop and writes its trace.

    with tracelab.Recorder("runs/exp1", model=model, optimizer=opt, config=hparams) as rec:
        for x, y in rec.iterate(loader):
            opt.zero_grad(); loss = loss_fn(model(x), y); loss.backward(); opt.step()
            rec.step(loss=loss, inputs=x, metrics={"acc": acc})
        rec.log("val", metrics={"loss": val_loss, "acc": val_acc}, inputs=x_val)

Cost model. On an accelerator the training thread only launches device work: the statistics
of all weights, grads and updates come from a few fused foreach reductions, and everything a
step produced is packed into one tensor per device and copied once (non-blocking into pinned
memory). A step that records nothing beyond its scalars launches one tiny copy and never syncs
the host. On the CPU, where every small torch call costs tens of microseconds inside a training
loop, compiled kernels (numba_kernels.py) do the work in few calls: one copy of the weights before the
optimizer step, then one pass over every weight, grad and update where they lie; one torch
`sum` and one kernel call per activation; an input batch is copied and profiled on the writer
thread. Building rows and writing Parquet always happen on the writer thread; `cost` says what
all of it took.
"""
from __future__ import annotations

import math
import time
import traceback
from typing import Any, Iterable, Iterator, Mapping, Sequence

import numpy as np
import torch

from tracelab.recorders import environment as env
from tracelab.recorders import kernel_loader
from tracelab.recorders.activations import EXTRA, ActivationStats, activation_stats
from tracelab.recorders.profile import (PACKED, Reservoir, array_profile, dtype_name,
                                        feature_names, feature_shape, frame_profile,
                                        tensor_profile)
from tracelab.recorders.parameters import ParameterStats
from tracelab.recorders.stats import RAW, finish
from tracelab.recorders.transfer import HostCopies, Packed
from tracelab.core.schema import (ACTIVATION, DATA_TIME, INPUTS, LOSS_NAME, LR_PREFIX, SCALARS,
                                  STEP_TIME, TENSORS, TRAIN)
from tracelab.core.writer import RunWriter

Number = (int, float)


class Recorder:
    """Record a training run into `run_dir` (see the module docstring).

    every: weight, grad and update statistics every `every` optimizer steps.
    activation_every: activation statistics (forward hooks on leaf modules) cadence.
    input_every: input-batch profile cadence for `step(inputs=...)`; `log()` always profiles.
    feature_names: names of the input features (dim 1), or a dict of them per input key.
    sample_size: values kept per (split, feature) in the uniform reservoir (the samples table).
    rank: the process's rank; None takes torch.distributed's rank when it is initialized.
    """

    def __init__(self, run_dir: str, model: torch.nn.Module | None = None,
                 optimizer: torch.optim.Optimizer | None = None, *,
                 config: Mapping[str, Any] | None = None, every: int = 1,
                 activation_every: int = 10, input_every: int = 10,
                 feature_names: Sequence[str] | Mapping[str, Sequence[str]] | None = None,
                 sample_size: int = 2_000, flush_interval: float = 1.0,
                 rank: int | None = None):
        for name, value in (("every", every), ("activation_every", activation_every),
                            ("input_every", input_every), ("sample_size", sample_size)):
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"Recorder: {name} must be a positive integer, got {value!r}")
        if rank is None:
            dist = torch.distributed
            rank = dist.get_rank() if dist.is_available() and dist.is_initialized() else 0
        self.every, self.activation_every, self.input_every = every, activation_every, input_every
        self.feature_names = feature_names
        self._settings = {"every": every, "activation_every": activation_every,
                          "input_every": input_every, "sample_size": sample_size}
        meta = {"config": dict(config or {}), "environment": env.environment(),
                "recorder": dict(self._settings)}
        if rank != 0 or (torch.distributed.is_available() and torch.distributed.is_initialized()):
            meta["world_size"] = torch.distributed.get_world_size() \
                if torch.distributed.is_initialized() else None
        kernel_loader.kernels()  # now, not in the first recorded step (a first compilation takes seconds)
        self.writer = RunWriter(run_dir, meta, rank=rank, flush_interval=flush_interval)
        self.rank = rank
        self._reservoir = Reservoir(sample_size, seed=rank)
        self._frame_rng = np.random.default_rng(rank)  # training thread
        self._writer_rng = np.random.default_rng([rank, 1])  # writer thread
        self._step = 0
        self._last_step_end: float | None = None
        self._data_time: float | None = None
        self.model: torch.nn.Module | None = None
        self.optimizer: torch.optim.Optimizer | None = None
        self._tracked: list[tuple[str, torch.nn.Parameter]] = []
        self._parameters = ParameterStats([])
        self._handles: list[Any] = []
        # Forward hooks exist only for steps that record activations: on the other steps a
        # hooked leaf module costs each forward pass a Python call for nothing.
        self._leaves: list[torch.nn.Module] = []
        self._forward_handles: list[Any] = []
        self._activations: list[tuple[str, int, ActivationStats]] = []
        self._captured: set[int] = set()
        self._module_names: dict[int, tuple[str, str]] = {}
        self._input_devices: dict[str, str] = {}
        self._cost = 0.0  # seconds the training thread spent in the recorder
        self._host = HostCopies()
        self._generators: dict[str, torch.Generator] = {}
        if model is not None or optimizer is not None:
            self.watch(model, optimizer)

    # -- attaching ----------------------------------------------------------------------------
    def watch(self, model: torch.nn.Module | None = None,
              optimizer: torch.optim.Optimizer | None = None) -> "Recorder":
        """Attach a model and/or optimizer (frameworks create them after the recorder)."""
        if model is not None:
            self._arm(False)
            self.model = env.unwrap(model)
            self._tracked = [(n, p) for n, p in self.model.named_parameters() if p.requires_grad]
            self._parameters = ParameterStats(self._tracked)
            self._leaves = []
            for path, module in self.model.named_modules():
                if next(module.children(), None) is None:
                    self._leaves.append(module)
                    self._module_names[id(module)] = (path or type(module).__name__,
                                                      type(module).__name__)
            self._arm(self._step % self.activation_every == 0)
        if optimizer is not None:
            self.optimizer = optimizer
            self._handles.append(optimizer.register_step_pre_hook(self._before_optimizer_step))
            self.writer.update_meta(optimizer=env.optimizer_summary(optimizer))
        if self.model is not None:
            self.writer.update_meta(model=env.model_summary(self.model, self.optimizer))
        return self

    def _arm(self, on: bool) -> None:
        """Hook the leaf modules' forward passes, or unhook them."""
        if on and not self._forward_handles:
            self._forward_handles = [m.register_forward_hook(self._forward_hook)
                                     for m in self._leaves]
        elif not on and self._forward_handles:
            for handle in self._forward_handles:
                handle.remove()
            self._forward_handles = []

    # -- hooks (training thread) ----------------------------------------------------------------
    def _records_tensors(self, step: int) -> bool:
        return step % self.every == 0

    def _before_optimizer_step(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        if self.writer.failed or self._parameters.taken or not self._records_tensors(self._step):
            return
        start = time.perf_counter()
        self._parameters.snapshot()
        self._cost += time.perf_counter() - start

    def _forward_hook(self, module: torch.nn.Module, args: Any, output: Any) -> None:
        if (self._step % self.activation_every or not module.training
                or id(module) in self._captured or self.writer.failed):
            return
        start = time.perf_counter()
        out = output[0] if isinstance(output, (tuple, list)) and output else output
        if isinstance(out, torch.Tensor) and out.is_floating_point() and out.numel():
            self._captured.add(id(module))
            name, mtype = self._module_names[id(module)]
            # activation_stats reads a detached view: no autograd work to switch off.
            self._activations.append((name, out.numel(), activation_stats(out, mtype)))
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
             metrics: Mapping[str, Any] | None = None, *,
             data_time: float | None = None) -> None:
        """Record one optimizer step. Call it once per step, after `optimizer.step()`.

        data_time: seconds this step waited for its batch, when the loop does not use
        `iterate()` (framework callbacks measure it themselves).
        """
        start = time.perf_counter()
        try:
            self._record_step(loss, inputs, metrics, data_time)
        finally:
            self._cost += time.perf_counter() - start

    def _record_step(self, loss: Any, inputs: Any, metrics: Mapping[str, Any] | None,
                     data_time: float | None) -> None:
        if data_time is not None:
            self._data_time = data_time
        step = self._step
        self._step += 1
        now = time.perf_counter()
        self._arm(self._step % self.activation_every == 0
                  and not (self.writer.failed or self.writer.closed))
        activations, self._activations = self._activations, []
        self._captured.clear()
        snapshot_taken, self._parameters.taken = self._parameters.taken, False
        if self.writer.failed or self.writer.closed:
            return
        scalars = _Scalars(step, TRAIN)
        if loss is not None:
            scalars.add(LOSS_NAME, loss)
        for key, value in (metrics or {}).items():
            scalars.add(str(key), value)
        if self.optimizer is not None:
            for i, group in enumerate(self.optimizer.param_groups):
                scalars.add(f"{LR_PREFIX}{i}", group.get("lr", math.nan))
        if self._last_step_end is not None:
            scalars.add(STEP_TIME, now - self._last_step_end)
        if self._data_time is not None:
            scalars.add(DATA_TIME, self._data_time)
            self._data_time = None
        self._last_step_end = now

        parts: list[torch.Tensor] = list(scalars.tensors)
        producers = [scalars.rows]
        with torch.no_grad():
            if self.model is not None and self._records_tensors(step):
                producers.append(self._parameters.producer(step, parts, snapshot_taken))
            if activations:
                producers.append(self._activation_rows(step, parts, activations))
            if inputs is not None and step % self.input_every == 0:
                producers.append(self._input_rows(step, TRAIN, inputs, parts))
        self._emit(parts, producers)

    def log(self, split: str, metrics: Mapping[str, Any] | None = None,
            inputs: Any = None) -> None:
        """Record another split (val, test, ...) at the current step."""
        if self.writer.failed or self.writer.closed:
            return
        step = max(self._step - 1, 0)
        scalars = _Scalars(step, str(split))
        for key, value in (metrics or {}).items():
            scalars.add(str(key), value)
        parts, producers = list(scalars.tensors), [scalars.rows]
        if inputs is not None:
            with torch.no_grad():
                producers.append(self._input_rows(step, str(split), inputs, parts))
        self._emit(parts, producers)

    def _emit(self, parts: list[torch.Tensor], producers: list) -> None:
        packed = Packed(parts) if parts else None

        def rows() -> list[tuple[str, dict]]:
            values = packed.resolve() if packed is not None else []
            out: list[tuple[str, dict]] = []
            for produce in producers:
                out.extend(produce(values))
            return out
        self.writer.write(rows)

    # -- row producers: the device work happens now, the host work later on the writer thread --
    def _generator(self, device: torch.device) -> torch.Generator:
        """The recorder's own random stream per device: sampling never moves the user's."""
        key = str(device)
        if key not in self._generators:
            self._generators[key] = torch.Generator(device=device).manual_seed(self.rank)
        return self._generators[key]

    def _activation_rows(self, step: int, parts: list[torch.Tensor], activations: list):
        names = [a[0] for a in activations]
        numel = np.array([a[1] for a in activations], dtype=np.int64)
        # Device statistics join the step's packed copy; CPU rows are finished already.
        on_device = [i for i, a in enumerate(activations) if isinstance(a[2], torch.Tensor)]
        at = len(parts)
        if on_device:
            device = activations[on_device[0]][2].device
            parts.append(torch.stack([activations[i][2].to(device) for i in on_device]))

        def rows(values: list[np.ndarray]) -> list[tuple[str, dict]]:
            raw = np.empty((len(activations), len(RAW) + len(EXTRA)))
            if on_device:
                raw[on_device] = values[at].reshape(len(on_device), -1)
            for i, a in enumerate(activations):
                if isinstance(a[2], np.ndarray):  # finished in the hook on the CPU
                    raw[i] = a[2]
            extra = raw[:, -2:]
            cols = finish(raw[:, :-2], numel)
            cols.update(step=np.full(len(names), step, dtype=np.int64),
                        kind=[ACTIVATION] * len(names), name=names,
                        dead_frac=extra[:, 0], saturated_frac=extra[:, 1])
            return [(TENSORS, cols)]
        return rows

    def _input_rows(self, step: int, split: str, inputs: Any, parts: list[torch.Tensor]):
        if _is_frame(inputs):
            profile, samples = frame_profile(inputs, self._frame_rng)
            return self._frame_rows(step, split, profile, samples)
        named = self._named_inputs(inputs)
        layout = []
        for prefix, x, names in named:
            if not isinstance(x, torch.Tensor) or x.numel() == 0:
                continue
            key = f"{split}:{prefix or 'input'}"
            if self._input_devices.get(key) != str(x.device):
                self._input_devices[key] = str(x.device)
                self.writer.update_meta(input_devices=dict(self._input_devices))
            # A host copy is profiled on the writer thread; else the device profile is packed.
            source: Any = self._host.clone(x) if kernel_loader.kernels() else None
            if source is None:
                source = len(parts)
                parts.extend(tensor_profile(x, self._generator(x.device)))
            n_feat, count = feature_shape(x.shape)
            layout.append((feature_names(prefix, n_feat, names, x.dim()), dtype_name(x), count,
                           source))
        reservoir = self._reservoir

        def rows(values: list[np.ndarray]) -> list[tuple[str, dict]]:
            out = []
            for feats, dtype, count, source in layout:
                if isinstance(source, int):
                    packed, sample = values[source], values[source + 1]
                else:
                    try:
                        packed, sample = array_profile(source.numpy(), self._writer_rng)
                    finally:
                        self._host.release(source)
                packed = packed.reshape(len(feats), len(PACKED))
                cols = {c: packed[:, i] for i, c in enumerate(PACKED)}
                for c in ("n_unique", "nan_count", "inf_count"):
                    cols[c] = cols[c].astype(np.int64)
                cols.update(step=np.full(len(feats), step, dtype=np.int64), split=[split] * len(
                    feats), feature=feats, dtype=[dtype] * len(feats),
                    count=np.full(len(feats), count, dtype=np.int64))
                out.append((INPUTS, cols))
                sample = sample.reshape(len(feats), -1)
                for f, vals in zip(feats, sample):
                    reservoir.add(split, f, step, vals[np.isfinite(vals)])
            out.append(("__samples__", reservoir.columns))
            return out
        return rows

    def _frame_rows(self, step: int, split: str, profile: list[dict], samples: dict):
        reservoir = self._reservoir

        def rows(values: list[np.ndarray]) -> list[tuple[str, dict]]:
            cols = {key: [row.get(key) for row in profile] for key in
                    ("feature", "dtype", "count", "mean", "std", "min", "max", "n_unique",
                     "int_frac", "nan_count", "inf_count", "resolution", "time_min",
                     "time_max")}
            cols.update(step=[step] * len(profile), split=[split] * len(profile))
            for feature, vals in samples.items():
                reservoir.add(split, feature, step, vals)
            return [(INPUTS, cols), ("__samples__", reservoir.columns)]
        return rows

    def _named_inputs(self, inputs: Any) -> list[tuple[str, Any, Sequence[str] | None]]:
        names = self.feature_names
        if isinstance(inputs, Mapping):
            per_key = names if isinstance(names, Mapping) else {}
            return [(str(k), v, per_key.get(k)) for k, v in inputs.items()]
        if isinstance(inputs, (tuple, list)):
            return [(f"input{i}", v, None) for i, v in enumerate(inputs)]
        return [("", inputs, names if not isinstance(names, Mapping) else None)]

    # -- ending ---------------------------------------------------------------------------------
    @property
    def cost(self) -> dict[str, float]:
        """What recording has cost so far: seconds on the training thread (hooks and `step`),
        the writer thread's CPU seconds, and the steps recorded."""
        return {"steps": self._step, "training_thread_s": round(self._cost, 6),
                "writer_cpu_s": round(self.writer.cpu_seconds, 6)}

    def close(self, status: Mapping[str, Any] | None = None) -> None:
        """Flush everything and mark the run completed (or with the given status)."""
        self._arm(False)
        for handle in self._handles:
            handle.remove()
        self._handles.clear()
        if not self.writer.closed:
            self.writer.close(status)
            self.writer.update_meta(recorder=dict(self._settings, cost=self.cost))

    def __enter__(self) -> "Recorder":
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        if exc_type is None:
            self.close()
        else:
            self.close({"state": "failed", "exception_type": exc_type.__name__,
                        "exception_message": str(exc),
                        "traceback": "".join(traceback.format_exception(exc_type, exc, tb)),
                        "step": max(self._step - 1, 0)})
        return False


class _Scalars:
    """One step's scalars: numbers and CPU tensors are read now, device tensors join the packed
    copy (reading one would sync the host)."""

    def __init__(self, step: int, split: str):
        self.step, self.split = step, split
        self.names: list[str] = []
        self.values: list[float] = []
        self.tensor_names: list[str] = []
        self.tensors: list[torch.Tensor] = []
        self.wall_time = time.time()

    def add(self, name: str, value: Any) -> None:
        if isinstance(value, torch.Tensor):
            if value.numel() != 1:
                value = value.detach().float().mean()
            if value.device.type == "cpu":  # reading it costs nothing, packing it would
                self.names.append(name)
                self.values.append(float(value.detach()))
                return
            self.tensor_names.append(name)
            self.tensors.append(value.detach().reshape(1))
        elif isinstance(value, Number) or isinstance(value, np.number):
            self.names.append(name)
            self.values.append(float(value))

    def rows(self, values: list[np.ndarray]) -> list[tuple[str, dict]]:
        tensor_values = [float(v[0]) for v in values[:len(self.tensors)]]
        names = self.names + self.tensor_names
        if not names:
            return []
        n = len(names)
        return [(SCALARS, {"step": np.full(n, self.step, dtype=np.int64),
                           "split": [self.split] * n, "name": names,
                           "value": np.array(self.values + tensor_values, dtype=np.float64),
                           "wall_time": np.full(n, self.wall_time)})]


def _is_frame(obj: Any) -> bool:
    return type(obj).__name__ == "DataFrame" and hasattr(obj, "dtypes")
