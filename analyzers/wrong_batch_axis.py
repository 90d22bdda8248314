"""wrong-batch-axis: a recurrent or attention layer read the batch as the sequence.

What it detects
    RNN, LSTM and GRU layers, nn.MultiheadAttention and the Transformer layers read a 3-D
    input as (sequence, batch, features), or as (batch, sequence, features) with
    `batch_first=True` (meta.json's module config; a Transformer layer's is its attention's).
    The recorder keeps each module's input shapes on the first step that records activations
    (module_shapes, or for a module of children its first entries in module_input_shapes).
    The batch size comes from the recorded facts: config batch_size, the rows of 2-D train
    inputs when most steps hold the same, largest number, and the length of 1-D targets (one
    label per sample; flattened per-token targets give another number). A language model's
    next-token shift (input x[:-1], target x[1:]) applied to a (batch, sequence) table never
    transposed cuts a sample off the batch: the 2-D inputs' rows one fewer than config
    batch_size on every step, with no column of config batch_size, are that batch less the
    cut row (two facts). The rule fires when,
    on every recorded call, a batch size sits on the axis the layer reads as the sequence and
    not on the one it reads as the batch, and that batch size is given by two facts, or by
    the only fact recorded (config or targets). A batch as long as the sequence cannot tell;
    the recording steps also keep each distinct input shape with its split and step
    (module_input_shapes: an epoch's smaller last batch, an evaluation read on a recording
    step or among the run's first evaluations), and a call whose own batch is known (the 1-D
    targets of its train step, or of its split's log(), as long as the outputs' first dim)
    tells where the batch is: the rule fires when one such call holds its batch on the
    sequence axis only and none holds it on the batch axis only. An evaluation's count is
    its batch only if a train call agrees: the same size on the batch axis and another on
    the sequence axis (the axis read as the sequence changed size with the batch).

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
    and sequence lengths on every recorded call (no evaluation or last batch of another size
    on a recording step) and packed sequences are not judged. A whole validation set's
    targets and outputs given to log() at once give the set's size, not a batch: an
    evaluation whose count no train call's shape agrees with tells nothing. Rows one fewer
    than config batch_size are no shifted batch where the inputs' columns or the layer's
    batch axis hold config batch_size (a sequence-first table whose sequence is as long as
    the batch, shifted along its sequence). The attention
    inside a flagged Transformer layer is left to the layer's finding.
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
CONFIG = "config batch_size"
# The rows of 2-D inputs one fewer than config batch_size on every step, and no column that
# many: the next-token shift of a language model (x[:-1], x[1:]) cut its row along the first
# axis, which held the batch (a (batch, sequence) table never transposed).
SHIFTED = "config batch_size less the row an x[:-1] shift cut from the inputs' rows"
META_INPUT_SHAPES = "module_input_shapes"  # (activation_hooks) the recording steps' shapes


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
        facts[CONFIG] = int(config["batch_size"])
    rows = steps["rows"].dropna().astype(int) if len(steps) else pd.Series(dtype=int)
    if len(rows) >= 2 and (rows == rows.max()).mean() > 0.5:
        facts[ROWS] = int(rows.max())
        if facts.get(CONFIG) == facts[ROWS] + 1 and (rows == facts[ROWS]).all() and not (
                steps["columns"] == facts[CONFIG]).any():
            facts[SHIFTED] = facts[ROWS]
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
    if SHIFTED in giving and any(s[batch_axis] == facts[CONFIG] for s in inputs):
        return False  # the batch before the shift sits where the layer reads the batch
    return len(giving) >= 2 or (len(facts) == 1 and giving != [ROWS])


def _split_batches(run: Run, split: str) -> dict[int, int]:
    """The batch size of `split` at each step it recorded targets: their count, where the
    split's targets are one label per sample (meta.json's outputs: 1-D targets as long as the
    outputs' first dim); else none."""
    shapes = output_shapes(run, split)
    target, output = shapes.get("targets_shape"), shapes.get("shape")
    if not (isinstance(target, list) and len(target) == 1 and _int(target[0])
            and isinstance(output, list) and output and output[0] == target[0]):
        return {}
    tg = run.targets
    if not len(tg) or not {"split", "feature", "step", "count"} <= set(tg.columns):
        return {}
    rows = tg[(tg["split"] == split) & (tg["feature"] == "target")]
    return {int(st): int(n) for st, n in zip(rows["step"], rows["count"]) if _int(int(n))}


