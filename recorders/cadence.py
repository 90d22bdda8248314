"""Which steps record what: a cadence fixed in advance, a pure function of the settings.

The recorder never changes it by itself, so the same script records the same steps on any
machine, under any load. meta.json's `recorder` holds the settings, and the user may set each
one (`Recorder(every=..., ...)`):

    grad_norm_every   per-layer grad norms (one fused `_foreach_norm`)          every step
    every             the grads' full statistics (mean, std, range, zeros, ...)  every 10th
    weight_every      weight and update statistics (a pre-step copy for these)   every 25th
    activation_every  activation statistics (forward hooks on leaf modules)      every 25th
    input_every       the input and target profiles of `step(inputs=...)`        every 25th
    dense_steps       the first steps record full grad, weight and update stats  20

The defaults were chosen by measurement (benchmarks/recorder_overhead.py, BENCHMARKS.md): a
grad's norm is one fused reduction that every step can afford, and the rules that watch
gradients every step (exploding and vanishing gradients, loss spikes) read the norm only. The
grads' full statistics are a few more passes over the same memory: every 10th step. Weights and
updates need a copy of every weight before the optimizer step and two passes after it;
activations read the largest tensors of a CNN, and on a compiled model their step runs
uncompiled (compiled.py); an input profile is a few dozen small ops: these three every 25th
step, where each changes slowly. A run's start is where gradients go wrong most, and where the
learning-rate diagnosis reads its early update ratios: its first `dense_steps` steps record the
full statistics of the grads, weights and updates on every step.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

DENSE_STEPS = 20
DEFAULT_EVERY = 10  # the grads' full statistics
SPARSE_EVERY = 25  # weights and updates, activations, input profiles


def due(step: int, every: int) -> bool:
    """Whether step `step` (counted from 0) records what is recorded every `every` steps."""
    return step % every == 0


@dataclass(frozen=True)
class Cadence:
    """The recorder's settings of which steps record what (see the module docstring)."""

    grad_norm_every: int = 1
    every: int = DEFAULT_EVERY
    weight_every: int = SPARSE_EVERY
    activation_every: int = SPARSE_EVERY
    input_every: int = SPARSE_EVERY
    dense_steps: int = DENSE_STEPS

    def __post_init__(self) -> None:
        for name, value in asdict(self).items():
            least = 0 if name == "dense_steps" else 1
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                kind = "a non-negative" if least == 0 else "a positive"
                raise ValueError(f"Recorder: {name} must be {kind} integer, got {value!r}")

    def grads(self, step: int) -> bool:
        """Whether `step` records the grads' full statistics."""
        return step < self.dense_steps or due(step, self.every)

    def grad_norms(self, step: int) -> bool:
        """Whether `step` records the grads' norms only (a step of full statistics has them)."""
        return not self.grads(step) and due(step, self.grad_norm_every)

    def weights(self, step: int) -> bool:
        """Whether `step` records weight and update statistics."""
        return step < self.dense_steps or due(step, self.weight_every)

    def activations(self, step: int) -> bool:
        return due(step, self.activation_every)

    def inputs(self, step: int) -> bool:
        """Whether `step` profiles the inputs and targets given to `step()` (`log()` always
        does; every step checks its batches' range and NaN/Inf, the sentinel)."""
        return due(step, self.input_every)

    def settings(self) -> dict[str, int]:
        """What meta.json's `recorder` says of it."""
        return asdict(self)
