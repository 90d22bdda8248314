"""train-in-eval-mode: training steps ran with every Dropout and BatchNorm module in eval mode.

What it detects
    At each training step's first forward pass the recorder notes the model's mode and how
    many of its Dropout (p > 0) and BatchNorm modules were in training mode. The rule fires
    when a model that has such modules trained in eval mode, all of them with it, for at
    least `min_steps` consecutive steps: a `model.eval()` for validation not undone by
    `model.train()` (for the rest of the run when that holds on `never_back` of the steps
    from the first one, else until the next epoch's `model.train()`). A model without
    Dropout or BatchNorm computes the same in both modes and is never judged.

Why it matters
    In eval mode Dropout does nothing, so the model trains without the regularization it was
    designed with and overfits; BatchNorm normalizes with running statistics that no longer
    update, so the training batches are normalized with stale (at first, initial) numbers and
    training slows or diverges. Training loss drops at the switch, which looks like progress.

Example
    From step 100 on, 400 of 400 training steps ran with 0 of 2 Dropout and 0 of 3 BatchNorm
    modules in training mode (the model was in eval mode): model.train() was not called after
    the validation at step 99.

How to fix
    Call `model.train()` at the start of every training epoch (after each validation), and
    `model.eval()` only around evaluation.

False positives
    Fine-tuning with BatchNorm deliberately frozen in eval mode stays quiet when the model
    has no Dropout and the BatchNorm parameters are frozen (requires_grad False, or in no
    optimizer), and so does any module put in eval mode on purpose after `model.train()`
    (the model's own flag stays on). Training a whole run in eval mode on purpose is
    flagged; set the dropout probability to 0 instead.
"""
from __future__ import annotations

from tracelab.analyzers._batches import BATCH_NORMS
from tracelab.analyzers._dynamics import OUTCOME
from tracelab.core.causes import explains
from tracelab.core.findings import ERROR, Finding
from tracelab.core.rules import Plot, rule
from tracelab.core.run import Run
from tracelab.core.schema import (DROPOUT_MODULES, NORM_MODULES, TRAIN, TRAIN_MODE_DROPOUT,
                                  TRAIN_MODE_MODEL, TRAIN_MODE_NORM, Needs)

DROPOUT_TYPES = frozenset({"Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout",
                           "FeatureAlphaDropout"})


def _modules(run: Run, types: frozenset[str]) -> list[dict]:
    return [m for m in run.modules() if m.get("type") in types
            and (m.get("config") if isinstance(m.get("config"), dict) else {}).get("p", 1) != 0]


def _count(run: Run, types: frozenset[str], counted: str) -> int:
    """How many such modules the model has: the recorder's count at evaluations, else the
    model summary's."""
    sg = run.signals
    at_eval = sg.loc[(sg["split"] != TRAIN) & (sg["name"] == counted), "value"]
    return int(at_eval.max()) if len(at_eval) else len(_modules(run, types))


def _norm_frozen(run: Run) -> bool:
    """Whether every BatchNorm parameter is frozen: requires_grad False or in no optimizer."""
    paths = {m.get("path") for m in _modules(run, BATCH_NORMS)}
    params = [p for name, p in run.parameters().items() if name.rsplit(".", 1)[0] in paths]
    return bool(params) and all(p.get("requires_grad") is False or p.get("in_optimizer") is False
                                for p in params)


def _swapped(run: Run) -> bool:
    """Whether the evaluations ran with Dropout or BatchNorm in training mode."""
    sg = run.signals
    rows = sg[(sg["split"] != TRAIN) & sg["name"].isin((TRAIN_MODE_DROPOUT, TRAIN_MODE_NORM))]
    if not len(rows):
        return False
    on = rows.groupby(["split", "step"])["value"].max() > 0
    return bool(on.mean() >= 0.5)


def _longest_stretch(flags) -> int:
    """The most consecutive True values."""
    longest = run = 0
    for flag in flags:
        run = run + 1 if flag else 0
        longest = max(longest, run)
    return longest


@rule(name="train-in-eval-mode", code="TL609", requires=(Needs.TRAIN_MODES,), plot=Plot.LOSS,
      links=(explains("overfitting", "eval-in-train-mode", "loss-oscillation", *OUTCOME,
                      why="training without Dropout overfits, and BatchNorm in eval mode "
                          "normalizes the training batches with statistics that no longer "
                          "update"),))
def train_in_eval_mode(run: Run, *, min_steps: int = 5, never_back: float = 0.9
                       ) -> list[Finding]:
    model = run.signal(TRAIN_MODE_MODEL)
    if not len(model):
        return []
    dropout = run.signal(TRAIN_MODE_DROPOUT).reindex(model.index).fillna(0)
    norm = run.signal(TRAIN_MODE_NORM).reindex(model.index).fillna(0)
    n_drop = max(_count(run, DROPOUT_TYPES, DROPOUT_MODULES), int(dropout.max()))
    n_norm = max(_count(run, BATCH_NORMS, NORM_MODULES), int(norm.max()))
    norm_matters = n_norm > 0 and not _norm_frozen(run)
    if not (n_drop > 0 or norm_matters):
        return []
    # The model's own flag off too: a module put in eval mode on purpose after
    # model.train() (frozen statistics) leaves it on.
    off = (model == 0) & ((n_drop == 0) | (dropout == 0)) & ((n_norm == 0) | (norm == 0))
    longest = _longest_stretch(off.to_numpy())
    if longest < min_steps:
        return []
    first = off.index[off.to_numpy()][0]
    after = off.loc[first:]
    steps = after.index[after.to_numpy()]
    parts = ([f"0 of {n_drop} Dropout"] if n_drop else []) + (
        [f"0 of {n_norm} BatchNorm"] if n_norm else [])
    swapped = _swapped(run)
    cause = ("the evaluations ran in training mode: model.train() and model.eval() are "
             "swapped" if swapped else
             "the model was put in eval mode before training" if first == model.index[0] else
             "model.eval() was called and model.train() was not called again"
             if float(after.mean()) >= never_back else
             "after an evaluation, training went on in eval mode until model.train() was "
             "called again")
    return [train_in_eval_mode.finding(
        ERROR, "model", (int(steps[0]), int(steps[-1])),
        f"From step {int(first)} on, {int(after.sum())} of {len(after)} training steps ran "
        f"with {' and '.join(parts)} modules in training mode (the model was in eval "
        f"mode; the longest stretch {longest} steps): {cause}.",
        {"first_step": int(first), "steps_in_eval": int(after.sum()), "longest": longest,
         "steps_judged": len(after), "share": float(after.mean()), "dropout_modules": n_drop,
         "batchnorm_modules": n_norm, "evaluations_in_train_mode": swapped},
        ("Swap them: model.eval() before validating, model.train() before training. "
         if swapped else "") + "Call model.train() at the start of every training epoch "
        "(after each validation), and model.eval() only around evaluation.")]
