"""The trace format: table names, column schemas, tensor kinds and the data requirements rules name.

A run is a directory::

    meta.json                 run metadata (see docs/trace-format.md)
    meta.rank<N>.json         per-rank metadata of ranks other than 0 (distributed runs)
    heartbeat.r<N>            touched by rank N's writer at every flush
    scalars/  tensors/  inputs/  samples/  batches/  targets/  classes/  signals/  fingerprints/
        r<rank>-<seq>.parquet  closed part files
        r<rank>-<seq>.arrows   the open tail of a live (or killed) writer: an Arrow IPC stream
        r<rank>-reservoir.parquet  (samples/ only) the latest reservoir snapshot

Every table is in long format. Bump SCHEMA_VERSION on any change a reader of an older version
could misread; readers refuse versions newer than their own. A table a run does not have (a run
recorded before it existed) reads as empty, and the rules that need it say "not recorded".
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

SCHEMA_VERSION = 2  # 2: tensors.split (evaluation activations), which 1 would read as train

SCALARS = "scalars"
TENSORS = "tensors"
INPUTS = "inputs"
SAMPLES = "samples"
BATCHES = "batches"  # every step's sentinel of its input and target batches
TARGETS = "targets"  # target profiles, in the inputs table's columns
SIGNALS = "signals"  # what the recorder observed of the loop itself (SIGNAL_NAMES)
FINGERPRINTS = "fingerprints"  # a hash per input row, for a bounded sample per split
CLASSES = "classes"  # class counts of integer targets, per profiled batch
ROWS = "rows"  # a few whole rows of tabular batches, features with their target
TABLES = (SCALARS, TENSORS, INPUTS, SAMPLES, BATCHES, TARGETS, CLASSES, SIGNALS, FINGERPRINTS,
          ROWS)
# classes.label: a label outside 0 .. MAX_CLASSES - 1 is counted under OTHER_CLASS.
MAX_CLASSES = 1024
OTHER_CLASS = -1

# -- file names: the writer, the reader and source detection all spell them from here ------------
META_FILE = "meta.json"  # rank 0's (or the only process's) metadata
# meta.json: {statistic: why} for statistics the recorder could not record in this run (e.g.
# "activations" of a compiled model on a torch without set_stance); the report lists them.
META_ABSENT = "absent"
META_UNREGISTERED = "unregistered_parameters"  # recorders/graph_parameters.py
HEARTBEAT_FILE = "heartbeat"
_RANK_META = re.compile(r"^meta\.rank(\d+)\.json$")
# A table's part files; groups: rank, sequence (or RESERVOIR), extension.
PART_FILE = re.compile(r"^r(\d+)-(.+)\.(parquet|arrows)$")
PARQUET, ARROWS = "parquet", "arrows"  # a closed part; the open tail of a writer
RESERVOIR = "reservoir"  # the samples snapshot, rewritten whole: one file per rank, no sequence


def meta_filename(rank: int) -> str:
    return META_FILE if rank == 0 else f"meta.rank{rank}.json"


def rank_of_meta(name: str) -> int | None:
    """The rank whose metadata file is `name`; None for any other file."""
    if name == META_FILE:
        return 0
    match = _RANK_META.match(name)
    return int(match.group(1)) if match else None


def heartbeat_filename(rank: int) -> str:
    return f"{HEARTBEAT_FILE}.r{rank}"


def part_name(rank: int, seq: int | str, ext: str) -> str:
    """`r<rank>-<seq>.<ext>`: seq is a part's number (zero-padded, so parts sort) or RESERVOIR."""
    return f"r{rank}-{seq:06d}.{ext}" if isinstance(seq, int) else f"r{rank}-{seq}.{ext}"


def rank_of_part(name: str) -> int | None:
    """The rank that wrote the part file `name`; None when `name` is no part file."""
    match = PART_FILE.match(name)
    return int(match.group(1)) if match else None


def is_trace_file(name: str) -> bool:
    """Whether a file at a run directory's top level belongs to the trace (metadata and
    heartbeats, their temporaries too), unlike the reports and notes kept next to it."""
    return name.startswith(("meta", HEARTBEAT_FILE))


# Other loggers' files, which tracelab reads as runs too.
EVENT_FILES = "events.out.tfevents.*"  # TensorBoard's event files, as users know the pattern
CSV_LOG = "metrics.csv"  # Lightning's CSVLogger
CSV_HPARAMS = "hparams.yaml"  # written next to it


