"""target-problems: the targets are not what the loss or the training expects.

What it detects
    From the profiles of the targets given to `Recorder.step(targets=...)` and `log()`:
    - labels outside what the loss expects: binary labels in {-1, 1} while the train loss goes
      negative (a cross-entropy given -1 labels; on at least `negative_share` of the steps), or
      integer class indices at or above the size of the model's output layer (the outputs'
    dimension the targets lack, from the recorded shapes; in traces without them, the last
    weight matrix's first dimension);
    - train batches holding one or two classes (at least `sorted_share` of them, batches of at
      least `per_class` rows per class) where the data has `min_classes` or more: an
      unshuffled, sorted dataset;
    - regression targets (not integer-valued) whose typical magnitude is above `max_scale` or
      below `min_scale` (a target tensor of several columns by its largest column), unless
      they move with the model (`moving_targets`, or a scale that moves twice over,
      `targets_drift`: a DQN's bootstrapped TD targets, whose magnitude grows with its
      Q-values and is no scale of the data);
    - as information, a binary task whose positive class is rarer than `rare`, or a task of
      three or more classes (the classes table) whose largest class outnumbers its rarest
      `ratio` times or more in the train targets, with the validation split's balance beside;
    - targets that do not depend on the inputs. The best prediction that ignores the input has
      a known loss (`constant_loss`): the entropy of the recorded class shares for a
      cross-entropy (label smoothing included; targets at the loss's ignore_index, a
      sequence's padding, left out), the targets' variance for MSE. An error when
      a model the optimizer demonstrably moves (no parameter frozen, every weight matrix's
      update ratio within [`low_update`, `high_update`], at `low_update` or more over the
      run's last half too (an LR schedule that ran out halfway stops every update), `travel`
      of its norm or more over the run -- a tenth: enough to leave the constant prediction if the inputs told
      anything, while a task still early in training is guarded by the loss having stopped
      falling; an embedding is held to the per-step bounds only, its rows being distinct
      features of their tokens from the start, and only the seen tokens' rows moving --,
      `min_kept` of its first norm kept; a fused module's unread part (a GRU layer whose
      output the code never reads: `_unread`) is not judged, having no gradient to move
      by; its BatchNorm and Dropout modules in training mode at every recorded step,
      BatchNorm on batches of `min_norm_batch` rows or more) on varying inputs, with one
      optimizer and train targets that do not drift, either never gets the train loss more than
      `max_explained` of that level (plus `noise_k` standard errors of each tenth of the run,
      at most as much again) below it and has stopped falling, at most `max_above` above it,
      and over the last half's profiled batches is within those bounds of the loss the
      constant prediction has on those very batches (`constant_losses`); or fits train
      `min_fit` below it while the validation split, whose inputs match train's
      (`match_share` of the features, or no difference beyond the sampling noise of the rows
      behind each split: train-val-mismatch's test), stays at its own such level and its
      logged accuracy (a fraction, or percent) at the largest class's share over `min_evals`
      evaluations since (without a validation accuracy, healthy overfitting looks the same: not judged);
      or an evaluation split's logged accuracy whose last half's median sits below the share
      of that split's rarest class (every class of the output layer present in it), by a
      one-sided binomial test at `alpha` on its rows per evaluation: a prediction that
      ignores the input reaches that share on any rows, so a model below it uses its inputs
      and learned a mapping these targets contradict.

Why it matters
    Each of these trains silently on the wrong problem. A BCE loss given -1 labels rewards
    pushing predictions to 0 without bound, so the loss falls below zero. A class index past the
    output layer either crashes on the GPU (device-side assert) or is clamped or ignored
    somewhere. Batches of one class make every step pull the model toward that class: the loss
    oscillates with the data's order and the model forgets earlier classes. Targets in the
    thousands make MSE gradients huge and the output layer's scale wrong. Labels shuffled
    apart from their inputs (images and labels permuted separately, the feature frame
    reordered after the target column was taken) train a model that can only learn the class
    shares or the mean, or memorize: every curve looks like a hard task, not like a bug.

Example
    Train targets take the values {-1, 1} and the train loss is negative on 45% of the steps.
    Or: 19 of 20 train batches of 32 hold at most 2 classes, while the data has 4. Or: the
    train loss of a 10-class digit CNN settles at 2.29 against 2.30, the entropy of its class
    shares, while every layer moves by 1-3% of its norm per step.

How to fix
    Map {-1, 1} labels to {0, 1} for BCE (`(y + 1) / 2`), or use a margin loss made for them.
    Size the output layer to the number of classes (labels 0..C-1). Shuffle the training data
    (`DataLoader(shuffle=True)` or a shuffling sampler). Standardize regression targets
    (subtract their mean, divide by their std) and invert the transform at prediction time.
    Check (input, target) pairs by hand after every transform: shuffle inputs and targets with
    one index (one Dataset), take the target column from the same frame and rows.

False positives
    {-1, 1} labels with a loss that stays positive (hinge, soft-margin) stay quiet. Binary tasks
    cannot look sorted (two classes per batch is all there is), and batches too small to hold
    several classes are not judged. Class imbalance is information, never a warning, and
    explains nothing (a language model's Zipf-shaped token targets). Targets that are integer
    counts are not judged as regression targets. The constant-prediction contract needs the
    loss function, the targets, the updates and the weights recorded, and stays quiet
    without them; a hard task early in training sits at that level with weights that have
    not yet moved their own norm, or is still falling; a validation split that beats its own
    constant prediction shows the targets are learnable; GANs and actor-critics (several
    optimizers) and RL returns (drifting targets) are not judged; a frozen, decayed, starved
    or overdriven model is left to the rules that name those, and so is one trained in eval
    mode or with BatchNorm on a few rows (not judged), or one whose findings say it is dead,
    saturated or starved of gradient (dead-units, saturated-activations, vanishing-gradients,
    frozen-parameters rank first, this one under them). A sequence model that learns the
    class shares of each position beats the pooled constant prediction and stays quiet even
    with unpaired targets: the classes are counted pooled over positions. A model that pairs
    outputs with the wrong rows (wrong-batch-axis, shape-broadcast) or a loss given the wrong
    kind of output looks the same: those findings rank first and this one under them.
"""
from __future__ import annotations

