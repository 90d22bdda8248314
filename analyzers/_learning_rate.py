"""What the rules that judge a learning rate know of it.

A run recorded without an optimizer object (manual SGD, an update written by hand) says so:
meta.json's `optimizers` is `{}` (docs/trace-format.md), and no `lr/` scalar was recorded. Its
learning rate is unknown, so a rule's fix cannot say to lower it; it names what to check and
the Recorder argument that records it. Older runs and imported ones hold no such fact.

A finding whose rule writes such a fix says so in its evidence (`LR_KNOWN` False). A fix that
changes the learning rate presumes that the optimizer's learning rate moves the model's weights
(`LR_MOVES_THE_MODEL`): an optimizer that holds none of the model's trained parameters (built
over another model, or before the layers were replaced) contradicts it.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from tracelab.analyzers._batches import sentinel
from tracelab.analyzers._dynamics import (edge_len, matrix_params, update_ratios,
                                          weights_unchanged)
from tracelab.core.causes import HOLDS, Premise, Verdict, contradicted, unknown
from tracelab.core.findings import Finding
from tracelab.core.run import Run, summary_parameters
from tracelab.core.schema import (BACKWARD_PASSES, LR_PREFIX, META_OPTIMIZERS, UPDATE,
                                   WEIGHT)

NO_OPTIMIZER_FIX = ("The run was recorded without an optimizer object, so its learning rate is "
                    "unknown and was not judged: check the step size the training loop applies "
                    "(a hand-written update's lr), and pass the optimizer to "
                    "Recorder(optimizer=...) to record it.")


def without_optimizer(run: Run) -> bool:
    """Whether the run recorded that it had no optimizer object, and no learning rate."""
    if run.meta.get(META_OPTIMIZERS) != {}:
        return False
    names = run.scalars["name"] if len(run.scalars) else ()
    return not any(str(n).startswith(LR_PREFIX) for n in set(names))


# A finding's evidence: whether its rule knew the run's learning rate (False on a run recorded
# without an optimizer object, whose fix then says what to check instead: NO_OPTIMIZER_FIX).
LR_KNOWN = "lr_known"


def lr_known(run: Run) -> bool:
    """Whether the run's learning rate is known to the rules (not `without_optimizer`): the
    value of a finding's LR_KNOWN evidence."""
    return not without_optimizer(run)


def lr_fix(run: Run, fix: str) -> str:
    """`fix`, or what to do when the run's learning rate is unknown."""
    return NO_OPTIMIZER_FIX if without_optimizer(run) else fix


_LOWER = ("Lower or warm up the learning rate", "Lower the learning rate",
          "lower the learning rate")
HAND_WRITTEN = ("shrink the step the training loop applies (no optimizer object was recorded, so "
                "its learning rate is unknown: pass Recorder(optimizer=...) to record it)")


def lower_lr_fix(run: Run, fix: str) -> str:
    """`fix`, whose advice to lower the learning rate speaks of the hand-written update's step
    on a run recorded without an optimizer: there is no learning rate to lower."""
    if not without_optimizer(run):
        return fix
    for words in _LOWER:
        if words in fix:
            told = HAND_WRITTEN[0].upper() + HAND_WRITTEN[1:] if words[0].isupper() else \
                HAND_WRITTEN
            return fix.replace(words, told, 1)
    return fix


def _lr_scalars(run: Run) -> bool:
    names = run.scalars["name"] if len(run.scalars) else ()
    return any(str(n).startswith(LR_PREFIX) for n in set(names))


def lr_name(optimizer: str, group: int, optimizers: int) -> str:
    """The `lr/` scalar the recorder names for param group `group` of optimizer `optimizer`
    (meta.json's optimizers key) in a run of `optimizers` optimizers: `lr/<group>` with one,
    `lr/<optimizer>/<group>` with several (docs/trace-format.md)."""
    return f"{LR_PREFIX}{group}" if optimizers == 1 else f"{LR_PREFIX}{optimizer}/{group}"


def group_of(name: str, optimizers: Any) -> tuple[str | None, int] | None:
    """(the optimizers key, the param group's index) that the `lr/` scalar `name` names
    (lr_name's inverse); the key of a one-index name is the run's only optimizer (None where
    meta.json holds none or several). None where `name` is no such scalar."""
    name = str(name)
    if not name.startswith(LR_PREFIX):
        return None
    key, _, index = name[len(LR_PREFIX):].rpartition("/")
    if not index.isdigit():
        return None
    if not key:
        keys = list(optimizers) if isinstance(optimizers, dict) else []
        return (str(keys[0]) if len(keys) == 1 else None), int(index)
    return key, int(index)


