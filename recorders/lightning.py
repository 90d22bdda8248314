"""TracelabCallback for PyTorch Lightning: records `Trainer.fit()` as the Recorder would.

    import lightning as L
    from tracelab.recorders.lightning import TracelabCallback

    trainer = L.Trainer(callbacks=[TracelabCallback("runs/exp1")])
    trainer.fit(model, train_loader, val_loader)

Per optimizer step: the training step's loss, the logged metrics named with a `train_` prefix
or with none (stored without it), lr, weight/grad/update statistics, activations and the input batch
at the Recorder's cadences. After each validation: the metrics with a `val_` (or `valid_`,
`validation_`) prefix, as the "val" split, and the first validation batch's profile. Each rank of
a multi-process run writes its own shard. Needs the `lightning` extra.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Callable, Sequence

try:
    import lightning.pytorch as pl
except ModuleNotFoundError:  # the standalone package of the same framework
    try:
        import pytorch_lightning as pl  # type: ignore[no-redef]
    except ModuleNotFoundError:
        raise ModuleNotFoundError(
            "tracelab.recorders.lightning needs PyTorch Lightning; install it with "
            "pip install 'tracelab[lightning]'") from None
import torch

from tracelab.recorders._callbacks import Guard, guarded, loss_value, metrics_for
from tracelab.recorders.torch_recorder import Recorder
from tracelab.core.schema import TRAIN


def first_tensor(batch: Any) -> Any:
    """The inputs of a batch: `x` of `(x, y, ...)`, a dict or a tensor as it is."""
    if isinstance(batch, (tuple, list)) and batch:
        return batch[0]
    return batch if isinstance(batch, (torch.Tensor, Mapping)) else None


_LABEL_KEYS = ("labels", "label", "targets", "target", "y")


def second_tensor(batch: Any) -> Any:
    """The targets of a batch: `y` of `(x, y, ...)`, or a dict's labels/label/targets/target/y."""
    if isinstance(batch, (tuple, list)) and len(batch) >= 2:
        return batch[1] if isinstance(batch[1], torch.Tensor) else None
    if isinstance(batch, Mapping):
        return next((batch[k] for k in _LABEL_KEYS if isinstance(batch.get(k), torch.Tensor)),
                    None)
    return None


_OUTPUT_KEYS = ("logits", "outputs", "preds")


def returned_outputs(returned: Any) -> Any:
    """What the loss read, when a training_step or validation_step returned it in its dict
    (under logits, outputs or preds); else None: Lightning keeps no model output itself."""
    if isinstance(returned, Mapping):
        return next((returned[k] for k in _OUTPUT_KEYS
                     if isinstance(returned.get(k), torch.Tensor)), None)
    return None


class TracelabCallback(Guard, pl.Callback):
    """Record a Lightning run into `run_dir`.

    config: hyperparameters to store besides the module's `hparams`.
    inputs: the batch → what to profile as inputs (default: `x` of an `(x, y)` batch, a dict
    or a tensor as it is; None from it skips the batch).
    targets: the batch → its labels (default: `y` of an `(x, y)` batch, or a dict's labels).
    A training_step or validation_step that returns a dict with `logits` (or `outputs`,
    `preds`) beside its loss has them recorded as what the loss read (`Recorder.step(outputs=)`).
    recorder_options: passed to Recorder (every, activation_every, input_every, feature_names,
    sample_size, flush_interval).
    """

    framework = "Lightning"

    def __init__(self, run_dir: str, *, config: Mapping[str, Any] | None = None,
                 inputs: Callable[[Any], Any] = first_tensor,
                 targets: Callable[[Any], Any] = second_tensor, **recorder_options: Any):
        Guard.__init__(self)
        self.run_dir = run_dir
        self.config = dict(config or {})
        self.inputs, self.targets = inputs, targets
        self.options = recorder_options
        self._steps_seen = 0
        self._val_batch: Any = None

    @guarded
    def on_fit_start(self, trainer: "pl.Trainer", pl_module: "pl.LightningModule") -> None:
        hparams = {str(k): v for k, v in dict(getattr(pl_module, "hparams", {}) or {}).items()}
        schedulers = [c.scheduler for c in getattr(trainer, "lr_scheduler_configs", None) or ()]
        self.recorder = Recorder(self.run_dir, config={**hparams, **self.config},
                                 rank=trainer.global_rank,
                                 **{"scheduler": schedulers or None, **self.options})
        # Several optimizers (GANs): each one's lr, param groups and grads as it used them.
        optimizers: Sequence[Any] = trainer.optimizers
        scaler = getattr(getattr(trainer, "precision_plugin", None), "scaler", None)
        self.recorder.watch(pl_module, list(optimizers) or None, scaler=scaler)
        self._steps_seen = trainer.global_step

    @guarded
    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        self._mark_data_ready()

    @guarded
    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if self.recorder is None:
            return
        loss = loss_value(outputs)
        if isinstance(loss, torch.Tensor):
            # Automatic optimization hands over the loss divided for gradient accumulation.
            scale = trainer.accumulate_grad_batches if pl_module.automatic_optimization else 1
            self.recorder.accumulate_loss(loss, scale=scale)
        # Accumulating gradients: record once the optimizer has stepped.
        if trainer.global_step == self._steps_seen:
            self._mark_step_end()
            return
        self._steps_seen = trainer.global_step
        metrics = metrics_for(trainer.callback_metrics, TRAIN, unprefixed=True)
        metrics.pop("loss", None)  # the step's own loss is recorded as such
        # The step's loss: the mean of its micro-batches' (accumulate_loss).
        self.recorder.step(inputs=self.inputs(batch), targets=self.targets(batch),
                           outputs=returned_outputs(outputs), metrics=metrics,
                           data_time=self._take_data_time())
        self._mark_step_end()

    @guarded
    def on_validation_start(self, trainer, pl_module) -> None:
        self._last_step_end = None  # validation time is not the data loader's

    @guarded
    def on_validation_batch_end(self, trainer, pl_module, outputs, batch, batch_idx,
                                dataloader_idx=0) -> None:
        if self._val_batch is None and not trainer.sanity_checking:
            self._val_batch = (self.inputs(batch), self.targets(batch),
                               returned_outputs(outputs))

    @guarded
    def on_validation_end(self, trainer, pl_module) -> None:
        if self.recorder is None or trainer.sanity_checking:
            return
        (batch, labels, outputs), self._val_batch = self._val_batch or (None, None, None), None
        self.recorder.log("val", metrics=metrics_for(trainer.callback_metrics, "val",
                                                     unprefixed=False), inputs=batch,
                          targets=labels, outputs=outputs)

    @guarded
    def on_fit_end(self, trainer, pl_module) -> None:
        self._close()

    def on_exception(self, trainer, pl_module, exception: BaseException) -> None:
        try:
            self._close(exception)
        except Exception:  # the user's exception is the one to see
            pass