import re

import numpy as np
import pandas as pd
from scipy.stats import binom

from tracelab.analyzers._batches import BATCH_NORMS, targets_drift
from tracelab.analyzers._dynamics import (OUTCOME, eval_split, finite, fmt, layer_of,
                                          matrix_params, update_ratios)
from tracelab.analyzers._inputs import spread_matches
from tracelab.analyzers._learning_rate import moving_targets, trained_parameters
from tracelab.analyzers._loss_contracts import (SQUARED, class_shares, constant_loss,
                                                constant_losses, loss_type)
from tracelab.analyzers._profiles import feature_profiles
from tracelab.analyzers._splits import drifting, repeated_rows
from tracelab.analyzers._unread import unread_parameters
from tracelab.analyzers.train_val_mismatch import train_val_mismatch
from tracelab.core import causes
from tracelab.core.causes import explained_by, explains
from tracelab.core.findings import ERROR, INFO, WARNING, Finding
from tracelab.core.rules import Plot, rule
from tracelab.core.run import Run
from tracelab.core.schema import (LOSS_NAME, META_OPTIMIZERS, OTHER_CLASS, TRAIN,
                                  TRAIN_MODE_MODEL, UPDATE, WEIGHT, Needs)

_ACC = re.compile(r"acc", re.IGNORECASE)
EMBEDDINGS = frozenset({"Embedding", "EmbeddingBag"})


# Recorded causes that leave a model near the constant prediction with learnable targets.
_UNSOUND = (
    ("train-in-eval-mode", "BatchNorm in eval mode normalizes the training batches with stale "
                           "statistics, and the model fits little"),
    ("batchnorm-small-batch", "BatchNorm statistics of a few samples make the training "
                              "batches' outputs noise"),
    ("frozen-parameters", "layers that never change carry no learned signal to the output"),
    ("dead-units", "dead units pass nothing from the input to the output"),
    ("saturated-activations", "saturated units pass no input-dependent signal or gradient"),
    ("vanishing-gradients", "the layers near the input get no gradient, so the output "
                            "learns from no feature of the input"),
)


def _stated(cause: Finding, effect: Finding) -> bool:
    """For `when`: a finding at warning or above whose effect does not point at the input
    data; information (a class balance) explains nothing."""
    return causes.cause_is_stated(cause, effect) and causes.not_input(cause, effect)


@rule(name="target-problems", code="TL604", requires=(Needs.TARGETS,), plot=Plot.NONE,
      links=(explains("loss-oscillation", "loss-spike", "exploding-gradients", "update-ratio",
                      "overfitting", *OUTCOME,
                      why="labels the loss cannot fit keep the loss from settling",
                      timing="overlap", when=_stated),
             # What else leaves a moving model at the constant prediction: their findings
             # name it first.
             explained_by("weight-decay-too-high", why="decay that holds the weights near zero "
                          "leaves the prediction constant", timing="overlap",
                          when=causes.cause_is_stated),
             explained_by("wrong-batch-axis", why="outputs paired with another row's targets "
                          "look unrelated to them", timing="overlap", when=causes.cause_is_stated),
             explained_by("loss-input-contract", why="a loss given the wrong kind of output "
                          "cannot use what the model learned", timing="overlap",
                          when=causes.cause_is_stated),
             explained_by("shape-broadcast", why="outputs broadcast against every target "
                          "average over unrelated pairs", timing="overlap",
                          when=causes.cause_is_stated),
             explained_by("collapsed-outputs", why="outputs that no longer vary are a constant "
                          "prediction", timing="overlap", when=causes.cause_is_stated),
             # A model whose training is not sound fits nothing, whatever its targets.
             *(explained_by(cause, why=why, timing="overlap", when=causes.cause_is_stated)
               for cause, why in _UNSOUND)))