def groups_of(summary: Any) -> list[dict[str, Any]]:
    """An optimizer summary's param groups (meta.json's optimizers[*].groups) that are
    mappings; [] where the summary is missing or malformed."""
    groups = summary.get("groups") if isinstance(summary, dict) else None
    return [g for g in groups if isinstance(g, dict)] if isinstance(groups, list) else []


def optimizers_holding(run: Run) -> int:
    """How many optimizers of meta.json hold at least one parameter (0 where it records none,
    or holds them malformed)."""
    return sum(1 for summary in run.optimizers().values()
               if any(g.get("params") or g.get("n_params") for g in groups_of(summary)))


def loss_grew(run: Run) -> bool:
    """Whether the training loss turned non-finite or ended (the median of its last tenth)
    above everything its first tenth held: a loss that grows, not one that swings."""
    loss = run.loss().to_numpy(dtype=float, na_value=np.nan)
    if not loss.size:
        return False
    if not np.isfinite(loss).all():
        return True
    n = edge_len(len(loss), lo=5, hi=100)
    return len(loss) >= 2 * n and float(np.median(loss[-n:])) > float(loss[:n].max())


def unrecorded_mover(run: Run) -> bool:
    """Whether some trained parameter that no recorded optimizer holds (`held_parameters`)
    changed over the run (its recorded weights or updates: not `weights_unchanged`): an
    optimizer the Recorder was not given moves it, as when a GAN is recorded with its
    generator's optimizer only and its discriminator is stepped by another. False where the
    run recorded no optimizer's parameters, or no such parameter's weights or updates."""
    held = held_parameters(run)
    if not held:
        return False
    recorded = set(run.names(WEIGHT)) | set(run.names(UPDATE))
    return any(name not in held and name in recorded and not weights_unchanged(run, name)
               for name in trained_parameters(run))


def players(run: Run) -> int:
    """How many optimizers move the model's parameters: those of meta.json that hold some
    (`optimizers_holding`), plus one where parameters no recorded optimizer holds changed
    (`unrecorded_mover`)."""
    holding = optimizers_holding(run)
    return holding + (1 if holding and unrecorded_mover(run) else 0)


# A game's players step on their own losses, each after its own backward pass: at least one
# recorded step in MIN_PLAYER_SHARE holds two or more passes (a WGAN critic's 5 steps per
# generator step: one in five). One loss stepped by several optimizers (Muon and AdamW, an
# encoder's and a decoder's, SparseAdam and Adam) holds one pass per step.
MIN_PLAYER_SHARE = 0.1


def _separate_networks(run: Run) -> bool:
    """Whether the passes cannot tell one loss: each holding optimizer's named parameters are
    exactly those of one top-level child of the recorded model, a different one each (an
    actor `pi` and a critic `v`, a generator `G` and a discriminator `D`), so that one
    player's loss may never reach the watched parameter, which sits in one of them (a
    critic's head), and one pass per step is then no proof of one loss. Also true where an
    optimizer's parameters are unnamed or not the model's (a player outside the recorded
    model), or a parameter that no recorded optimizer holds moved (`unrecorded_mover`)."""
    model = set(run.parameters())
    children: dict[str, set[str]] = {}
    for name in model:
        children.setdefault(name.split(".", 1)[0], set()).add(name)
    owned = []
    for summary in run.optimizers().values():
        groups = groups_of(summary)
        if not any(g.get("params") or g.get("n_params") for g in groups):
            continue
        names: set[str] = set()
        for g in groups:
            params = g.get("params")
            if not isinstance(params, list):
                return True  # unnamed parameters: their place in the model is unknown
            names.update(str(n) for n in params)
        if not names <= model:
            return True
        owned.append(names)
    if unrecorded_mover(run):
        return True
    tops = [{n.split(".", 1)[0] for n in names} for names in owned]
    return all(len(t) == 1 for t in tops) and len({next(iter(t)) for t in tops}) == len(tops) \
        and all(names == children[next(iter(t))] for names, t in zip(owned, tops))


