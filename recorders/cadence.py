"""Cadences under a cost budget: the grad statistics' (a Recorder's `every=None`, its
default) and the input profile's (`input_every=None`, its default).

The grad statistics read every grad once per recorded step. On most models that read is a
small part of a step, and they are recorded on every step. Where the parameters are many and
the step's compute small (a wide MLP at a small batch on a CPU), the read alone takes several
per cent of the step: there the cadence is stretched, by doubling, until their measured cost
is within BUDGET of the training time, and shrunk again by halving when it falls well below.
The input profile (every 10th step) is stretched the same way, to every 20th, 40th or 80th
step, where a wide batch's profile costs more than INPUT_BUDGET (a tabular batch of
thousands of features on a fast step).

    cadence = GradCadence()
    every = cadence.every            # 1 at first
    cadence.observe(step, step_seconds, stats_seconds)   # after each step
    cadence.changes                  # [(from_step, every), ...]

It decides every WINDOW steps from AUTO_FROM on (both multiples of MAX_EVERY, so that
the step a new cadence starts at is one it records), on what the last window measured: the
seconds the training thread spent in the parameter statistics against the wall time of the
steps. A record is counted at the window's median: one that waited (for the interpreter the
writer thread held, for a core) does not stretch the cadence. A recorded step that costs less
than MIN_COST_S never stretches anything (a small model on a slow machine stays at every step,
whatever its share). A distributed run keeps every step: its ranks would decide apart, and
the rank comparisons read the same steps of every rank. The input cadence decides every
INPUT_WINDOW steps from the same step on, so that a run shorter than that keeps every 10th
step; its cost is the profile's on the training thread and on the writer thread.
"""
from __future__ import annotations

import statistics

# Of the training time, for the grad (and weight) statistics. The defaults' other costs (the
# weights, activations and inputs of every 10th step, the per-step checks) take about 7 % of a
# 10 ms compiled step on a fast machine (BENCHMARKS.md); 2 % left the defaults on their 10 %.
BUDGET = 0.015
AUTO_FROM = 256  # every step until then: a run's start is where gradients go wrong most
WINDOW = 128  # a multiple of MAX_EVERY: a cadence takes effect on a step it records
MAX_EVERY = 8
OUTLIER = 4.0
MIN_COST_S = 2.5e-4  # a recorded step's statistics below this never stretch the cadence
# The input profile: context for the rules on inputs, read at a tenth of the steps at most.
INPUT_BUDGET = 0.01
INPUT_EVERY = 10
INPUT_WINDOW = 640  # a multiple of 8 * INPUT_EVERY, the longest input cadence


class GradCadence:
    """The grad statistics' cadence: 1, 2, 4 or 8 (meta.json's `every`, `grad_every`)."""

    base, auto_from, window, max_every = 1, AUTO_FROM, WINDOW, MAX_EVERY
    keys = ("every", "grad_budget", "grad_every")

    def __init__(self, budget: float = BUDGET):
        self.budget = budget
        self.every = self.base
        self.changes: list[tuple[int, int]] = [(0, self.base)]
        self._window: list[tuple[float, float, bool]] = []  # (wall, cost, recorded) a step

    def observe(self, step: int, wall_s: float | None, cost_s: float, recorded: bool) -> bool:
        """Account step `step` (its wall time, when known, and the statistics' seconds on
        the training thread, `recorded` when it recorded grads); whether the cadence changed
        from the next step on."""
        if step < self.auto_from - self.window:  # the first decision reads the window before it
            return False
        if wall_s is not None and wall_s > 0:
            self._window.append((wall_s, cost_s, recorded))
        if step + 1 < self.auto_from or (step + 1) % self.window:
            return False
        window, self._window = self._window, []
        if not window:
            return False
        # A step that waited for something else (an evaluation, a checkpoint) is no measure
        # of a training step: steps above OUTLIER times the median are left out.
        typical = statistics.median(w for w, _, _ in window) * OUTLIER
        kept = [(w, c, r) for w, c, r in window if w <= typical]
        wall = sum(w for w, _, _ in kept)
        costs = [c for _, c, r in kept if r]
        if wall <= 0 or not costs:
            return False
        # The typical record, not the mean: a record that waited (for the writer thread's
        # hold on the interpreter, for a core) is not what the statistics cost.
        per_record = statistics.median(costs)
        share = per_record * len(costs) / wall
        every = self.every
        if share > self.budget and per_record >= MIN_COST_S and every < self.max_every:
            every *= 2
        elif share < self.budget / 4 and every > self.base:  # at half the reads it still fits
            every //= 2
        if every == self.every:
            return False
        self.every = every
        self.changes.append((step + 1, every))
        return True

    def settings(self) -> dict:
        """What meta.json's `recorder` says of it."""
        every, budget, changes = self.keys
        return {every: "auto", budget: self.budget,
                changes: [[start, every] for start, every in self.changes]}


class InputCadence(GradCadence):
    """The input profile's cadence: 10, 20, 40 or 80 (meta.json's `input_every`,
    `input_cadence`)."""

    base, auto_from, window, max_every = INPUT_EVERY, INPUT_WINDOW, INPUT_WINDOW, 8 * INPUT_EVERY
    keys = ("input_every", "input_budget", "input_cadence")

    def __init__(self, budget: float = INPUT_BUDGET):
        super().__init__(budget)