def target_problems(run: Run, *, negative_share: float = 0.1, min_classes: int = 4,
                    sorted_share: float = 0.8, per_class: int = 4, min_batches: int = 5,
                    max_scale: float = 100.0, min_scale: float = 0.01,
                    rare: float = 0.1, ratio: float = 10.0, max_explained: float = 0.05,
                    noise_k: float = 3.0, max_above: float = 0.5, min_fit: float = 0.5,
                    pieces: int = 10, min_steps: int = 50, low_update: float = 1e-5,
                    high_update: float = 0.1, travel: float = 0.1, min_kept: float = 0.5,
                    min_evals: int = 3, match_share: float = 0.8,
                    min_norm_batch: int = 8, alpha: float = 0.05) -> list[Finding]:
    tg = run.targets
    findings = _class_balance(run, ratio)  # 3+ classes; _imbalance below: 0/1 labels only
    findings += _unlearnable(
        run, max_explained=max_explained, noise_k=noise_k, max_above=max_above,
        min_fit=min_fit, pieces=pieces, min_steps=min_steps, low_update=low_update,
        high_update=high_update, travel=travel, min_kept=min_kept, min_evals=min_evals,
        match_share=match_share, min_norm_batch=min_norm_batch)
    if not any(f.evidence.get("cause") == "targets_unaligned" for f in findings):
        findings += _below_chance(run, alpha)
    numeric: dict[str, list[tuple[str, pd.DataFrame]]] = {}
    for feature, rows in tg.groupby("feature", sort=False):
        train = rows[rows["split"] == TRAIN]
        ints = bool((rows["int_frac"].astype(float) >= 1.0).all())
        if ints:
            findings += _label_range(run, str(feature), rows, negative_share)
            findings += _sorted(str(feature), rows, train, min_classes, sorted_share,
                                per_class, min_batches)
            findings += _imbalance(str(feature), train, rare)
        elif len(train):
            numeric.setdefault(_NUMBERED.sub("", str(feature)), []).append((str(feature), train))
    # Targets that move with the model (a DQN's r + gamma * max Q(s'), which rise with its
    # Q-values toward reward / (1 - gamma)) have no scale of their own to standardize: their
    # median magnitude is wherever the Q-values were when the run stopped. Their level moves
    # (`moving_targets`), or their spread grows with it faster than the level travels, and then
    # their scale still moves (`targets_drift`: the first and last quarters' root mean squares
    # twice apart or more), which a fixed data set sampled at random never does.
    moving = bool(numeric) and (moving_targets(run) or targets_drift(run) is not None)
    for columns in ([] if moving else numeric.values()):
        # A target tensor of many columns (a VAE's images) is judged by its largest column:
        # the blank border pixels of an image are no scale of their own.
        scales = [_typical(train) for _, train in columns]
        feature, train = columns[int(np.nanargmax(scales))] if len(columns) > 1 and \
            np.isfinite(scales).any() else columns[0]
        findings += _scale(feature, train, max_scale, min_scale)
    return findings


def _label_range(run: Run, feature: str, rows: pd.DataFrame, share: float) -> list[Finding]:
    low, high = float(rows["min"].min()), float(rows["max"].max())
    steps = (int(rows["step"].min()), int(rows["step"].max()))
    if low == -1 and high == 1 and (rows["n_unique"] <= 3).all():
        loss = finite(run.loss()).to_numpy(dtype=float)
        negative = float(np.mean(loss < 0)) if len(loss) else 0.0
        if negative >= share:
            return [target_problems.finding(
                ERROR, feature, steps,
                f"Targets '{feature}' take the values {{-1, 1}} while the train loss is "
                f"negative on {negative:.0%} of the steps (down to {fmt(loss.min())}): a "
                "cross-entropy loss (BCE) expects labels in [0, 1].",
                {"min": low, "max": high, "negative_loss_share": negative},
                "Map the labels to {0, 1} for BCE ((y + 1) / 2), or use a margin loss made "
                "for {-1, 1} labels.")]
    outputs = _output_size(run)
    integer = rows["dtype"].astype(str).str.startswith(("int", "uint")).all()
    if outputs and outputs > 1 and integer and high >= outputs:
        return [target_problems.finding(
            ERROR, feature, steps,
            f"Class indices in '{feature}' range over {fmt(low)}..{fmt(high)}, but the model's "
            f"output layer has {outputs} outputs (valid indices 0..{outputs - 1}).",
            {"min": low, "max": high, "outputs": outputs},
            "Size the output layer to the number of classes, or remap the labels to "
            "0..C-1 (a 1-based label set is the usual cause).")]
    return []