def several_players(run: Run) -> bool:
    """Whether two or more players move the model's parameters, each on its own loss: a GAN's
    generator and discriminator, an actor and a critic, whatever the loss did. Two or more
    optimizers move parameters (`players`), and where the run recorded `backward/passes` (the
    backward passes between optimizer steps that reached the watched parameter), the players'
    separate losses show as two or more passes on at least MIN_PLAYER_SHARE of the steps (the
    median is 2 or more where every player steps every step; a critic stepped 5 times per
    generator step reads 2 on one step in five). Several optimizers that step on ONE loss
    (one backward, then every optimizer's step: Muon with AdamW, an encoder's and a decoder's
    optimizer over one stack, SparseAdam with Adam) read one pass per step, and are no game.
    Where no passes were recorded (older traces, compiled autograd), or where the passes
    cannot tell (`_separate_networks`: each optimizer holds a whole network of its own, whose
    loss may not reach the watched parameter), two or more optimizers are read as a game, as
    before. One loss accumulated over k passes per step also reads k: read as a game, the
    quieter answer."""
    if players(run) < 2:
        return False
    sig = run.signals
    passes = np.array([])
    if len(sig) and {"name", "split", "step", "value"} <= set(sig.columns):
        passes = pd.to_numeric(run.signal(BACKWARD_PASSES), errors="coerce").to_numpy(
            dtype=float, na_value=np.nan)
    passes = passes[np.isfinite(passes) & (passes >= 1)]
    if not passes.size or float(np.mean(passes >= 2)) >= MIN_PLAYER_SHARE:
        return True
    return _separate_networks(run)


def game_loss_grew(run: Run) -> bool:
    """Whether a game's recorded loss diverged: it grew (`loss_grew`: turned non-finite, or
    ended above everything its first tenth held) and ends at its highest level (the median of
    its last tenth above that of every earlier tenth of the run). One player's loss leaves its
    start by design as the other learns (a generator's BCE starts near ln 2 against a
    discriminator at chance and rises as the discriminator learns to tell them apart), then
    swings back: a game's swings come and go, while a loss that diverges keeps climbing."""
    if not loss_grew(run):
        return False
    loss = run.loss().to_numpy(dtype=float, na_value=np.nan)
    if not np.isfinite(loss).all():
        return True
    n = edge_len(len(loss), lo=5, hi=100)
    last = float(np.median(loss[-n:]))
    earlier = [float(np.median(loss[k:k + n])) for k in range(0, len(loss) - n - n + 1, n)]
    return not earlier or last > max(earlier)


def adversarial_game(run: Run) -> bool:
    """Whether the one recorded loss is a game's: two or more players move parameters
    (`several_players`: a GAN's generator and discriminator, an actor and a critic, one of
    them possibly not given to the Recorder), each moving its own on its own loss, so that
    the recorded loss (one player's, or their sum) swings and jumps by design, and the loss did
    not diverge (`game_loss_grew`: non-finite, or grown and ending at its highest level).
    Its swings and spikes are then no fault by themselves; a loss that diverges still is."""
    return several_players(run) and not game_loss_grew(run)


# Where the objective moves with the model, the loss's level and swings tell no overshoot; a
# step too large still shows in the optimization's own facts: updates OVERSHOOT_UPDATE of the
# weights' norm per step or more (100x the usual 1e-3, as learning-rate-too-high's far_above),
# or a loss that turned NaN/Inf.
OVERSHOOT_UPDATE = 0.1
# Targets drawn from a fixed data set keep their distribution: the per-batch means of the first
# and last thirds of the profiles differ by sampling noise (std / sqrt(batch)), far below one
# within-batch std. Bootstrapped targets (a TD target r + gamma * max Q(s')) grow with the model.
MIN_TARGET_PROFILES = 6


def moving_targets(run: Run) -> bool:
    """Whether the recorded training targets move with the model: they are not integers (class
    indices, whose order a sampler may sort), at least MIN_TARGET_PROFILES profiles were
    recorded, and the median per-batch mean of the last third of them lies more than one
    within-batch std (the larger median of the two thirds) from that of the first third,
    for every target feature. A fixed data set's batches cannot drift so (their means differ
    by std / sqrt(batch)); a DQN's targets r + gamma * max Q(s') computed from the network
    being trained rise as its Q-values rise. False where the facts are missing or malformed."""
    try:
        t = run.targets
        if not len(t):
            return False
        t = t[t["split"] == "train"]
        moved = []
        for _, rows in t.groupby("feature"):
            rows = rows.sort_values("step")
            frac = pd.to_numeric(rows["int_frac"], errors="coerce").to_numpy(dtype=float)
            if np.nanmin(frac, initial=1.0) >= 1.0 or len(rows) < MIN_TARGET_PROFILES:
                return False
            mean = pd.to_numeric(rows["mean"], errors="coerce").to_numpy(dtype=float)
            std = pd.to_numeric(rows["std"], errors="coerce").to_numpy(dtype=float)
            k = len(rows) // 3
            first, last = mean[:k], mean[-k:]
            spread = max(float(np.nanmedian(std[:k])), float(np.nanmedian(std[-k:])))
            shift = abs(float(np.nanmedian(last)) - float(np.nanmedian(first)))
            moved.append(bool(np.isfinite(shift) and np.isfinite(spread) and shift > spread))
    except (KeyError, ValueError, TypeError, AttributeError):
        return False
    return bool(moved) and all(moved)


