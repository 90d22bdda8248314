"""amp-overflow: the mixed-precision loss scale collapses, or many steps are skipped.

What it detects
    With a `torch.amp.GradScaler` attached to the Recorder (passed in, or found by the
    Lightning callback), its scale is recorded after every step, and whether the optimizer
    step ran: the scaler skips it (and halves the scale) whenever the scaled gradients hold Inf
    or NaN; without a watched optimizer a drop of the scale marks a skipped step. The rule
    fires when at least `max_skip_share` of the steps (and `min_skipped` of them) were
    skipped, or when the scale fell to `collapse` or below: no scaling is left, and the values
    overflow even unscaled.

Why it matters
    A skipped step trains nothing. A scaler that keeps skipping hides a numerical problem (an
    overflowing activation, a loss computed in float16, a learning rate too high); the run goes
    on, the loss stalls, and nothing raises. A scale down to 1 has nothing left to give.

Example
    The GradScaler skipped 118 of 120 steps (98%); its scale fell from 65536 to 3.4e-28.

How to fix
    Find the overflowing values: keep the loss, softmax and norms in float32 (autocast does so
    for most ops), look for Inf in the inputs or the activations (nonfinite-values names the
    first), lower the learning rate, and clip gradients after `scaler.unscale_(optimizer)`.
    Or train in bfloat16, which needs no loss scaling.

False positives
    A healthy scaler skips a few steps at the start while it finds its level, and one step
    every `growth_interval` (2000) steps when it tries a higher scale: far below
    `max_skip_share`. Runs shorter than `min_steps` are not judged.
"""
from __future__ import annotations

import numpy as np

from tracelab.analyzers._dynamics import OUTCOME, fmt
from tracelab.core import causes
from tracelab.core.causes import explains
from tracelab.core.findings import ERROR, WARNING, Finding
from tracelab.core.rules import Plot, rule
from tracelab.core.run import Run
from tracelab.core.schema import AMP_SCALE, AMP_SKIPPED, Needs


@rule(name="amp-overflow", code="TL605", requires=(Needs.AMP,), plot=Plot.NONE,
      links=(explains("nonfinite-values", "loss-spike", "exploding-gradients", "update-ratio",
                      "frozen-parameters", *OUTCOME,
                      why="a loss scale too large for float16 overflows the gradients, and "
                          "their steps are skipped",
                      timing="overlap", when=causes.not_input),))
def amp_overflow(run: Run, *, max_skip_share: float = 0.1, min_skipped: int = 5,
                 collapse: float = 1.0, min_steps: int = 20) -> list[Finding]:
    scale = run.signal(AMP_SCALE)
    values = scale.to_numpy(dtype=float)
    if len(values) < min_steps:
        return []
    flags = run.signal(AMP_SKIPPED).reindex(scale.index).to_numpy(dtype=float)
    if np.isfinite(flags).all():
        dropped = np.flatnonzero(flags[1:] > 0) + 1  # after the first: the scaler's first guess
    else:
        dropped = np.flatnonzero(values[1:] < values[:-1]) + 1
    skipped, share = len(dropped), len(dropped) / (len(values) - 1)
    low = float(np.nanmin(values))
    collapsed = low <= collapse
    if not collapsed and (skipped < min_skipped or share < max_skip_share):
        return []
    steps = scale.index.to_numpy()
    first = int(steps[dropped[0]]) if skipped else int(steps[int(np.nanargmin(values))])
    end = (f"; its scale fell from {fmt(values[0])} to {fmt(low)}: no scaling is left, so the "
           "values overflow even unscaled" if collapsed else
           f"; its scale went from {fmt(values[0])} to {fmt(values[-1])}")
    return [amp_overflow.finding(
        ERROR if collapsed else WARNING, "GradScaler", (first, int(steps[-1])),
        f"The GradScaler skipped {skipped} of {len(values) - 1} steps ({share:.0%}) for "
        f"Inf/NaN gradients{end}.",
        {"skipped_steps": skipped, "skip_share": share, "first_scale": float(values[0]),
         "lowest_scale": low, "last_scale": float(values[-1])},
        "Find the overflowing values (keep the loss, softmax and norms in float32; check the "
        "inputs and activations for Inf), lower the learning rate, clip gradients after "
        "scaler.unscale_(optimizer), or train in bfloat16.")]