def is_event_file(name: str) -> bool:
    return name.startswith("events.out.") and "tfevents" in name

# tensors.kind
WEIGHT = "weight"
GRAD = "grad"
UPDATE = "update"
ACTIVATION = "activation"
KINDS = (WEIGHT, GRAD, UPDATE, ACTIVATION)

# Splits and scalar names the recorder writes itself.
TRAIN = "train"
EVAL = "eval"  # the split of an evaluation's activations that no log() call named
LOSS_NAME = "loss"
STEP_TIME = "step_time"
DATA_TIME = "data_time"
LR_PREFIX = "lr/"
# A metric given under the name of one of those goes in under this prefix (warned once).
METRIC_PREFIX = "metric/"

# batches.role
INPUT_ROLE = "input"
TARGET_ROLE = "target"

# signals.name of the outputs given to step(outputs=...) or log(outputs=...), per profiled step
# (recorders/outputs.py): what enters the loss. Rows are along dim 1 (the class dimension).
OUTPUT_NUMEL = "outputs/numel"
OUTPUT_CLASSES = "outputs/classes"  # size of dim 1 (1 for a 1-D output)
OUTPUT_MIN = "outputs/min"
OUTPUT_MAX = "outputs/max"
OUTPUT_UNIT_ROWS = "outputs/unit_rows"  # share of rows whose every value lies in [0, 1]
OUTPUT_ROW_SUM = "outputs/row_sum_error"  # max |row sum - 1|: ~0 for probability rows
OUTPUT_LOGSUMEXP = "outputs/logsumexp_error"  # max |logsumexp(row)|: ~0 for log-probabilities
OUTPUT_BROADCAST = "outputs/broadcast"  # 1 when outputs and targets broadcast to a larger shape
OUTPUT_SIGNALS = (OUTPUT_NUMEL, OUTPUT_CLASSES, OUTPUT_MIN, OUTPUT_MAX, OUTPUT_UNIT_ROWS,
                  OUTPUT_ROW_SUM, OUTPUT_LOGSUMEXP, OUTPUT_BROADCAST)
# meta.json: "outputs" maps a split to the shapes and dtypes of its outputs and targets (and the
# step they were first seen at), "loss_fn" holds the loss module's type and settings
# (Recorder(loss_fn=...)), and each leaf of "model"."modules" its extra_repr() and "config".
META_OUTPUTS = "outputs"
META_LOSS_FN = "loss_fn"
# meta.json: each leaf module's input and output shapes, one entry per call, on the first step
# that recorded activations.
META_MODULE_SHAPES = "module_shapes"

# signals.name: what the recorder observed of the training loop itself.
GRAD_LEFTOVER = "grad_leftover"  # largest |grad| a watched parameter held before a step's first
# backward: 0 when the gradients were reset (zero_grad) since the last optimizer step
TRAIN_MODE_MODEL = "train_mode/model"  # 1 when the model was in training mode at evaluation
TRAIN_MODE_DROPOUT = "train_mode/dropout"  # Dropout modules (p > 0) in training mode
TRAIN_MODE_NORM = "train_mode/batchnorm"  # BatchNorm modules in training mode
DROPOUT_MODULES = "modules/dropout"  # Dropout modules (p > 0) the model has
NORM_MODULES = "modules/batchnorm"  # BatchNorm modules the model has
AMP_SCALE = "amp/scale"  # the GradScaler's scale after the step
AMP_SKIPPED = "amp/skipped"  # 1 when the step's optimizer.step() did not run (Inf/NaN grads)
# The total norm of the tracked parameters' grads at the end of the step's last backward pass,
# and of each optimizer's grads in its step pre-hook (the grads it used): GRAD_NORM_STEP for a
# single optimizer, GRAD_NORM_STEP + "/" + its name for several (0 where none of its parameters
# held a grad: the step ran on no gradient). A clip between backward and
# step shows as step < backward; a clip after the step as recorded grad norms != step.
GRAD_NORM_BACKWARD = "grad_norm/backward"
GRAD_NORM_STEP = "grad_norm/step"
# The step's backward passes that reached the model (the watched parameter), counted from its
# optimizer step (one optimizer) or the last step(), whichever came later; and how many passes
# after the first found the watched grad reset (None, or zero though an earlier pass of the step
# added to it): zero_grad() inside a gradient-accumulation loop.
BACKWARD_PASSES = "backward/passes"
BACKWARD_RESETS = "backward/resets"
# 1 when the watched parameter's value at a later backward pass of the step differed from its
# value at the step's first pass (NaN = NaN): the weights moved between the passes, a two-pass
# method (sharpness-aware minimization perturbs every weight) or, with several optimizers, one's
# step between the passes; not accumulation. 0 otherwise.
BACKWARD_WEIGHTS_MOVED = "backward/weights_moved"
# How many times an optimizer's step() ran since the last Recorder.step(), on the steps where it
# ran 2 or more times (an inner loop: the step's `update` rows sum those steps): OPTIMIZER_STEPS
# for a single optimizer, OPTIMIZER_STEPS + "/" + its name for several.
OPTIMIZER_STEPS = "optimizer/steps"
SIGNAL_NAMES = (GRAD_LEFTOVER, TRAIN_MODE_MODEL, TRAIN_MODE_DROPOUT, TRAIN_MODE_NORM,
                DROPOUT_MODULES, NORM_MODULES, AMP_SCALE, AMP_SKIPPED, GRAD_NORM_BACKWARD,
                GRAD_NORM_STEP, BACKWARD_PASSES, BACKWARD_RESETS, BACKWARD_WEIGHTS_MOVED,
                OPTIMIZER_STEPS)