def _output_size(run: Run) -> int | None:
    """The number of classes the outputs given to the loss hold. Where the recorder saw the
    outputs and targets (`outputs` in the metadata), the size of the outputs' dimension that
    the targets lack (a language model's (B, T, V) logits against (B, T) tokens: V), the
    largest where several could be; None where the shapes pair no such way (not judged). Only
    a trace without those shapes falls back to the first dimension of the model's last
    weight matrix, its output layer's size -- which a head tied to the input embedding (its
    weight listed once, as the embedding's) does not show."""
    seen = run.meta.get("outputs")
    if isinstance(seen, dict) and seen:
        sizes = [size for split in seen.values() if isinstance(split, dict)
                 for size in _class_dims(split.get("shape"), split.get("targets_shape"))]
        return max(sizes) if sizes else None
    shapes = [p.get("shape") for p in run.parameters().values()
              if isinstance(p.get("shape"), (list, tuple)) and len(p["shape"]) >= 2]
    return int(shapes[-1][0]) if shapes else None


def _class_dims(shape, targets) -> list[int]:
    """The sizes of the dimensions of `shape` whose removal leaves `targets`' shape (class
    indices index that dimension); [] where the shapes are not lists of ints so paired."""
    ok = [isinstance(s, (list, tuple)) and all(isinstance(d, int) for d in s)
          for s in (shape, targets)]
    if not all(ok) or len(shape) != len(targets) + 1:
        return []
    return [int(shape[i]) for i in range(len(shape))
            if list(shape[:i]) + list(shape[i + 1:]) == list(targets)]


def _sorted(feature: str, rows: pd.DataFrame, train: pd.DataFrame, min_classes: int,
            share: float, per_class: int, min_batches: int) -> list[Finding]:
    classes = len(set(rows["min"].astype(float)) | set(rows["max"].astype(float)))
    classes = max(classes, int(rows["n_unique"].max()))
    big = train[train["count"] >= per_class * classes]
    if classes < min_classes or len(big) < min_batches:
        return []
    few = big["n_unique"] <= 2
    if float(few.mean()) < share:
        return []
    return [target_problems.finding(
        WARNING, feature, (int(big["step"].min()), int(big["step"].max())),
        f"{int(few.sum())} of {len(big)} train batches of '{feature}' hold at most 2 classes "
        f"(median {fmt(big['n_unique'].median())}), while the data has {classes}: the "
        "training data is not shuffled (sorted by label).",
        {"batches": len(big), "batches_with_few_classes": int(few.sum()), "classes": classes},
        "Shuffle the training data: DataLoader(shuffle=True) or a shuffling sampler "
        "(DistributedSampler with set_epoch each epoch).")]


def _imbalance(feature: str, train: pd.DataFrame, rare: float) -> list[Finding]:
    if not len(train) or float(train["min"].min()) != 0 or float(train["max"].max()) != 1:
        return []
    counts = train["count"].astype(float)
    positive = float((train["mean"].astype(float) * counts).sum() / counts.sum())
    minority = min(positive, 1 - positive)
    if minority >= rare:
        return []
    return [target_problems.finding(
        INFO, feature, (int(train["step"].min()), int(train["step"].max())),
        f"The positive class of '{feature}' is {positive:.1%} of the train targets.",
        {"positive_share": positive},
        "Judge the model by precision/recall or AUC rather than accuracy; weight the loss "
        "(pos_weight) if the rare class matters.")]


def _class_balance(run: Run, ratio: float) -> list[Finding]:
    """Information on the train class balance of integer targets of 3+ classes."""
    cl = run.classes
    cl = cl[cl["label"] != OTHER_CLASS]
    findings = []
    for target, rows in cl.groupby("target", sort=False):
        shares = {split: part.groupby("label")["count"].sum() / part["count"].sum()
                  for split, part in rows.groupby("split")}
        train = shares.get(TRAIN)
        if train is None or len(train) < 3 or train.max() < ratio * train.min():
            continue
        big, small = int(train.idxmax()), int(train.idxmin())
        val = {s: v for s, v in shares.items() if s != TRAIN}
        beside = "".join(f"; in {s}: {v.get(small, 0.0):.1%} and {v.get(big, 0.0):.1%}"
                         for s, v in sorted(val.items()))
        steps = (int(rows["step"].min()), int(rows["step"].max()))
        findings.append(target_problems.finding(
            INFO, str(target), steps,
            f"Class {small} of '{target}' is {train[small]:.1%} of the train targets, class "
            f"{big} {train[big]:.1%} ({len(train)} classes seen{beside}).",
            {"classes": len(train), "rarest_class": small, "rarest_share": float(train[small]),
             "largest_class": big, "largest_share": float(train[big]),
             **{f"{s}_rarest_share": float(v.get(small, 0.0)) for s, v in val.items()}},
            "Judge the model per class (balanced accuracy, per-class recall, macro F1) rather "
            "than by accuracy; weight the loss or resample if the rare classes matter."))
    return findings


_NUMBERED = re.compile(r"\[\d+\]$")  # target[3]: one column of a target tensor


def _typical(train: pd.DataFrame) -> float:
    """The median over batches of sqrt(mean² + std²): a column's typical magnitude."""
    mean, std = train["mean"].astype(float), train["std"].astype(float)
    return float(np.sqrt(mean ** 2 + std ** 2).median())


