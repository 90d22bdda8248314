"""input-pipeline-bound: the training loop spends most of its time waiting for data.

What it detects
    With batches drawn through ``Recorder.iterate(loader)``, each step records ``data_time``,
    the wait for the next batch, and ``step_time``, the wall time from the end of one recorded
    step to the end of the next (the wait included). The rule compares their totals over the
    run, leaving out the first `skip_steps` steps (worker start-up), and fires when the wait is
    at least `share` of the time and adds up to at least `min_wait_s` seconds.

Why it matters
    An input-bound run leaves the accelerator idle: a faster GPU, a larger model or mixed
    precision would not make it any faster. The fix is in the data loader, and often cheap.

Example
    ``Waiting for input batches took 72% of the training time (41 s of 57 s over 480 steps;
    median wait 85 ms per step, median step 118 ms).``

How to fix
    Load in parallel and ahead: ``DataLoader(num_workers=4..16, pin_memory=True,
    persistent_workers=True, prefetch_factor=4)``; move decoding and augmentation off the
    training process, cache decoded data, or pre-process once into a fast format.

False positives
    Tiny models whose steps take microseconds may be dominated by batching overhead that does
    not matter; `min_wait_s` keeps those quiet. Time spent in validation between two training
    steps counts as step time, which can only hide a finding, never create one.
"""
from __future__ import annotations

import numpy as np

from tracelab.analyzers._inputs import fmt
from tracelab.core.findings import WARNING, Finding
from tracelab.core.rules import Plot, rule
from tracelab.core.run import Run
from tracelab.core.schema import DATA_TIME, STEP_TIME, Needs


@rule(name="input-pipeline-bound", code="TL403", requires=(Needs.DATA_TIMING,), plot=Plot.STEP_TIME)
def input_pipeline_bound(run: Run, *, share: float = 0.5, min_wait_s: float = 1.0,
                         skip_steps: int = 2, min_steps: int = 10) -> list[Finding]:
    data, step = run.scalar(DATA_TIME), run.scalar(STEP_TIME)
    both = data.index.intersection(step.index)
    both = both[both >= both.min() + skip_steps] if len(both) else both
    if len(both) < min_steps:
        return []
    wait, total = data.loc[both].to_numpy(float), step.loc[both].to_numpy(float)
    ok = np.isfinite(wait) & np.isfinite(total) & (total > 0)
    wait, total = np.minimum(wait[ok], total[ok]), total[ok]
    if len(total) < min_steps or total.sum() <= 0:
        return []
    frac = wait.sum() / total.sum()
    if frac < share or wait.sum() < min_wait_s:
        return []
    return [input_pipeline_bound.finding(
        WARNING, "data loader", (int(both[0]), int(both[-1])),
        f"Waiting for input batches took {frac:.0%} of the training time ({fmt(wait.sum())} s "
        f"of {fmt(total.sum())} s over {len(total)} steps; median wait "
        f"{fmt(1000 * np.median(wait))} ms per step, median step {fmt(1000 * np.median(total))} "
        "ms): the model waits for data.",
        {"data_share": frac, "wait_s": wait.sum(), "step_s": total.sum(), "steps": len(total),
         "median_wait_ms": 1000 * np.median(wait), "median_step_ms": 1000 * np.median(total)},
        "Load batches in parallel and ahead: DataLoader(num_workers=4 or more, pin_memory=True, "
        "persistent_workers=True, prefetch_factor=4); move decoding and augmentation out of the "
        "training process or cache the pre-processed data.")]