# A learning rate that the schedule raised an order of magnitude after the run's first tenth
# (past any usual warm-up's bulk: a linear warm-up over half the run rises 5x after it).
LR_RAISED = 10.0


def lr_raised(run: Run) -> bool:
    """Whether some recorded learning rate (lr/ scalars) rose LR_RAISED times or more above its
    value at the end of the run's first tenth: a step size the schedule raised mid-run."""
    if not _lr_scalars(run):
        return False
    for name in {str(n) for n in run.scalars["name"]}:
        if not name.startswith(LR_PREFIX):
            continue
        values = pd.to_numeric(run.scalar(name), errors="coerce").to_numpy(
            dtype=float, na_value=np.nan)
        values = values[np.isfinite(values)]
        if values.size < 10:
            continue
        base = float(values[values.size // 10])
        if base > 0 and float(values[values.size // 10:].max()) >= LR_RAISED * base:
            return True
    return False


def overshoot_facts(run: Run) -> bool:
    """Whether the optimization itself shows steps too large, whatever the objective: the loss
    turned NaN/Inf, a learning rate the schedule raised tenfold mid-run (`lr_raised`), or some
    weight matrix's median update is OVERSHOOT_UPDATE of its norm or more, over the run or its
    last third."""
    try:
        loss = run.loss().to_numpy(dtype=float, na_value=np.nan)
        if loss.size and not np.isfinite(loss).all():
            return True
        if lr_raised(run):
            return True
        ratios = pd.concat([update_ratios(run), update_ratios(run, 1 / 3), _early_ratios(run)])
    except (KeyError, ValueError, TypeError, AttributeError):
        return False
    return bool(len(ratios)) and float(ratios.max()) >= OVERSHOOT_UPDATE


def _early_ratios(run: Run, early: int = 10) -> pd.Series:
    """Per weight matrix, the median update ratio over the first `early` recorded steps, where
    the run recorded at least twice as many: units that die or weights that blow up stop the
    updates later on, so that the run's median hides the first steps' overshoot."""
    upd, w = run.stat(UPDATE, "norm"), run.stat(WEIGHT, "norm")
    names = matrix_params(run, [n for n in upd.columns if n in w.columns])
    if not names or len(upd) < 2 * early:
        return pd.Series(dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = upd[names].iloc[:early] / w[names].reindex(upd.index[:early])
    return ratio.replace([np.inf, -np.inf], np.nan).median().dropna()


def moving_objective(run: Run) -> bool:
    """Whether the recorded loss is no fixed objective: several players each step on their
    own loss (`several_players`: a game's opponent moves), or the targets move with the model
    (`moving_targets`: bootstrapped TD targets). Its rise and swings then tell no overshoot."""
    return several_players(run) or moving_targets(run)


def loss_level_uninformative(run: Run) -> bool:
    """Whether the loss's level and swings must abstain as evidence of a step too large: the
    objective moves with the model (`moving_objective`) and no optimization fact shows an
    overshoot (`overshoot_facts`: NaN/Inf, updates 100x the usual size)."""
    return moving_objective(run) and not overshoot_facts(run)


# The loss on one batch stepped on again and again (PPO's epochs over one rollout, an inner
# loop) falls at a step small enough (the descent lemma): at least DESCENT_SHARE of those
# steps, over MIN_REPEATS of them at least.
DESCENT_SHARE = 0.75
MIN_REPEATS = 20


def descends_per_batch(run: Run) -> bool:
    """Whether the run steps several times on each batch and the loss falls on it: where
    consecutive steps' sentinel rows (batches: every input and target tensor's min and max)
    are the same, the same batch was stepped on again (PPO's K epochs over one rollout, a
    meta-learner's inner loop), and on a batch held fixed a step small enough lowers the loss
    (the descent lemma); a step too large overshoots, and the loss on the same batch rises.
    True where MIN_REPEATS such pairs or more were recorded, at least two batches differ, the
    loss fell on DESCENT_SHARE of those pairs or more, and no step on a batch held fixed raised
    it (by ratio) as far as the median batch change moves it: the swings and jumps of such a
    loss come at the batch changes (a new rollout, returns normalized anew), not from the
    steps. Losses that are not positive are not judged.
    False where the facts are missing or malformed. Batches that share their range (images
    in [0, 1], labels 0-9) read as one batch: minibatch noise then makes the loss fall on about
    half of the pairs, and this stays False."""
    try:
        rows = sentinel(run)
        if not len(rows):
            return False
        ranges = rows.groupby(["step", "role", "name"])[["min", "max"]].first().unstack(
            ["role", "name"]).sort_index()
        table = ranges.apply(pd.to_numeric, errors="coerce").to_numpy(dtype=float)
        loss = run.loss()
        loss = loss[~loss.index.duplicated(keep="last")]
    except (KeyError, ValueError, TypeError, AttributeError, IndexError):
        return False
    if len(table) < 2:
        return False
    steps = np.asarray(ranges.index, dtype=float)
    equal = (table[1:] == table[:-1]) | (np.isnan(table[1:]) & np.isnan(table[:-1]))
    same = (np.diff(steps) == 1) & equal.all(axis=1)
    if same.all():
        return False  # one batch throughout: its swings are the steps'
    values = pd.to_numeric(loss.reindex(ranges.index), errors="coerce").to_numpy(
        dtype=float, na_value=np.nan)
    values = np.where(values > 0, values, np.nan)  # two negative losses' ratio is positive
    with np.errstate(invalid="ignore", divide="ignore"):
        change = np.log(values[1:] / values[:-1])  # NaN where a loss is missing or not > 0
    ok = np.isfinite(change)
    held, moved = change[same & ok], change[~same & ok]
    if held.size < MIN_REPEATS or not moved.size:
        return False
    # and no step on a batch held fixed raised its loss as far as a batch change typically
    # moves it: a spike on one batch is the step's overshoot, whatever the batches do
    return float(np.mean(held < 0)) >= DESCENT_SHARE and \
        float(held.max()) < float(np.median(np.abs(moved)))


def iterations_per_step(run: Run) -> int:
    """The most iterations one `optimizer.step()` runs, by meta.json's param groups'
    `max_iter` (L-BFGS: up to 20 evaluations of its closure per step); 1 where none says."""
    most = 1
    for summary in run.optimizers().values():
        for group in groups_of(summary):
            value = group.get("max_iter")
            if isinstance(value, (int, float)) and not isinstance(value, bool) and \
                    np.isfinite(value) and value > most:
                most = int(value)
    return most


def watched_parameter(meta: dict[str, Any]) -> str | None:
    """The parameter whose gradient the recorder watches (recorders/loop_checks.py): the last
    of the smallest trainable, unsharded parameters of meta.json's model summary."""
    sharded = set(map(str, meta.get("sharded_parameters") or ()))
    plain = [(int(np.prod(p["shape"])), name) for name, p in summary_parameters(meta).items()
             if p.get("requires_grad", True) and name not in sharded
             and isinstance(p.get("shape"), list)
             and all(isinstance(n, int) for n in p["shape"])]
    plain = [(n, name) for n, name in plain if n]
    return min(reversed(plain), key=lambda p: p[0])[1] if plain else None


def held_parameters(run: Run) -> set[str] | None:
    """The names of the parameters some optimizer holds (meta.json's optimizers' groups and
    model.parameters' in_optimizer), or None where the run recorded neither."""
    held: set[str] = set()
    known = False
    for summary in run.optimizers().values():
        for group in groups_of(summary):
            if isinstance(group.get("params"), list):
                known = True
                held.update(str(n) for n in group["params"])
    for name, p in run.parameters().items():
        if p.get("in_optimizer") is not None:
            known = True
            if p["in_optimizer"]:
                held.add(name)
    return held if known else None


def trained_parameters(run: Run) -> list[str]:
    """The model's parameters that require gradients, as meta.json's model summary lists
    them ([] where it holds none)."""
    return [name for name, p in run.parameters().items() if p.get("requires_grad", True)]


def _lr_moves_the_model(run: Run, finding: Finding) -> Verdict:
    if finding.evidence.get(LR_KNOWN) is False:  # its fix already says that no LR is known
        return HOLDS
    if without_optimizer(run):
        return contradicted("the run was recorded without an optimizer object (meta.json "
                            "optimizers {}), so no learning rate is known")
    held = held_parameters(run)
    if held is None:
        if _lr_scalars(run) or run.meta.get("optimizer"):
            return HOLDS
        return unknown("the optimizer and its learning rate",
                       "the optimizer was not given to the Recorder: pass "
                       "Recorder(optimizer=...)")
    trained = trained_parameters(run)
    if trained and not held & set(trained):
        return contradicted(f"no optimizer holds any of the model's {len(trained)} trained "
                            f"parameters (such as '{trained[0]}'), so no optimizer's learning "
                            "rate moves them")
    return HOLDS


LR_MOVES_THE_MODEL = Premise("the optimizer's learning rate moves the model's weights",
                             _lr_moves_the_model)