# meta.json: "optimizers" maps each watched optimizer's name to its summary (type, param groups
# with their hyperparameters and tracked parameter names); {} records that the run was given no
# optimizer object (manual SGD): its learning rate is unknown. "optimizer" keeps the first one's
# summary, as older runs have it. "schedulers": the same for the LR schedulers given.
META_OPTIMIZERS = "optimizers"
META_SCHEDULERS = "schedulers"

_f64, _i64, _str = pa.float64(), pa.int64(), pa.string()

# The statistic columns, in table order: the recorder fills them by these names, and
# ARROW_SCHEMAS is built from them. Counts are int64, the others float64.
TENSOR_STATS = ("numel", "mean", "std", "min", "max", "abs_mean", "norm", "zero_frac",
                "nan_count", "inf_count")
ACTIVATION_STATS = ("dead_frac", "saturated_frac")
INPUT_STATS = ("count", "mean", "std", "min", "max", "n_unique", "int_frac", "nan_count",
               "inf_count")
COUNT_STATS = frozenset({"numel", "count", "n_unique", "nan_count", "inf_count"})


def _stat_fields(names: tuple[str, ...]) -> list[tuple[str, pa.DataType]]:
    return [(name, _i64 if name in COUNT_STATS else _f64) for name in names]


ARROW_SCHEMAS: dict[str, pa.Schema] = {
    SCALARS: pa.schema([("step", _i64), ("split", _str), ("name", _str), ("value", _f64),
                        ("wall_time", _f64)]),
    TENSORS: pa.schema([("step", _i64), ("kind", _str), ("name", _str),
                        *_stat_fields(TENSOR_STATS), *_stat_fields(ACTIVATION_STATS),
                        ("split", _str)]),
    INPUTS: pa.schema([("step", _i64), ("split", _str), ("feature", _str), ("dtype", _str),
                       *_stat_fields(INPUT_STATS), ("resolution", _str),
                       ("time_min", pa.timestamp("ns")), ("time_max", pa.timestamp("ns"))]),
    SAMPLES: pa.schema([("split", _str), ("feature", _str), ("step", _i64), ("value", _f64)]),
    BATCHES: pa.schema([("step", _i64), ("split", _str), ("role", _str), ("name", _str),
                        ("min", _f64), ("max", _f64), ("nan_count", _i64), ("inf_count", _i64)]),
    CLASSES: pa.schema([("step", _i64), ("split", _str), ("target", _str), ("label", _i64),
                        ("count", _i64)]),
    SIGNALS: pa.schema([("step", _i64), ("split", _str), ("name", _str), ("value", _f64)]),
    FINGERPRINTS: pa.schema([("step", _i64), ("split", _str), ("input", _str),
                             ("hash", _i64)]),
    ROWS: pa.schema([("step", _i64), ("split", _str), ("row", _i64), ("feature", _str),
                     ("value", _f64), ("target", _f64)]),
}
ARROW_SCHEMAS[TARGETS] = ARROW_SCHEMAS[INPUTS]
# Tables whose split column came later, with the split of a row that has none (null, or a part
# written before the column existed). tensors.split names the evaluation whose forward pass an
# activation row read ("val", "eval"); the training rows have none. Readers read this split
# only unless asked for another (reader.read_parts, Run.tensors_of).
SPLIT_DEFAULTS = {TENSORS: TRAIN}
# A row producer's pseudo-table for the writer: its columns replace the samples snapshot (the
# whole reservoir, one file) instead of appending rows to a table.
SAMPLES_SNAPSHOT = "__samples__"

