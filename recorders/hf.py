"""TracelabCallback for Hugging Face transformers' Trainer: records `Trainer.train()`.

    from tracelab.recorders.hf import TracelabCallback

    trainer = Trainer(model=model, args=args, train_dataset=ds, eval_dataset=ev,
                      callbacks=[TracelabCallback("runs/exp1")])

Per optimizer step (after clipping, before the gradients are zeroed): the loss the model
returned (over the step's micro-batches), lr, weight/grad/update statistics, activations and
the batch the model received (`input_ids`, `attention_mask`, `labels`, ...; integer tensors
such as token ids are profiled as one feature each) at the Recorder's cadences. After each
evaluation: the `eval_` metrics as the "val" split, with the first evaluation batch's profile
and, in a recording step's window, its activations.

What enters the loss (`Recorder.step(outputs=..., targets=...)`): the `logits` of the model's
output and the `labels` it was called with, on the steps that profile inputs, from the last
micro-batch of a step and the first evaluation batch. A callback sees no more than the model's
call: a loss that the Trainer computes itself from other outputs (`compute_loss_func`, a
`compute_loss` override) still reads them from the logits the model returned.
Each process writes its own rank's shard. An exception that ends the script marks the run
failed. Needs the `hf` extra.
"""
from __future__ import annotations

import sys
from typing import Any, Mapping

try:
    from transformers import TrainerCallback
except ModuleNotFoundError:
    raise ModuleNotFoundError("tracelab.recorders.hf needs transformers; install it with "
                              "pip install 'tracelab[hf]'") from None
import torch

from tracelab.recorders._callbacks import Guard, guarded, loss_value, metrics_for
from tracelab.recorders.compiled import outside_compile
from tracelab.recorders.torch_recorder import Recorder

# TrainingArguments worth keeping with the run (the full set has over a hundred fields).
ARGS_KEPT = ("learning_rate", "per_device_train_batch_size", "gradient_accumulation_steps",
             "num_train_epochs", "max_steps", "weight_decay", "adam_beta1", "adam_beta2",
             "adam_epsilon", "max_grad_norm", "lr_scheduler_type", "warmup_ratio",
             "warmup_steps", "optim", "seed", "data_seed", "fp16", "bf16", "tf32",
             "world_size")


# Arguments the Trainer passes to the model that are bookkeeping, not data.
NOT_INPUTS = ("num_items_in_batch",)


def batch_inputs(kwargs: Mapping[str, Any]) -> dict[str, torch.Tensor]:
    """The tensors a model was called with; integer ones (token ids, masks) as one feature."""
    out = {}
    for key, value in kwargs.items():
        if key in NOT_INPUTS or not isinstance(value, torch.Tensor) or value.numel() == 0:
            continue
        if not value.is_floating_point() and value.dim() >= 2:
            value = value.reshape(-1, 1)
        out[key] = value
    return out


def model_logits(output: Any) -> torch.Tensor | None:
    """The logits of a model's output (a ModelOutput, a dict or a tuple whose second element
    follows the loss), detached, as rows of classes; None when it has none. Token-level logits
    (batch, sequence, vocabulary) are read by transformers' losses as `(-1, vocabulary)` rows:
    so they are given, a view without a copy, with the class dimension that the outputs' row
    facts read (dim 1)."""
    if isinstance(output, Mapping):
        logits = output.get("logits")
    elif isinstance(output, (tuple, list)) and output:
        loss_first = isinstance(output[0], torch.Tensor) and output[0].dim() == 0
        logits = output[1] if loss_first and len(output) > 1 else output[0]
    else:
        logits = output
    if not isinstance(logits, torch.Tensor) or not logits.dim() or not logits.numel():
        return None  # none, or a loss alone
    return (logits.flatten(0, -2) if logits.dim() > 2 else logits).detach()


def batch_labels(kwargs: Mapping[str, Any] | None) -> torch.Tensor | None:
    """The labels a model was called with (the Trainer passes them as `labels`), or None."""
    labels = (kwargs or {}).get("labels")
    return labels if isinstance(labels, torch.Tensor) and labels.numel() else None