def _later_calls(run: Run, path: str) -> list[tuple[list[int], int, str]]:
    """meta.json's `module_input_shapes` of a module (the distinct 3-D input shapes of the
    recording steps, training and evaluation), each with its call's batch size where the
    recorded facts give it, and its split: a train call's, the count of the 1-D targets of its
    own step; an evaluation's, that of its split's log() at or before its step (the
    evaluation ran before the recording step it is recorded at; a whole validation set
    logged at once gives the set's size instead, see `_evaluation_agrees`). Calls of no known
    batch are left out."""
    found = run.meta.get(META_INPUT_SHAPES)
    calls = found.get(path) if isinstance(found, dict) else None
    batches: dict[str, dict[int, int]] = {}
    out = []
    for call in calls if isinstance(calls, list) else []:
        if not isinstance(call, dict) or not isinstance(call.get("split"), str) \
                or not isinstance(call.get("step"), int):
            continue
        shape = input_shapes([{"inputs": [call.get("inputs")]}])
        if not shape or len(shape[0]) != 3:
            continue
        split, step = call["split"], call["step"]
        known = batches.setdefault(split, _split_batches(run, split))
        if split == TRAIN:
            batch = known.get(step)
        else:
            before = [st for st in known if st <= step]
            batch = known[max(before)] if before else None
        if batch is not None:
            out.append((shape[0], batch, split))
    return out


def _train_calls(run: Run, path: str, calls: list) -> list[list[int]]:
    """The 3-D input shapes of a module's train calls: its module_shapes entries (`calls`)
    and its train entries in `module_input_shapes`."""
    found = run.meta.get(META_INPUT_SHAPES)
    later = found.get(path) if isinstance(found, dict) else None
    train = [{"inputs": [c.get("inputs")]} for c in later if isinstance(c, dict)
             and c.get("split") == TRAIN] if isinstance(later, list) else []
    return [s for s in input_shapes(list(calls or []) + train) if len(s) == 3]


def _evaluation_agrees(shape: list[int], train: list[list[int]], batch_axis: int,
                       seq_axis: int) -> bool:
    """Whether an evaluation call whose logged count sits on the sequence axis only can be
    read as holding its batch there: a train call holds the same size on the batch axis and
    another on the sequence axis, so that the axis the layer takes for the sequence is the
    one whose size changed with the batch while the other kept its length. A count that is
    a whole validation set logged at once (its targets and outputs concatenated), as long as
    the sequence by chance, has the evaluation's smaller batches on the batch axis instead:
    no train call agrees, and the call tells nothing."""
    return any(t[batch_axis] == shape[batch_axis] and t[seq_axis] != shape[seq_axis]
               for t in train)


def _first_calls(run: Run, path: str) -> list[dict]:
    """A module's calls on the first recording step, for a module of children (a Transformer
    layer) that module_shapes leaves out: its train entries of that step in
    `module_input_shapes`, as module_shapes entries."""
    found = run.meta.get(META_INPUT_SHAPES)
    calls = found.get(path) if isinstance(found, dict) else None
    train = [c for c in calls if isinstance(c, dict) and c.get("split") == TRAIN
             and isinstance(c.get("step"), int)] if isinstance(calls, list) else []
    first = min((c["step"] for c in train), default=None)
    return [{"inputs": [c.get("inputs")]} for c in train if c["step"] == first]