# Datetime resolutions, finest first, with their length in nanoseconds.
RESOLUTIONS = (("ns", 1), ("us", 1_000), ("ms", 1_000_000), ("s", 1_000_000_000),
               ("min", 60_000_000_000), ("h", 3_600_000_000_000), ("D", 86_400_000_000_000))


@dataclass(frozen=True)
class Requirement:
    """A kind of recorded data a rule needs. `label` completes "not recorded: ..."."""
    key: str
    label: str


class Needs:
    """What a rule can require, named for the data: `@rule(requires=(Needs.GRADS,))`."""
    LOSS = Requirement("loss", "train loss")
    EVAL = Requirement("eval", "a validation split in scalars")
    WEIGHTS = Requirement("weights", "weight stats")
    GRADS = Requirement("grads", "gradient stats")
    UPDATES = Requirement("updates", "update stats (Recorder(optimizer=...))")
    ACTIVATIONS = Requirement("activations", "activations")
    INPUTS = Requirement("inputs", "input stats")
    SAMPLES = Requirement("samples", "input samples")
    ENVIRONMENT = Requirement("environment", "environment metadata")
    MODEL = Requirement("model", "model summary")
    DATA_TIMING = Requirement("data_time", "data-loading time (Recorder.iterate)")
    BATCHES = Requirement("batches", "per-batch sentinel (step(inputs=...))")
    TARGETS = Requirement("targets", "target profiles (step(targets=...))")
    CLASSES = Requirement("classes", "class counts of integer targets (step(targets=...))")
    GRAD_RESETS = Requirement("grad_resets", "gradient resets (a Recorder with an optimizer)")
    EVAL_MODES = Requirement("eval_modes", "module modes at evaluation (log() with a model)")
    AMP = Requirement("amp", "GradScaler scale (Recorder(scaler=...))")
    FINGERPRINTS = Requirement("fingerprints", "input fingerprints")
    ROWS = Requirement("rows", "rows of tabular inputs with their target "
                       "(step(inputs=..., targets=...))")
    OUTPUTS = Requirement("outputs", "what enters the loss (step(outputs=...))")
    TRAIN_MODES = Requirement("train_modes", "module modes of the training steps (a Recorder "
                                             "with a model)")
    MODULE_SHAPES = Requirement("module_shapes", "module input shapes (activations recorded)")
    MODULE_CONFIG = Requirement("module_config", "module settings (model.modules config)")
    OPTIMIZERS = Requirement("optimizers", "the optimizers' param groups (meta.json optimizers: "
                             "Recorder(optimizer=...))")
    LEARNING_RATE = Requirement("learning_rate", "the learning rate of every step (lr/ scalars: "
                                "Recorder(optimizer=...))")
    GRAD_NORMS = Requirement("grad_norms", "the grads' total norm at backward and at the "
                             "optimizer step (grad_norm/backward, grad_norm/step)")


REQUIREMENTS = tuple(v for v in vars(Needs).values() if isinstance(v, Requirement))


# Distinct counts of input features (docs/trace-format.md): n_unique is counted on every
# unique_stride(count)-th value of a feature's batch, at most UNIQUE_EXACT values, and capped.
UNIQUE_EXACT = 1 << 12
N_UNIQUE_CAP = 10_000


def unique_stride(count: int) -> int:
    return max(1, -(-int(count) // UNIQUE_EXACT))


def unique_window(count) -> np.ndarray:
    """How many of a batch's `count` values its n_unique was counted on (elementwise)."""
    c = np.asarray(count, dtype=float)
    return np.ceil(c / np.maximum(1.0, np.ceil(c / UNIQUE_EXACT)))
