"""wrong-batch-axis: a recurrent layer read the batch as the sequence (batch_first mismatch).

What it detects
    RNN, LSTM and GRU layers read a 3-D input as (sequence, batch, features), or as (batch,
    sequence, features) with `batch_first=True` (meta.json's module config). The recorder
    keeps each module's input shapes on the first step that records activations. The batch
    size comes from the recorded facts: config batch_size, the rows of 2-D train inputs when
    most steps hold the same, largest number, and the length of 1-D targets (one label per
    sample; flattened per-token targets give another number). The rule fires when, on every
    recorded call, a batch size sits on the axis the layer reads as the sequence and not on
    the one it reads as the batch, and that batch size is given by two facts, or by the only
    fact recorded (config or targets).

Why it matters
    The layer then runs its recurrence across the samples of the batch: each sample's
    output depends on the samples before it in the batch, and the real time steps are
    treated as independent sequences. The model trains on mixed-up data, cannot learn the
    temporal pattern, and evaluates differently with another batch size or order.

Example
    LSTM 'lstm' (batch_first=False) read inputs of shape [64, 28, 28] while the batch held 64
    samples: it ran over the batch as if it were 64 time steps of 28 sequences.

How to fix
    Pass `batch_first=True` to the layer when the data is (batch, sequence, features), or
    permute the input to (sequence, batch, features) (`x.transpose(0, 1)`) and read the last
    time step as `out[-1]` accordingly.

False positives
    Only fires when the batch size is known as above. The inputs' rows alone name no batch:
    a (batch, sequence) and a (sequence, batch) table of fixed sizes look alike. Equal batch
    and sequence lengths, packed sequences and layers that are not leaves (Transformer
    layers) are not judged.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from tracelab.analyzers._batches import input_shapes
from tracelab.analyzers._dynamics import OUTCOME
from tracelab.analyzers._loss_contracts import output_shapes
from tracelab.core.causes import explains
from tracelab.core.findings import ERROR, Finding
from tracelab.core.rules import Plot, rule
from tracelab.core.run import Run
from tracelab.core.schema import META_MODULE_SHAPES, TRAIN, Needs


ROWS = "the inputs' rows"


def _int(value: object) -> int | None:
    return int(value) if isinstance(value, (int, np.integer)) and not isinstance(value, bool) \
        and value > 0 else None


def _train_inputs(run: Run) -> pd.DataFrame:
    """Per recorded train step of 2-D inputs (features named feature[i]), their rows (first
    dim) and columns; inputs of more dims are profiled per channel and give no rows."""
    inputs = run.inputs
    if not len(inputs) or not {"step", "split", "feature", "count"} <= set(inputs.columns):
        return pd.DataFrame(columns=["rows", "columns"])
    table = inputs[(inputs["split"] == TRAIN)
                   & inputs["feature"].astype(str).str.fullmatch(r"feature\[\d+\]")]
    return table.groupby("step").agg(rows=("count", "max"), columns=("feature", "nunique"))


def _batch_facts(run: Run, steps: pd.DataFrame) -> dict[str, int]:
    """The batch sizes the recorded facts give: config batch_size, the train inputs' rows
    when most steps hold the same, largest number (an epoch's smaller last batch aside), and
    the loss's rows: the length of 1-D targets (one label per sample, or a flattened
    sequence of labels per sample)."""
    facts = {}
    config = run.meta.get("config")
    if isinstance(config, dict) and _int(config.get("batch_size")):
        facts["config batch_size"] = int(config["batch_size"])
    rows = steps["rows"].dropna().astype(int) if len(steps) else pd.Series(dtype=int)
    if len(rows) >= 2 and (rows == rows.max()).mean() > 0.5:
        facts[ROWS] = int(rows.max())
    target = output_shapes(run).get("targets_shape")
    if isinstance(target, list) and len(target) == 1 and _int(target[0]):
        facts["1-D targets"] = int(target[0])
    elif len(run.targets) and {"split", "feature", "step", "count"} <= set(run.targets.columns):
        tg = run.targets
        rows = tg[(tg["split"] == TRAIN) & (tg["feature"] == "target")].sort_values("step")
        if len(rows) and _int(int(rows["count"].iloc[0])):
            facts["1-D targets"] = int(rows["count"].iloc[0])
    return facts


def _reads_batch_as_time(inputs: list[list[int]], batch_axis: int, seq_axis: int, batch: int,
                         facts: dict[str, int]) -> bool:
    """Whether every call put `batch` on the sequence axis and another size on the batch
    axis, with `batch` known well enough that this is no sequence length equal to a batch
    size by chance: two recorded facts give it, or it is the only fact recorded and not the
    inputs' rows alone (the rows of sequence-first data are its sequence length, and padded
    (batch, sequence) and (sequence, batch) tables look alike)."""
    if not inputs or not all(s[seq_axis] == batch and s[batch_axis] != batch for s in inputs):
        return False
    giving = [k for k, v in facts.items() if v == batch]
    return len(giving) >= 2 or (len(facts) == 1 and giving != [ROWS])


@rule(name="wrong-batch-axis", code="TL611",
      requires=(Needs.MODULE_SHAPES, Needs.MODULE_CONFIG), plot=Plot.NONE,
      links=(explains("overfitting", "loss-oscillation", *OUTCOME,
                      why="a recurrence over the batch mixes the samples and never sees the "
                          "real sequences"),))
def wrong_batch_axis(run: Run) -> list[Finding]:
    try:
        steps = _train_inputs(run)
        facts = _batch_facts(run, steps)
    except (KeyError, TypeError, ValueError):
        return []
    if not facts:
        return []
    shapes = run.meta.get(META_MODULE_SHAPES)
    shapes = shapes if isinstance(shapes, dict) else {}
    findings = []
    for module in run.modules():
        config = module.get("config")
        if not isinstance(config, dict) or not isinstance(config.get("batch_first"), bool):
            continue
        path = str(module.get("path", ""))
        inputs = [s for s in input_shapes(shapes.get(path)) if len(s) == 3]
        first = config["batch_first"]
        batch_axis, seq_axis = (0, 1) if first else (1, 0)
        batch = next((size for size in sorted(set(facts.values()))
                      if _reads_batch_as_time(inputs, batch_axis, seq_axis, size, facts)), None)
        if batch is None:
            continue
        shape = inputs[0]
        findings.append(wrong_batch_axis.finding(
            ERROR, path, run.step_range,
            f"{module.get('type')} '{path}' (batch_first={first}) read inputs of shape {shape} "
            f"while the batch held {batch} samples: it ran over the batch as if it were "
            f"{shape[seq_axis]} time steps of {shape[batch_axis]} sequences.",
            {"batch_first": first, "input_shape": shape, "batch": batch, "calls": len(inputs),
             "batch_from": sorted(k for k, v in facts.items() if v == batch)},
            (f"Pass batch_first={not first} to '{path}' (the data is "
             f"{'(sequence, batch, features)' if first else '(batch, sequence, features)'}), "
             "or permute the input with x.transpose(0, 1) and read its last time step "
             "accordingly.")))
    return findings