def _tells(shape: list[int], batch: int, batch_axis: int, seq_axis: int) -> int:
    """1 when the call holds `batch` on the sequence axis and not on the batch axis, -1 the
    other way round, 0 when it cannot tell (both or neither axis hold it)."""
    on_seq, on_batch = shape[seq_axis] == batch, shape[batch_axis] == batch
    return int(on_seq) - int(on_batch) if on_seq != on_batch else 0


@rule(name="wrong-batch-axis", code="TL611",
      requires=(Needs.MODULE_SHAPES, Needs.MODULE_CONFIG), plot=Plot.NONE,
      links=(explains("overfitting", "loss-oscillation", *OUTCOME,
                      why="a recurrence over the batch mixes the samples and never sees the "
                          "real sequences"),))
def wrong_batch_axis(run: Run) -> list[Finding]:
    try:
        steps = _train_inputs(run)
        facts = _batch_facts(run, steps)
        modules = [m for m in run.modules() if isinstance(m, dict)]
    except (KeyError, TypeError, ValueError):
        return []
    shapes = run.meta.get(META_MODULE_SHAPES)
    first_calls = isinstance(shapes, dict)  # what it lacks: a module of children's
    shapes = shapes if isinstance(shapes, dict) else {}
    flagged = {}
    for module in modules:
        config = module.get("config")
        if not isinstance(config, dict) or not isinstance(config.get("batch_first"), bool):
            continue
        path = str(module.get("path", ""))
        first = config["batch_first"]
        batch_axis, seq_axis = (0, 1) if first else (1, 0)
        try:
            later = _later_calls(run, path)
        except (KeyError, TypeError, ValueError):
            later = []
        calls = shapes.get(path) if path in shapes or not first_calls \
            else _first_calls(run, path)
        train = _train_calls(run, path, calls if isinstance(calls, list) else [])
        told = [_tells(shape, size, batch_axis, seq_axis) for shape, size, _ in later]
        if -1 in told:  # a call holds its batch where the module reads it
            continue
        told = [0 if t == 1 and split != TRAIN
                and not _evaluation_agrees(shape, train, batch_axis, seq_axis) else t
                for t, (shape, _, split) in zip(told, later)]
        inputs = [s for s in input_shapes(calls) if len(s) == 3]
        batch = next((size for size in sorted(set(facts.values()))
                      if _reads_batch_as_time(inputs, batch_axis, seq_axis, size, facts)), None)
        if batch is not None:
            shape, giving = inputs[0], sorted(k for k, v in facts.items() if v == batch)
        elif 1 in told:
            shape, batch, _ = later[told.index(1)]
            giving = ["the 1-D targets of that call's batch"]
        else:
            continue
        flagged[path] = (module, first, batch_axis, seq_axis, shape, batch, giving,
                         len(inputs) + len(later))
    findings = []
    for path, (module, first, batch_axis, seq_axis, shape, batch, giving, calls) in \
            flagged.items():
        if any(path.startswith(other + ".") for other in flagged if other):
            continue  # the layer that holds it (a Transformer layer's attention) says it
        held = (f"{batch + 1} samples, {batch} after the next-token shift (x[:-1]) cut one "
                "along it" if SHIFTED in giving else f"{batch} samples")
        findings.append(wrong_batch_axis.finding(
            ERROR, path, run.step_range,
            f"{module.get('type')} '{path}' (batch_first={first}) read inputs of shape {shape} "
            f"while the batch held {held}: it ran over the batch as if it were "
            f"{shape[seq_axis]} time steps of {shape[batch_axis]} sequences.",
            {"batch_first": first, "input_shape": shape, "batch": batch, "calls": calls,
             "batch_from": giving},
            (f"Pass batch_first={not first} to '{path}' (the data is "
             f"{'(sequence, batch, features)' if first else '(batch, sequence, features)'}), "
             "or permute the input with x.transpose(0, 1) and read its last time step "
             "accordingly.")))
    return findings
