"""vanishing-gradients: some layers receive orders of magnitude less gradient than the rest.

What it detects
    First, the contract of backpropagation through a deep stack: each layer's gradient relative
    to its weights (||grad|| / ||weight||, medians over the first half of the recorded steps) in
    the model's layer order (the order its parameters were registered in, the input first). When
    that ratio falls by at least `fall` from each layer to the one before it over `min_chain` or
    more consecutive layers, and by `1 / ratio` or more over the chain, the gradient shrinks
    geometrically on its way to the input: the finding names the chain's input half, its fall
    per layer, and what explains it: the model's Sigmoid/Tanh modules and the outputs recorded
    as saturated. A healthy net shows a step at its head and a flat profile below it; the ratio
    is free of the layers' widths and of the loss's scale.
    Then, for each weight matrix or kernel, the typical gradient size per element (gradient norm
    / sqrt(numel), median over the later `1 - settle` of the recorded steps, so that the first
    steps' transients do not count). A layer is flagged when that is below `ratio` times the
    largest layer's value (or below the absolute `floor`) and below `median_ratio` times the
    median layer's. Layers whose gradients are exactly zero are left to frozen-parameters. The
    finding names the layers and gives their ratio to the largest and to the median layer.

Why it matters
    Layers that get almost no gradient barely learn: in deep sigmoid/tanh stacks or badly
    initialized nets the first layers stay near their random initialization while the last
    layer does all the work, and the model underfits.

Example
    In a 10-layer sigmoid MLP, `layers.0.weight` receives 3e-09 per element against 0.004 for
    `layers.9.weight` (ratio 7e-07).

How to fix
    Use ReLU-family activations, add BatchNorm/LayerNorm or residual connections, and use a
    fitting initialization (Kaiming for ReLU, Xavier for tanh).

False positives
    Embeddings and other sparsely used parameters receive small gradients per element by
    design; their ratio is rarely below 1e-3. A transformer's attention query/key weights get
    tiny gradients at initialization, while attention is still uniform, and a classifier head
    can get far larger ones than every other layer: hence the median test and the settling
    period. Biases and normalization scales are not judged. Under Adam the early layers of a
    chain still move (Adam divides by the gradients' scale), but slowly and on noise: the
    chain is judged on the gradients, not on the updates. A net whose profile is flat below
    its head (ReLU with the default initialization, residual or normalized nets) has no
    chain; a layer that starts at zero weights has no ratio and breaks the chain.
    A layer whose outputs a BatchNorm normalizes right after (the next module in the model's
    order, over as many features as the layer has outputs) is not judged by the size test:
    the norm divides out its weights' scale, so its gradient shrinks as 1 / ||w|| and, with
    one input feature (Morvan's BatchNorm regression net), is zero up to the norm's eps: its
    size carries no meaning of depth.
    Only layers before the largest one in the model's order count as starved: a layer nearer
    the loss gets its gradient first, and when that is tiny the loss is flat there (a softmax
    saturated by blown-up weights), which no depth explains.
    Layers held by different players (an actor and a critic, a generator and a
    discriminator) are judged apart, each against its own: each optimizer steps on its own
    loss, and their recorded grads are no one backward pass through one stack. Several
    optimizers stepping on one loss (one backward pass between steps: `several_players`) are
    one stack, judged whole. Parallel branches of one model (top-level modules that each
    begin with a Linear layer reading the model's recorded input, as a policy net and a value
    net over the same state) are judged apart too: the gradient of one never passes through
    the other, so a layer of the policy is not 'before' the value net's last layer, and a
    policy driven to a saturated softmax (a deterministic policy, whose log-probabilities
    carry almost no gradient) gets far less gradient than the value net without any depth.
    A diverging run is judged only up to its first non-finite gradient, and not at all when a
    layer's median gradient norm exceeds `max_reference`: the gap then comes from an exploding
    layer, which exploding-gradients reports.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from tracelab.analyzers._batches import BATCH_NORMS, POOLED_BATCH_NORMS
from tracelab.analyzers._dynamics import (OUTCOME, fmt, layer_of, matrix_params, name_list,
                                          param_shapes, subject_of)
from tracelab.analyzers._learning_rate import groups_of, several_players
from tracelab.core import causes
from tracelab.core.causes import explains
from tracelab.core.findings import WARNING, Finding
from tracelab.core.rules import Plot, rule
from tracelab.core.run import Run
from tracelab.core.schema import ACTIVATION, GRAD, WEIGHT, Needs

# Activations whose derivative is at most 1 everywhere and near 0 away from the centre.
SQUASHING = frozenset({"Sigmoid", "Tanh", "Hardsigmoid", "Hardtanh", "Softsign", "LogSigmoid"})


@rule(name="vanishing-gradients", code="TL201", requires=(Needs.GRADS,), plot=Plot.GRADIENT_LAYERS,
      links=(explains("update-ratio", "frozen-parameters",
                      why="layers without gradient barely move", timing="overlap",
                      place="downstream", when=causes.low_updates),
             explains(*OUTCOME, why="layers that get no gradient do not learn", timing="overlap")))
def vanishing_gradients(run: Run, *, ratio: float = 1e-3, median_ratio: float = 1e-2,
                        floor: float = 1e-9, settle: float = 0.5, max_reference: float = 100.0,
                        fall: float = 2.0, min_chain: int = 4,
                        min_steps: int = 3) -> list[Finding]:
    norms = run.stat(GRAD, "norm")
    numel = run.numel(GRAD)
    names = matrix_params(run, norms.columns)
    if len(norms) < min_steps or not names:
        return []
    # A diverged run is judged up to its first non-finite gradient: after that it is garbage.
    broken = ~np.isfinite(norms[names].to_numpy()).all(axis=1)
    if broken.any():
        norms = norms.iloc[:int(np.argmax(broken))]
    if len(norms) < min_steps:
        return []
    steps = (int(norms.index[0]), int(norms.index[-1]))
    findings = []
    for group in _one_loss_each(run, names):
        findings += _judge(run, norms, numel, group, steps, ratio=ratio,
                           median_ratio=median_ratio, floor=floor, settle=settle,
                           max_reference=max_reference, fall=fall, min_chain=min_chain,
                           min_steps=min_steps)
    return findings


def _one_loss_each(run: Run, names: list[str]) -> list[list[str]]:
    """`names` split by the optimizer that holds them (meta.json's optimizers), in the model's
    order: each optimizer steps its parameters on its own loss (an actor's policy loss, a
    critic's value loss, a generator's and a discriminator's), and the recorded grads of each
    are those of its last backward, so the grads of two optimizers' layers are no one
    backward pass through one stack: neither their sizes nor a fall from one to the other
    says how far a gradient travelled. The parameters no optimizer names join the largest
    group; with one optimizer, or none recorded, one group. Several optimizers that step on
    ONE loss (`several_players` false: one backward pass between steps, as Muon with AdamW or
    an encoder's and a decoder's optimizer) hold one backward pass's grads: one group."""
    groups: dict[str, list[str]] = {}
    owner = {}
    for key, summary in run.optimizers().items():
        for group in groups_of(summary):
            params = group.get("params")
            for n in params if isinstance(params, list) else ():
                owner.setdefault(str(n), str(key))
    for name in names:
        groups.setdefault(owner.get(name, ""), []).append(name)
    if len([k for k in groups if k]) < 2 or not several_players(run):
        return parallel_branches(run, list(names))
    loose = groups.pop("", [])
    if loose:
        max(groups.values(), key=len).extend(loose)
    order = {n: i for i, n in enumerate(names)}
    return [sorted(g, key=order.__getitem__) for g in groups.values()]


def parallel_branches(run: Run, names: list[str]) -> list[list[str]]:
    """`names` split by the model's parallel branches: top-level modules (`actor`, `critic`)
    that each hold two weight matrices or more and each begin with a Linear layer reading the
    model's input (its in_features equal to the recorded input width, the same for every
    branch). Such branches (a policy and a value net over the same state) are no chain: the
    gradient of one never passes through the other, so a layer of one is not 'before' the
    other's largest layer, and each is judged against its own layers. The parameters no
    branch holds join the largest one; without two such branches, or without a recorded
    input width, one group."""
    width = _input_width(run)
    kinds, shapes = run.module_types(), param_shapes(run)
    branches: dict[str, list[str]] = {}
    for name in names:
        branches.setdefault(name.split(".")[0] if "." in name else "", []).append(name)
    loose = branches.pop("", [])
    firsts = {b: ms[0] for b, ms in branches.items()}
    if (width is None or len(branches) < 2 or any(len(ms) < 2 for ms in branches.values())
            or any(kinds.get(layer_of(n)) != "Linear" or len(shapes.get(n, ())) != 2
                   or shapes[n][1] != width for n in firsts.values())):
        return [list(names)]
    groups = list(branches.values())
    max(groups, key=len).extend(loose)
    order = {n: i for i, n in enumerate(names)}
    return [sorted(g, key=order.__getitem__) for g in groups]


def _input_width(run: Run) -> int | None:
    """How many features the model's one input has (`feature[k]` in the recorded inputs of
    the train split), else None (several inputs, none recorded)."""
    inputs = run.inputs
    if not len(inputs) or not {"split", "feature"} <= set(inputs.columns):
        return None
    feats = {str(f) for f in inputs.loc[inputs["split"] == "train", "feature"].unique()}
    if not feats or not all(f.startswith("feature[") and f.endswith("]") for f in feats):
        return None
    return len(feats)


def _judge(run: Run, norms: pd.DataFrame, numel: pd.Series, names: list[str],
           steps: tuple[int, int], *, ratio: float, median_ratio: float, floor: float,
           settle: float, max_reference: float, fall: float, min_chain: int,
           min_steps: int) -> list[Finding]:
    """The depth chain, else the size test, over the layers `names` (one optimizer's)."""
    chain = _depth_chain(run, norms, names, settle, fall, min_chain, 1 / ratio, min_steps)
    if chain is not None:
        return [_chain_finding(run, chain, steps, len(names))]
    norms = norms.iloc[min(int(len(norms) * settle), len(norms) - min_steps):]
    rms = (norms[names] / np.sqrt(numel[names])).median()
    rms = rms[np.isfinite(rms) & (rms > 0)]
    if rms.empty or float(norms[names].median().max()) > max_reference:
        return []  # the gap comes from an exploding layer: exploding-gradients reports it
    top = float(rms.max())
    middle = float(rms.median())
    low = rms[((rms < ratio * top) | (rms < floor)) & (rms < median_ratio * middle)]
    # A gradient vanishes on its way back: a layer past the largest one, nearer the loss, gets
    # its gradient first, and when that is tiny the loss is flat there (saturated outputs).
    order = list(rms.index)
    low = low[[order.index(n) < order.index(rms.idxmax()) for n in low.index]]
    # A layer whose outputs a BatchNorm normalizes right after has no scale of its own: the
    # normalization divides out its weights' size and removes the gradient along them.
    low = low.drop(index=[n for n in normalized_away(run, list(low.index))])
    if low.empty:
        return []
    worst = str(low.idxmin())
    return [vanishing_gradients.finding(
        WARNING, subject_of(list(low.index)), steps,
        f"{len(low)} of {len(rms)} layers get vanishing gradients ({name_list(list(low.index))})"
        f": '{worst}' receives {fmt(low[worst])} per element, {fmt(low[worst] / top)}x the "
        f"largest layer '{rms.idxmax()}' ({fmt(top)}) and {fmt(low[worst] / middle)}x the "
        f"median layer.",
        {"layers": len(low), "of_layers": len(rms), "worst_grad_rms": float(low[worst]),
         "largest_grad_rms": top, "median_grad_rms": middle,
         "ratio_to_largest": float(low[worst] / top)},
        "Use ReLU-family activations, BatchNorm or residual connections, and Kaiming/Xavier "
        "initialization for the named layers.")]


def _depth_chain(run: Run, norms: pd.DataFrame, names: list[str], settle: float, fall: float,
                 min_chain: int, span: float, min_steps: int) -> pd.Series | None:
    """The longest run of consecutive layers, in the model's order (the input first), whose
    ||grad|| / ||weight|| falls by `fall` or more from each layer to the one before it, over
    `min_chain` layers or more and by `span` or more in all: their ratios, else None. A
    ratio that falls toward the output is a small-initialized head (a policy's last layer),
    not a gradient that vanishes on its way back."""
    early = norms.iloc[:max(int(len(norms) * (1 - settle)), min_steps)]
    weights = run.stat(WEIGHT, "norm")
    weights = weights.loc[weights.index <= early.index[-1]] if len(weights) else weights
    known = [n for n in names if n in weights.columns]
    if len(known) < min_chain:
        return None
    with np.errstate(invalid="ignore", divide="ignore"):
        rel = early[known].median() / weights[known].median()
    rel = rel.where(np.isfinite(rel) & (rel > 0))
    best: list[str] = []
    run_: list[str] = [known[0]]
    for prev, name in zip(known, known[1:]):
        if rel[prev] == rel[prev] and rel[name] == rel[name] and rel[name] >= fall * rel[prev]:
            run_.append(name)
        else:
            run_ = [name]
        if len(run_) > len(best):
            best = list(run_)
    if len(best) < min_chain or rel[best[-1]] < span * rel[best[0]]:
        return None
    return rel[best]


def _chain_finding(run: Run, chain: pd.Series, steps: tuple[int, int], of: int) -> Finding:
    names = list(chain.index)
    starved = [n for n in names if chain[n] < np.sqrt(chain.iloc[0] * chain.iloc[-1])]
    per_layer = float((chain.iloc[-1] / chain.iloc[0]) ** (1 / (len(chain) - 1)))
    worst, top = names[0], names[-1]
    kinds = run.module_types()
    squash = [path for path, kind in kinds.items() if kind in SQUASHING]  # the model's order
    saturated = _saturated(run)
    why = ""
    if squash:
        why = (f"; the model holds {len(squash)} squashing activation(s) "
               f"({name_list(squash)}: {', '.join(sorted({kinds[m] for m in squash}))}"
               "), whose derivative is at most 0.25 (sigmoid) or 1 (tanh) and shrinks further "
               "off-centre")
    if len(saturated):
        why += (f"; {name_list(list(saturated.index))} hold {fmt(100 * float(saturated.max()))}% "
                "of their outputs at a bound, where their gradient is near zero")
    return vanishing_gradients.finding(
        WARNING, subject_of(starved), steps,
        f"Gradients vanish on their way back through {len(names)} layers ({name_list(names)}): "
        f"each layer's gradient relative to its weights is about {fmt(per_layer)}x smaller "
        f"than the next one's, so '{worst}' gets {fmt(chain[worst] / chain[top])}x the "
        f"ratio of '{top}' ({fmt(chain[worst])} against {fmt(chain[top])}){why}.",
        {"layers": len(starved), "of_layers": of, "chain": names,
         "fall_per_layer": per_layer, "ratio_to_largest": float(chain[worst] / chain[top]),
         "worst_grad_to_weight": float(chain[worst]), "largest_grad_to_weight": float(chain[top]),
         "squashing": squash, "saturated": {k: float(v) for k, v in saturated.items()}},
        "Use ReLU-family activations in place of sigmoid/tanh between the named layers, add "
        "BatchNorm/LayerNorm or residual connections, and use Kaiming/Xavier initialization.")


def _saturated(run: Run, share: float = 0.5) -> pd.Series:
    """Modules whose median recorded saturation (Sigmoid/Tanh outputs at a bound) is `share`
    or more: what explains a geometric fall."""
    t = run.tensors
    if not len(t) or "saturated_frac" not in t.columns or "kind" not in t.columns:
        return pd.Series(dtype=float)
    act = t[(t["kind"] == ACTIVATION) & t["saturated_frac"].notna()]
    if not len(act):
        return pd.Series(dtype=float)
    frac = act.groupby("name")["saturated_frac"].median()
    return frac[frac >= share].sort_values(ascending=False)


def normalized_away(run: Run, names: list[str]) -> list[str]:
    """The weights among `names` whose layer's outputs a BatchNorm normalizes right after: the
    next module in the model's order (its registration order, as nn.Sequential and the usual
    conv-bn blocks write it) is a BatchNorm over as many features as the layer has outputs.
    Such a layer is scale-invariant: its output after the norm does not change when its
    weights are scaled, so its gradient is orthogonal to them and scales with 1 / ||w|| (and
    for a layer with one input feature is zero up to the norm's eps): its size says nothing
    of how much gradient reaches it."""
    mods = [m for m in run.modules() if isinstance(m, dict) and m.get("path")]
    shapes = param_shapes(run)
    after = {str(m["path"]): n for m, n in zip(mods, mods[1:])}
    found = []
    for name in names:
        norm = after.get(layer_of(name))
        shape = shapes.get(name)
        if (norm is not None and norm.get("type") in BATCH_NORMS | POOLED_BATCH_NORMS
                and shape is not None and len(shape) >= 2
                and _features(norm, shapes) == shape[0]):
            found.append(name)
    return found


def _features(norm: dict, shapes: dict[str, tuple[int, ...]]) -> int | None:
    """How many features a BatchNorm module normalizes: its scale's length, else the first
    number of its repr ("10, eps=1e-05, ...")."""
    shape = shapes.get(f"{norm['path']}.weight")
    if shape is not None and len(shape) == 1:
        return shape[0]
    head = str(norm.get("extra_repr") or "").split(",")[0].strip()
    return int(head) if head.isdigit() else None