def _scale(feature: str, train: pd.DataFrame, max_scale: float,
           min_scale: float) -> list[Finding]:
    mean, std = train["mean"].astype(float), train["std"].astype(float)
    scale = _typical(train)
    if not np.isfinite(scale) or (min_scale <= scale <= max_scale) or scale == 0:
        return []
    return [target_problems.finding(
        WARNING, feature, (int(train["step"].min()), int(train["step"].max())),
        f"Regression targets '{feature}' have a typical magnitude of {fmt(scale)} (mean "
        f"{fmt(mean.median())}, std {fmt(std.median())}), far from unit scale: the loss and "
        "its gradients scale with it, and the output layer must learn it.",
        {"scale": scale, "mean": float(mean.median()), "std": float(std.median())},
        "Standardize the targets (subtract their mean, divide by their std) and invert the "
        "transform at prediction time.")]


# -- targets that do not depend on the inputs --------------------------------------------------
def _unlearnable(run: Run, *, max_explained: float, noise_k: float, max_above: float,
                 min_fit: float,
                 pieces: int, min_steps: int, low_update: float, high_update: float,
                 travel: float, min_kept: float, min_evals: int,
                 match_share: float, min_norm_batch: int) -> list[Finding]:
    """Targets the inputs do not predict: a model the optimizer demonstrably moves never gets
    the train loss `max_explained` below the best constant prediction's (and settles there),
    or fits train `min_fit` below it while the validation split, whose inputs match train's,
    stays at that level over `min_evals` evaluations or more with its logged accuracy (a
    fraction, or percent) at chance; without a validation accuracy that case is not judged."""
    bound = constant_loss(run)
    loss = finite(run.loss())
    if bound is None or not np.isfinite(bound) or bound <= 0 or len(loss) < min_steps:
        return []
    if not _one_learner(run) or drifting(run.targets, TRAIN, min_w=0.3, min_z=3.0, share=0.5):
        return []  # a game (GAN, actor-critic) or targets that move with the policy (RL)
    moved = _moves_freely(run, low_update, high_update, travel, min_kept)
    if moved is None or not _inputs_vary(run) or not _sound_normalization(run, min_norm_batch):
        return []
    parts = np.array_split(np.arange(len(loss)), pieces)
    values = loss.to_numpy(dtype=float)
    means = np.array([values[i].mean() for i in parts])
    # A part's mean of batch losses is uncertain by its standard error: the allowance below
    # the bound is `max_explained` of it plus `noise_k` of those, never more than twice
    # `max_explained` (a loss too noisy to tell stays judged, not excused).
    noise = np.minimum(np.array([values[i].std() / np.sqrt(len(i)) for i in parts]) / bound,
                       max_explained / noise_k)
    explained = 1 - means / bound  # the share of the constant prediction's loss the model saves
    late = means[pieces // 2:]
    steps = (int(loss.index[0]), int(loss.index[-1]))
    evidence = {"constant_loss": bound, "train_loss_start": float(means[0]),
                "train_loss_end": float(means[-1]), "train_loss_late": float(late.mean()),
                "best_explained": float(explained.max()),
                "median_update_ratio": moved}
    split, val = _validation(run, max_explained)
    if val is None:
        return []  # the validation split beats the constant prediction: the targets are learnable
    settled = (late <= (1 + max_above) * bound).all() and \
        late[0] - late[-1] <= max_explained * bound + noise_k * np.hypot(
            noise[pieces // 2], noise[-1]) * bound  # no longer falling toward it
    paired = _paired_late(run, loss)
    if paired is not None and (explained <= max_explained + noise_k * noise).all() and \
            settled and 1 - max_explained <= paired <= 1 + max_above:
        evidence["late_loss_to_constant"] = paired
        return [_independent_finding(run, steps, bound, means, explained, evidence, None)]
    if "val" in val and loss_type(run) in SQUARED:
        found = _never_generalizes(run, str(split), val, explained, noise, max_explained,
                                   noise_k, min_evals, match_share)
        if found is not None:
            evidence.update(found, split=split, fit_since=steps[0])
            return [_independent_finding(run, steps, bound, means, explained, evidence, split)]
    fit = np.flatnonzero(explained >= min_fit)
    if not len(fit) or explained[-1] < min_fit or "val" not in val:
        return []
    since = int(loss.index[parts[int(fit[0])][0]])
    after = val["val"][val["val"].index >= since]
    if len(after) < min_evals or float(after.median()) < (1 - max_explained) * \
            val["val_constant_loss"] or not _splits_match(run, str(split), match_share):
        return []
    acc = val.get("accuracy")
    if acc is None or not len(acc[acc.index >= since]):
        # A loss above the constant prediction's is also what healthy overfitting gives
        # (confident wrong answers on some rows, right answers on more): only an accuracy
        # at chance tells that nothing carries over.
        return []
    chance, best = val["chance_acc"], float(acc[acc.index >= since].max())
    if best > chance + max_explained * (1 - chance):
        return []  # accuracy above chance: it learned something that carries over
    evidence.update(val_acc_best=best, chance_acc=chance)
    evidence.update(split=split, evaluations=len(after), fit_since=since,
                    val_constant_loss=val["val_constant_loss"],
                    val_loss_median=float(after.median()))
    return [_independent_finding(run, steps, bound, means, explained, evidence, split)]


def _below_chance(run: Run, alpha: float, min_evals: int = 3) -> list[Finding]:
    """An evaluation split whose logged accuracy (a fraction, or percent) sits, as the median of
    the last half of its `min_evals` or more evaluations, below the share of that split's
    rarest class, by a one-sided binomial test at `alpha` on the split's rows per evaluation
    (its recorded targets' count). A prediction that ignores the input scores at least the
    rarest class's share on every row set (predicting one class scores its share; a mixture, a
    weighted mean of those), so an accuracy below it is a model that does use its inputs and
    learned a mapping that these targets contradict: the train targets are not paired with
    their inputs as the evaluation's are (labels shuffled apart from their rows, classes
    numbered differently in the two splits). Needs every class of the output layer present in
    the split (a class it never holds is a share of 0); nothing is judged otherwise."""
    size = _output_size(run)
    tg = run.targets
    if size is None or size < 2 or not len(tg):
        return []
    for split in run.splits():
        if split == TRAIN:
            continue
        shares = class_shares(run, split)
        rows = tg.loc[tg["split"] == split].groupby("step")["count"].max()
        if shares is None or len(shares) != size or not len(rows):
            continue
        n = int(np.median(rows.to_numpy(dtype=float)))
        for name in pd.unique(run.scalars["name"]):
            acc = finite(run.scalar(name, split)) if _ACC.search(str(name)) else None
            if acc is None or len(acc) < 2 * min_evals or acc.min() < 0:
                continue
            if acc.max() > 1:  # logged in percent
                if acc.max() > 100:
                    continue
                acc = acc / 100
            late = float(acc.iloc[len(acc) // 2:].median())
            floor = float(shares.min())
            if n < 1 or late >= floor or binom.cdf(round(late * n), n, floor) >= alpha:
                continue
            steps = (int(acc.index[0]), int(acc.index[-1]))
            return [target_problems.finding(
                ERROR, "targets vs inputs", steps,
                f"The {split} accuracy '{name}' ends at {fmt(late)} (median of its last "
                f"{len(acc) - len(acc) // 2} evaluations on {n} rows), below {fmt(floor)}, the "
                f"share of {split}'s rarest class, which any prediction that ignores the input "
                "reaches: the model uses its inputs and learned a mapping that these targets "
                "contradict, so the train targets are not paired with their inputs as the "
                f"{split} targets are (labels shuffled apart from their rows, or classes "
                "numbered differently in the two splits).",
                {"cause": "targets_unaligned", "split": split, "metric": str(name),
                 "accuracy_late": late, "rarest_share": floor, "rows": n,
                 "evaluations": len(acc),
                 "p_value": float(binom.cdf(round(late * n), n, floor))},
                "Check a few (input, target) pairs of both splits by hand after every "
                "transform: shuffle inputs and targets together (one index, one Dataset), and "
                "number the classes the same way in every split.")]
    return []


def _never_generalizes(run: Run, split: str, val: dict, explained: np.ndarray,
                       noise: np.ndarray, max_explained: float, noise_k: float,
                       min_evals: int, match_share: float) -> dict | None:
    """A squared error's train loss ends below the targets' variance by more than
    `max_explained` plus `noise_k` standard errors of its last tenth (the model fits train),
    while not one of the validation split's `min_evals` or more evaluations beats that split's
    own variance by `max_explained`, though its inputs match train's: what the model learns of
    train tells it nothing about other rows. A mean squared error has no confident wrong
    answers to punish: a model that learned anything real of learnable targets beats the
    variance on new rows at some evaluation before it overfits (a classifier's cross-entropy,
    which can sit above its entropy while its accuracy is above chance, is judged with its
    accuracy instead). The evidence, or None."""
    every = val["val"]
    if explained[-1] <= max_explained + noise_k * noise[-1] or len(every) < min_evals:
        return None
    if float(every.min()) < (1 - max_explained) * val["val_constant_loss"] or \
            not _splits_match(run, split, match_share):
        return None
    return {"evaluations": len(every), "val_constant_loss": val["val_constant_loss"],
            "val_loss_median": float(every.median()), "val_loss_best": float(every.min())}


def _paired_late(run: Run, loss: pd.Series, min_points: int = 3) -> float | None:
    """Over the profiled steps of the run's last half, the train loss against the loss the
    constant prediction has on those very batches (`constant_losses`): 1 means no better
    than it, whatever rows happened to be profiled. Where every step reads the same rows,
    inputs and targets (full-batch training: `repeated_rows`), each step's batch is the
    profiled one, and every step of the last half is paired with its constant loss. None
    with fewer than `min_points`."""
    per = constant_losses(run)
    if per is None:
        return None
    per = per[np.isfinite(per.to_numpy(dtype=float)) & (per > 0)]
    late = loss.index[loss.index >= loss.index[len(loss) // 2]]
    if len(per) and float(per.max() - per.min()) <= 1e-9 * float(per.max()) and \
            repeated_rows(run.inputs, TRAIN) is not None and \
            repeated_rows(run.targets, TRAIN) is not None:
        per = pd.Series(float(per.iloc[0]), index=late)
    per = per[per.index.isin(late)]
    if len(per) < min_points:
        return None
    return float(loss.reindex(per.index).sum() / per.sum())


def _sound_normalization(run: Run, min_batch: int) -> bool:
    """Whether the model's BatchNorm and Dropout modules trained as they should, as far as
    recorded: False where a training step ran with the model in eval mode (the train-mode
    signals) while it holds such modules, or where BatchNorm trained on batches of fewer
    than `min_batch` rows (the train targets' rows per step). Either leaves a model near the
    constant prediction with learnable targets; a model without them is not concerned."""
    types = set(run.module_types().values())
    norms = bool(types & BATCH_NORMS)
    if not norms and not any("Dropout" in t for t in types):
        return True
    mode = run.signal(TRAIN_MODE_MODEL)
    if len(mode) and bool((mode == 0).any()):
        return False
    tg = run.targets
    rows = tg.loc[tg["split"] == TRAIN].groupby("step")["count"].max() if len(tg) else None
    return not (norms and rows is not None and len(rows) and float(rows.median()) < min_batch)


def _one_learner(run: Run) -> bool:
    """Whether the run recorded a single optimizer: with several (a GAN's generator and
    discriminator), one player's loss sits near chance by design."""
    found = run.meta.get(META_OPTIMIZERS)
    return isinstance(found, dict) and len(found) == 1


def _moves_freely(run: Run, low: float, high: float, travel: float,
                  min_kept: float) -> float | None:
    """The median update ratio over the model's weight matrices when no parameter is frozen
    and every trained matrix is recorded moving within [low, high] of its norm per step, by
    `travel` of it or more over the run (per-step ratio times the steps), and keeping
    `min_kept` of its first norm; None where the updates or weights were not recorded or say
    otherwise: a frozen, starved, overdriven or decayed model learns nothing whatever its
    targets."""
    params = list(run.parameters().values())
    listed = (run.meta.get("model") or {}).get("parameters") if isinstance(
        run.meta.get("model"), dict) else None
    if not params or len(params) != len(listed or ()) or \
            not all(p.get("requires_grad", True) for p in params):
        return None  # a frozen parameter, or a model summary that is not one
    ratios = update_ratios(run)
    # A fused module's unread layer gets no gradient and shapes no output: not judged.
    unread = unread_parameters(run)
    trained = [n for n in matrix_params(run, trained_parameters(run)) if n not in unread]
    span = run.step_range
    if ratios.empty or not trained or not set(trained) <= set(ratios.index) or span is None:
        return None
    ratios = ratios[trained]
    steps = span[1] - span[0] + 1
    # An embedding's rows are distinct features of their tokens from the start, so the
    # layers after it can leave the constant prediction while it barely moves; and only the
    # rows of the tokens seen move, which dilutes its whole-matrix ratio: held to the
    # per-step bounds only.
    types = run.module_types()
    lookup = np.array([types.get(layer_of(n)) in EMBEDDINGS for n in trained])
    if not ((ratios >= low) & (ratios <= high) & ((ratios * steps >= travel) | lookup)).all():
        return None
    # Still moving over the run's last half, the stretch whose settled loss is judged: the
    # median above is of the recorded steps, which crowd at the start (every step, then every
    # few), and an LR schedule that ran out halfway (an LR of 0 from then on) stops every
    # update; a model stopped before it learned anything sits at the constant prediction
    # whatever its targets (lr-schedule names that).
    late = _late_ratios(run, trained, span[0] + steps // 2)
    if late is not None and not (late >= low).all():
        return None
    norms = run.stat(WEIGHT, "norm").reindex(columns=trained).dropna(how="all")
    kept = (norms.ffill().iloc[-1] / norms.bfill().iloc[0]) if len(norms) else None
    if kept is None or not (kept >= min_kept).all():
        return None  # weights decayed toward zero: the prediction goes constant by itself
    return float(ratios.median())


def _late_ratios(run: Run, names: list[str], since: int) -> pd.Series | None:
    """Per weight matrix in `names`, the median ||update|| / ||weight|| over the recorded steps
    from `since` on; None where no update of them was recorded there."""
    upd, w = run.stat(UPDATE, "norm"), run.stat(WEIGHT, "norm")
    names = [n for n in names if n in upd.columns and n in w.columns]
    upd = upd.loc[upd.index >= since, names]
    if not names or upd.empty:
        return None
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = upd / w[names].reindex(upd.index)
    ratio = ratio.replace([np.inf, -np.inf], np.nan).median().dropna()
    return ratio if len(ratio) else None


def _inputs_vary(run: Run) -> bool:
    """Whether some profiled train input feature varies (a collapsed input explains a
    constant prediction by itself)."""
    for _, _, pooled in feature_profiles(run.inputs):
        p = pooled.get(TRAIN)
        if p is not None and p.kind not in "MO" and not p.constant and p.std > 0:
            return True
    return False


def _validation(run: Run, max_explained: float) -> tuple[str | None, dict | None]:
    """(the validation split, what it says) where the last half of its evaluations' loss does
    not beat the best constant prediction on that split's own targets by `max_explained`
    (their median); (split, None) where it does;
    (split or None, {}) where the split, its loss or that bound is not known."""
    split = eval_split(run, LOSS_NAME)
    bound = constant_loss(run, split) if split is not None else None
    val = finite(run.loss(split)) if split is not None else None
    if bound is None or not bound > 0 or val is None or not len(val):
        return split, {}
    # The median of the last half: one evaluation on a few rows lands below the constant
    # prediction by chance now and then.
    level = float(val.iloc[len(val) // 2:].median())
    if level < (1 - max_explained) * bound:
        return split, None
    found = {"val_constant_loss": bound, "val_loss_late": level, "val": val}
    shares = class_shares(run, split)
    for name in pd.unique(run.scalars["name"]):
        acc = finite(run.scalar(name, split)) if _ACC.search(str(name)) else None
        if acc is None or not len(acc) or shares is None or acc.min() < 0:
            continue
        if acc.max() > 1:  # logged in percent
            if acc.max() > 100:
                continue
            acc = acc / 100
        found["accuracy"] = acc
        found["chance_acc"] = float(shares.max())
    return split, found


def _splits_match(run: Run, split: str, share: float) -> bool:
    """Whether `split`'s inputs are not found to differ from train's (else train-val-mismatch
    explains a validation split at chance): `share` or more of the varying train features
    have the same mean, spread and range in `split`, or train-val-mismatch, which weighs each
    difference against the sampling noise of the rows behind each split, finds none. A small
    fixed set of sparse features (a graph's 140 training nodes of bag-of-words columns, a
    few nonzero values each: `repeated_rows`) differs from another in its extremes and
    spread by chance alone; train-val-mismatch's word is taken for such a full-batch set only."""
    same = judged = 0
    for _, _, pooled in feature_profiles(run.inputs):
        a, b = pooled.get(TRAIN), pooled.get(split)
        if a is None or b is None or a.kind in "MO" or not (a.std > 0):
            continue
        judged += 1
        same += spread_matches(a, b, tolerance=0.5)
    if not judged:
        return False
    if same >= share * judged:
        return True
    # Only for such a set: elsewhere train-val-mismatch's silence may be one of its deliberate
    # abstentions (a chronological split, a changing validation set), not a match.
    if repeated_rows(run.inputs, TRAIN) is None:
        return False
    return not any(f.evidence.get("split") == split for f in train_val_mismatch(run))


def _independent_finding(run: Run, steps: tuple[int, int], bound: float, means: np.ndarray,
                         explained: np.ndarray, evidence: dict,
                         split: str | None) -> Finding:
    what = "the targets' variance" if loss_type(run) in SQUARED else \
        "the entropy of the class shares"
    if split is None:
        seen = (f"From {fmt(means[0])} the train loss settles at "
                f"{fmt(evidence['train_loss_late'])}, and no stretch of the run beats "
                f"{fmt(bound)}, the loss of the best prediction that ignores the input "
                f"({what}), by more than its batch-to-batch noise")
    else:
        acc = (f", accuracy at most {fmt(evidence['val_acc_best'])} against chance "
               f"{fmt(evidence['chance_acc'])}" if "val_acc_best" in evidence else "")
        seen = (f"The train loss falls from {fmt(means[0])} to {fmt(means[-1])}, "
                f"{explained[-1]:.0%} below {fmt(bound)} (the best prediction that ignores the "
                f"input: {what}), while {split} stays at its own such level "
                f"({fmt(evidence['val_constant_loss'])}) over the {evidence['evaluations']} "
                f"evaluations since (median loss {fmt(evidence['val_loss_median'])}{acc}) "
                "though its inputs match train's: the model memorizes train")
    message = (f"{seen}, while the optimizer moves every weight matrix the loss reaches "
               f"(median update ratio {fmt(evidence['median_update_ratio'])}) on varying "
               "inputs: the targets do not depend on the inputs the model sees (labels "
               "shuffled apart from their inputs, the wrong target column, or targets off by "
               "some rows), unless these inputs carry no information about them at all.")
    return target_problems.finding(
        ERROR, "targets vs inputs", steps, message, {**evidence, "cause": "targets_unaligned"},
        "Check a few (input, target) pairs by hand after every transform: shuffle inputs "
        "and targets together (one index, one Dataset), take the target column from the same "
        "frame and rows as the features, and look for an offset of rows between them.")