class TracelabCallback(Guard, TrainerCallback):
    """Record a Trainer run into `run_dir`.

    config: hyperparameters to store besides the main TrainingArguments.
    recorder_options: passed to Recorder (every, activation_every, input_every, feature_names,
    sample_size, flush_interval).
    """

    framework = "transformers Trainer"

    def __init__(self, run_dir: str, *, config: Mapping[str, Any] | None = None,
                 **recorder_options: Any):
        Guard.__init__(self)
        self.run_dir = run_dir
        self.config = dict(config or {})
        self.options = recorder_options
        self._handles: list[Any] = []
        self._summed = False
        self._train_batch: Any = None
        self._eval_batch: Any = None
        self._train_logits: torch.Tensor | None = None  # on steps that profile inputs
        self._eval_logits: torch.Tensor | None = None
        self._excepthook = None

    @guarded
    def on_train_begin(self, args, state, control, model=None, optimizer=None, **kwargs):
        if self.recorder is not None or model is None:
            return
        kept = {k: v for k, v in args.to_dict().items() if k in ARGS_KEPT}
        self.recorder = Recorder(self.run_dir, config={**kept, **self.config},
                                 rank=args.process_index,
                                 **{"scheduler": kwargs.get("lr_scheduler"), **self.options})
        # accelerate wraps the torch optimizer; the Recorder hooks the one that steps. Under
        # fp16 the wrapper holds the GradScaler that decides whether the step runs.
        inner = getattr(optimizer, "optimizer", optimizer)
        scaler = getattr(optimizer, "scaler", None)
        self.recorder.watch(model, inner if isinstance(inner, torch.optim.Optimizer) else None,
                            scaler=scaler if isinstance(scaler, torch.amp.GradScaler) else None)
        # Outside the graph when the Trainer compiles the model (torch_compile=True).
        self._handles = [model.register_forward_pre_hook(outside_compile(self._before_forward),
                                                         with_kwargs=True),
                         model.register_forward_hook(outside_compile(self._after_forward))]
        # The Trainer has no exception hook: mark the run failed if an exception ends the script.
        self._excepthook, sys.excepthook = sys.excepthook, self._on_uncaught

    # Forward hooks run inside the model's call: guarded like every hook, they never raise.
    @guarded
    def _before_forward(self, module, args, kwargs) -> None:
        if self.recorder is None:
            return
        if module.training:
            self._mark_data_ready()
            self._summed = "num_items_in_batch" in kwargs
            self._train_batch = kwargs  # every step: its sentinel; profiled at input_every
        else:
            self._last_step_end = None  # evaluation time is not the data loader's
            if self._eval_batch is None:
                self._eval_batch = kwargs

    @guarded
    def _after_forward(self, module, args, output) -> None:
        if self.recorder is None:
            return
        if not module.training:
            if self._eval_logits is None:  # the first evaluation batch's
                self._eval_logits = model_logits(output)
            return
        if self.recorder.records_inputs:  # the last micro-batch's, as its batch is
            self._train_logits = model_logits(output)
        loss = loss_value(output)
        if isinstance(loss, torch.Tensor) and loss.numel() == 1:
            # A model given num_items_in_batch already divides by the whole step's token count.
            self.recorder.accumulate_loss(loss, summed=self._summed)

    @guarded
    def on_optimizer_step(self, args, state, control, **kwargs):
        if self.recorder is None:
            return
        batch, self._train_batch = self._train_batch, None
        logits, self._train_logits = self._train_logits, None
        # The step's loss: that of its micro-batches (accumulate_loss).
        self.recorder.step(inputs=batch_inputs(batch) if batch else None,
                           targets=batch_labels(batch), outputs=logits,
                           data_time=self._take_data_time())
        self._mark_step_end()

    @guarded
    def on_evaluate(self, args, state, control, metrics=None, **kwargs):
        batch, self._eval_batch = self._eval_batch, None
        logits, self._eval_logits = self._eval_logits, None
        if self.recorder is None or not metrics:
            return
        self.recorder.log("val", metrics=metrics_for(metrics, "val", unprefixed=False),
                          inputs=batch_inputs(batch) if batch else None,
                          targets=batch_labels(batch), outputs=logits)

    @guarded
    def on_train_end(self, args, state, control, **kwargs):
        self._detach()
        self._close()

    def _stop(self, exc: BaseException) -> None:
        self._detach()
        super()._stop(exc)

    def _detach(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles = []
        if self._excepthook is not None and sys.excepthook == self._on_uncaught:
            sys.excepthook = self._excepthook
        self._excepthook = None

    def _on_uncaught(self, exc_type, exc, tb) -> None:
        previous = self._excepthook or sys.__excepthook__
        try:
            self._detach()
            self._close(exc.with_traceback(tb) if exc is not None else exc_type())
        except Exception:
            pass
        previous(exc_type, exc, tb)
