"""frozen-parameters: parameters that require grad, yet never change during training.

What it detects
    Parameters with `requires_grad=True` whose recorded weight statistics (norm, mean, min, max)
    stay the same, within `rtol`, from the first to the last recorded step (or whose recorded
    updates are all zero), while other parameters do change. The cause is named: the parameter
    is missing from the optimizer's param groups, or its gradients are None or zero (detached,
    unused in the forward pass, or dead units downstream), or its group's learning rate is
    zero. Where its optimizer's step pre-hook recorded a grad norm of 0 on every one of its
    steps (`grad_norm/step`), the loss that optimizer steps on does not reach it (a
    generator's samples detached in its own step), even where other players' backward passes
    left gradients on it. Parameters with the same cause make one finding naming their modules; parameters
    whose gradients are negligible against their weights (a bias before BatchNorm) are only
    noted at info level, and so are those the loss is invariant to (an exactly zero gradient
    on a whole sub-layer while the rest of its module trains, or on a bias while its weight
    trains).
    Parameters with `requires_grad=False` are frozen by mistake when they still hold a random
    initialization: the recorder summarizes each frozen parameter's first 65,536 values at the
    start of the run and at its end (meta.json `model.parameters[*].values`,
    `frozen_at_close`), and a parameter whose summary did not change and reads as an i.i.d.
    draw centred on 0 (at least `min_values` values; mean, spread, mean absolute value and both
    extremes within `z` standard errors, or a one-in-a-million chance, of a uniform law's, or
    of the N(0, 1) an Embedding draws by default, or of a normal law of a named init scale --
    0.02, the run config's initializer_range, 1/sqrt(fan_in) -- where the module's bias, frozen
    too, is still exactly zero: BERT's N(0, 0.02), timm's trunc_normal_ with zeros_) is a
    warning: a fixed random projection
    learns nothing, where a layer frozen on purpose holds pretrained weights. A draw that
    keeps its input's information, with trained layers after it, is only noted at info level:
    an Embedding with no more rows than dimensions (a Linear on the one-hot token), a Linear at
    least as wide as its input, a convolution with at least as many output channels as values
    in an input patch, or their biases, is a random feature map the later layers learn from;
    a bottleneck or a frozen output layer stays a warning.

Why it matters
    A silently frozen layer trains nothing while the loss still falls through the other layers:
    a decoder LayerNorm frozen by mistake, or a head added after the optimizer was built, gives
    a model that looks trained and behaves badly (outputs that repeat the same token).

Example
    `head.weight` and `head.bias` never change in 500 steps; neither is in the optimizer.
    `encoder.weight`, made with `nn.Embedding.from_pretrained(torch.empty(50, 32).uniform_(
    -0.1, 0.1))` (freeze=True by default), is uniform within +-0.1 from start to end.

How to fix
    Build the optimizer after the model is complete, from `model.parameters()` (or add the
    missing parameters to a param group); make sure the module is used in the forward pass and
    its output is not detached. A layer frozen at its random init: load its pretrained weights
    before freezing it, or train it (`from_pretrained(w, freeze=False)`).

False positives
    Parameters frozen with `requires_grad=False` are judged only by the random-initialization
    check: pretrained weights (a fine-tuned backbone, GloVe embeddings) are not a sharp-edged
    uniform draw nor N(0, 1), and frozen copies that change (an EMA teacher, an RL target
    network) are not judged, nor is a frozen network whose output is the recorded targets
    (Random Network Distillation's random target, orthogonal with zero biases: one of its
    modules' activation minimum and maximum equal the targets' at every common recorded step).
    A random layer frozen on purpose (random features, a fixed random
    classifier) is reported; a briefly pretrained layer with normally spread weights (training
    moves its bias off zero too), a normal init other than an Embedding's default in a module
    whose bias is not exactly zero (or that has none), or a run never closed (no
    `frozen_at_close`) is not. An info note explains no loss-plateau or metric-stagnation: where such a run fails,
    a contract violation is named first. A module with no gradient at all (None) whose output
    is not what enters the loss (no recorded output shape of it equals the shape of the
    outputs given to step(): a ResNet's fc computed while BYOL reads the penultimate layer
    through a hook), in a run whose loss falls by 3 % or more, costs the run nothing: info.
    An output layer whose result enters the loss detached stays a warning.
    Without a model summary, only parameters with recorded gradients are judged. When
    no parameter changes at all, loss-plateau names the cause instead.
    With several optimizers (a GAN's generator and critic), the gradients read at step() are
    those of the last backward pass, not necessarily the ones the parameter's own optimizer
    stepped on (`grad_norm/step/<optimizer>`): a critic's output bias cancels in its own loss
    (zero gradient, no change) yet gets a gradient from the generator's backward. A parameter
    whose group's recorded learning rate is positive, in an optimizer that moves others of its
    parameters, is then only noted at info level.
    A gradient recorded as exactly zero, not None, means the backward pass reached the
    parameter (an unused or detached module gets None). The loss does not depend on a bias
    whose gradient is zero while its weight's is not (a Siamese or triplet network's output
    bias cancels in the distance between two passes through the shared net), nor on a whole
    sub-layer, weight and bias, with zero gradients while the rest of its module trains (only
    the reverse direction of a bidirectional RNN's last layer reaches hidden[-1]); that is only
    noted at info level (the classifier dead-units and target-problems read too, _unread). A
    weight with zero gradients beside a training bias has a zero input (dead units before it,
    features that are all zero) and a whole module with zero gradients (dead units downstream,
    an output multiplied by zero) a blocked gradient: both stay warnings.
    Parameters no optimizer holds that are half or more of the model's trainable elements, all
    run before the optimized ones and hold no fresh random draw (their first recorded weight
    statistics are not their module's default initialization's, as checked for requires_grad=
    False above) are a backbone frozen by leaving it out of the optimizer (linear probing, a
    fine-tuned head), as param-not-in-optimizer judges them: info; a head or an embedding left
    out, or a "backbone" at its random init (an encoder forgotten when the optimizer was built
    from the decoder), is a warning.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from tracelab.analyzers._dynamics import OUTCOME, fmt, layer_of, name_list, \
    subject_of, weights_unchanged
from tracelab.analyzers._init_draw import init_scales, keeps_information, random_draw, \
    read_after
from tracelab.analyzers._learning_rate import groups_of, lr_name, optimizers_holding
from tracelab.analyzers._left_out import frozen_backbone
from tracelab.analyzers._slow_updates import NOT_LEARNING, loss_fall
from tracelab.analyzers._unread import off_the_loss, unread_parameters
from tracelab.core.causes import cause_is_stated, explains
from tracelab.core.findings import INFO, WARNING, Finding
from tracelab.core.rules import Plot, rule
from tracelab.core.run import Run
from tracelab.core.schema import ACTIVATION, GRAD, GRAD_NORM_STEP, WEIGHT, Needs


@rule(name="frozen-parameters", code="TL205", requires=(Needs.WEIGHTS,), merge="module group",
      plot=Plot.WEIGHT_CHANGE,
      links=(explains(*OUTCOME, why="parameters that never change do not learn",
                      timing="overlap", when=cause_is_stated),))
def frozen_parameters(run: Run, *, rtol: float = 1e-7, negligible: float = 1e-6,
                      min_steps: int = 3, z: float = 5.0, min_values: int = 1000
                      ) -> list[Finding]:
    norms = run.stat(WEIGHT, "norm")
    if len(norms) < min_steps:
        return []
    info = run.parameters()
    findings = _at_random_init(run, info, norms, rtol, z, min_values)
    grads = run.stat(GRAD, "norm")
    if info:
        trainable = [n for n in norms.columns if info.get(n, {}).get("requires_grad", True)]
    else:
        trainable = [n for n in norms.columns if n in grads.columns]
    still = [n for n in trainable if weights_unchanged(run, n, rtol)]
    if not still or len(still) == len(trainable):
        return findings
    first, last = int(norms.index[0]), int(norms.index[-1])
    # One finding per cause, naming the modules: a dead network should not give one per layer.
    by_cause: dict[tuple, list[str]] = {}
    players = optimizers_holding(run)
    # A zero gradient the loss is invariant to (an unread sub-layer, a bias that cancels):
    # one classifier with dead-units and target-problems. A weight at zero beside a training
    # bias is not among them: its input is zero.
    invariant = unread_parameters(run)
    backbone = frozen_backbone(run, info, [n for n in still if info.get(n, {}).get(
        "in_optimizer") is False], trainable)
    fall = loss_fall(run)
    learns = fall is not None and fall >= NOT_LEARNING
    for name in still:
        scale = float(norms[name].median())
        own_lr = _own_lr(run, name, still) if players >= 2 else None
        unread = learns and off_the_loss(run, layer_of(name))
        by_cause.setdefault(_cause(name, info, grads, scale, negligible, own_lr,
                                   name in invariant, backbone, unread,
                                   _stepped_on_nothing(run, name)),
                            []).append(name)
    for (severity, cause, fix), params in by_cause.items():
        modules = list(dict.fromkeys(layer_of(p) for p in params))
        findings.append(frozen_parameters.finding(
            severity, subject_of(modules), (first, last),
            f"{'Parameter' if len(params) == 1 else 'Parameters'} {name_list(params)} "
            f"{'requires' if len(params) == 1 else 'require'} grad but never changed over "
            f"{len(norms)} recorded steps ({first}-{last}) while {len(trainable) - len(still)} "
            f"other parameters did; {cause}.",
            {"parameters": len(params), "modules": len(modules), "steps": len(norms),
             "grad_norm_max": _grad_max(grads, params),
             "changing_parameters": len(trainable) - len(still)},
            fix))
    return findings


def _at_random_init(run: Run, info: dict, norms, rtol: float, z: float,
                    min_values: int) -> list[Finding]:
    """One finding naming the parameters with requires_grad=False that hold, unchanged from
    the start to the end of the run, what a random initialization draws."""
    end = run.meta.get("frozen_at_close")
    if not isinstance(end, dict):
        return []
    drawn, types = {}, run.module_types()
    makers = _target_makers(run, info)
    for name, entry in info.items():
        start, stop = entry.get("values"), end.get(name)
        if entry.get("requires_grad") is not False or not isinstance(start, dict) or \
                not isinstance(stop, dict) or not _same(start, stop, rtol):
            continue  # trained, or changed all the same (an EMA teacher, a target network)
        if name in makers:
            continue  # a target network frozen on purpose: its output is the targets (RND)
        scales = init_scales(types.get(layer_of(name)))
        if _zero_bias(info, end, layer_of(name), rtol):
            # Its module's bias is still exactly zero: nothing trained this layer, so a normal
            # spread of a named init scale is its initialization (BERT's N(0, 0.02), timm's
            # trunc_normal_(std=.02), LeCun's 1/sqrt(fan_in)); not the tensor's own spread,
            # which any normal-looking layer (an orthogonal init) would match.
            scales = [*scales, *_named_scales(run, entry.get("shape"))]
        law = random_draw(start, scales, z, min_values)
        if law:
            drawn[name] = law
    if not drawn:
        return []
    trained = [n for n, p in info.items() if p.get("requires_grad") is True]
    # A draw that keeps its input's information, with trained layers after it, is a random
    # feature map they learn from: a note, which explains no failure.
    features = [n for n in drawn if keeps_information(types.get(layer_of(n)), info[n].get(
        "shape")) and read_after(run, n, trained)]
    steps = _span(run, norms)
    findings = []
    for severity, params in ((WARNING, [n for n in drawn if n not in features]),
                             (INFO, features)):
        if params:
            findings.append(_drawn_finding(severity, params, drawn, trained, steps))
    return findings


def _drawn_finding(severity, params: list[str], drawn: dict, trained: list[str],
                   steps: tuple[int, int]) -> Finding:
    modules = list(dict.fromkeys(layer_of(p) for p in params))
    one = len(params) == 1
    laws = ", ".join(f"{n}: {drawn[n]}" for n in params[:3])
    said = (f"{'Parameter' if one else 'Parameters'} {name_list(params)} "
            f"{'has' if one else 'have'} requires_grad=False and {'holds' if one else 'hold'} "
            f"what a random initialization draws ({laws}), unchanged from the start of the run "
            f"to its end, while {len(trained)} other parameters train")
    if severity is INFO:
        return frozen_parameters.finding(
            INFO, subject_of(modules), steps,
            f"{said}: a fixed random feature map that keeps its input's information (at least "
            "as wide as its input: an Embedding with no more rows than dimensions, a Linear "
            "with out_features >= in_features), which the trained layers after it learn "
            "from. Pretrained weights were meant here if the original loads them.",
            {"parameters": len(params), "modules": len(modules), "subjects": modules,
             "cause": "frozen_at_init", "keeps_information": True,
             "trained_parameters": len(trained)},
            "Nothing to fix if random features are intended; otherwise load the pretrained "
            "weights before freezing these layers, or train them.")
    return frozen_parameters.finding(
        WARNING, subject_of(modules), steps,
        f"{said}: a fixed random projection that nothing learns. Frozen on purpose, a layer "
        "holds pretrained weights; these are frozen by mistake (Embedding.from_pretrained's "
        "freeze=True, requires_grad=False set on the wrong layers) or their weights were "
        "never loaded.",
        {"parameters": len(params), "modules": len(modules), "subjects": modules,
         "cause": "frozen_at_init", "trained_parameters": len(trained)},
        "Load the pretrained weights before freezing these layers, or train them: "
        "requires_grad_(True) (nn.Embedding.from_pretrained(w, freeze=False)) and the "
        "parameters in the optimizer.")


def _zero_bias(info: dict, end: dict, module: str, rtol: float) -> bool:
    """Whether `module`'s bias is frozen (requires_grad=False), unchanged from the start of the
    run to its end and exactly zero in every summarized value: the constant a Linear's or a
    convolution's bias is initialized to by the usual init functions (BERT's, timm's, a
    zeros_ after a normal_), which any training moves, pretraining included."""
    entry, name = info.get(module + ".bias"), module + ".bias"
    if not isinstance(entry, dict) or entry.get("requires_grad") is not False:
        return False
    start, stop = entry.get("values"), end.get(name)
    if not isinstance(start, dict) or not isinstance(stop, dict) or not _same(start, stop, rtol):
        return False
    try:
        return float(start["numel"]) >= 1 and all(
            float(start[k]) == 0 for k in ("mean", "std", "min", "max"))
    except (KeyError, TypeError, ValueError):
        return False


def _named_scales(run: Run, shape) -> list[float]:
    """The standard deviations a normal initialization of a weight of this shape is drawn
    with by name: 0.02 (BERT's and GPT-2's initializer_range, timm's trunc_normal_), the run
    config's `initializer_range`, and 1/sqrt(fan_in) (LeCun's normal)."""
    scales = [0.02]
    config = run.meta.get("config")
    if isinstance(config, dict) and _positive(config.get("initializer_range")):
        scales.append(float(config["initializer_range"]))
    try:
        dims = [int(d) for d in shape]
    except (TypeError, ValueError):
        return scales
    fan_in = math.prod(dims[1:]) if len(dims) >= 2 else 0
    return [*scales, 1 / math.sqrt(fan_in)] if fan_in >= 1 else scales


def _target_makers(run: Run, info: dict, rtol: float = 1e-6) -> set[str]:
    """The frozen parameters of a network whose output is the recorded targets (Random Network
    Distillation's fixed random target, a frozen teacher whose output is regressed onto): a
    module whose recorded activation minimum and maximum equal those of a target tensor given
    to step() at every one of at least 2 common steps makes the targets, and the parameters of
    its largest enclosing module that trains none are that network's. Empty where the facts
    are missing; never raises."""
    try:
        batches = run.batches
        rows = batches[(batches["role"] == "target") & (batches["split"] == "train")]
        if rows.empty:
            return set()
        lows, highs = run.stat(ACTIVATION, "min"), run.stat(ACTIVATION, "max")
        makers = set()
        for _, target in rows.groupby("name"):
            target = target.drop_duplicates("step", keep="last").set_index("step")
            for module in lows.columns:
                if module not in highs.columns:
                    continue
                both = target.join(pd.DataFrame({"lo": lows[module], "hi": highs[module]}),
                                   how="inner").dropna(subset=["lo", "hi", "min", "max"])
                if len(both) >= 2 and np.allclose(both["lo"], both["min"], rtol=rtol, atol=0) \
                        and np.allclose(both["hi"], both["max"], rtol=rtol, atol=0):
                    makers.add(str(module))
        frozen = set()
        for module in makers:
            parts = str(module).split(".")
            for depth in range(1, len(parts) + 1):  # the largest enclosing module first
                prefix = ".".join(parts[:depth]) + "."
                held = [n for n in info if n.startswith(prefix)]
                if held and all(info[n].get("requires_grad") is False for n in held):
                    frozen.update(held)
                    break
        return frozen
    except Exception:  # malformed trace: nothing to say
        return set()


def _positive(x) -> bool:
    try:
        return math.isfinite(float(x)) and float(x) > 0
    except (TypeError, ValueError):
        return False


def _span(run: Run, norms) -> tuple[int, int]:
    loss = run.loss().dropna()
    index = loss.index if len(loss) else norms.index
    return int(index[0]), int(index[-1])


def _same(a: dict, b: dict, rtol: float) -> bool:
    try:
        return all(abs(float(b[k]) - float(a[k])) <= rtol * max(abs(float(a[k])), 1e-30)
                   for k in ("numel", "mean", "std", "min", "max"))
    except (KeyError, TypeError, ValueError):
        return False


def _stepped_on_nothing(run: Run, name: str) -> tuple[str, int] | None:
    """("optimizer 'K'" or "the optimizer", its recorded steps) where the optimizer holding
    `name` recorded its step pre-hook's grad norm (`grad_norm/step`) at least twice and 0
    every time: every step it took used no gradient. None otherwise, or where no recorded
    optimizer lists `name`."""
    optimizers = run.optimizers()
    for key, summary in optimizers.items():
        held = {str(p) for g in groups_of(summary) for p in (g.get("params") or ())}
        if name not in held:
            continue
        signal = GRAD_NORM_STEP if len(optimizers) == 1 else f"{GRAD_NORM_STEP}/{key}"
        used = run.signal(signal).to_numpy(dtype=float, na_value=np.nan)
        used = used[~np.isnan(used)]
        if len(used) >= 2 and not (used != 0).any():
            return ("the optimizer" if len(optimizers) == 1 else f"optimizer '{key}'",
                    len(used))
        return None
    return None


def _grad_max(grads, params) -> float:
    """The largest recorded gradient norm of `params` (NaN when none was recorded)."""
    cols = [p for p in params if p in grads.columns]
    peaks = grads[cols].max().dropna().to_numpy(dtype=float) if cols else np.array([])
    peaks = peaks[np.isfinite(peaks)]
    return float(peaks.max()) if peaks.size else float("nan")


def _own_lr(run: Run, name: str, still: list[str]) -> float | None:
    """The smallest learning rate recorded for the param group that holds `name` (its `lr/`
    scalar, else meta.json's group `lr`), where its optimizer steps: some other parameter it
    holds changed (not in `still`). None where no group lists it, its optimizer moved none of
    its parameters (a missing optimizer.step()) or no LR is known."""
    optimizers = run.optimizers()
    for key, summary in optimizers.items():
        groups = groups_of(summary)
        held = {str(p) for g in groups for p in (g.get("params") or ())}
        if name in held and not held - set(still) - {name}:
            return None  # none of its optimizer's parameters moved: that optimizer never steps
        for index, group in enumerate(groups):
            if name not in map(str, group.get("params") or ()):
                continue
            values = run.scalar(lr_name(key, index, len(optimizers))).to_numpy(
                dtype=float, na_value=np.nan)
            values = values[np.isfinite(values)]
            if values.size:
                return float(values.min())
            try:
                lr = float(group.get("lr"))
            except (TypeError, ValueError):
                return None
            return lr if math.isfinite(lr) else None
    return None


def _cause(name: str, info: dict, grads, scale: float, negligible: float,
           own_lr: float | None = None, invariant: bool = False,
           backbone: bool = False, unread: bool = False,
           no_gradient: tuple[str, int] | None = None) -> tuple:
    """(severity, cause, fix) of one parameter that never changed; `own_lr` is its param
    group's smallest learning rate where the run has several optimizers (None otherwise);
    `invariant`: the loss does not depend on it (_unread); `backbone`: those no optimizer
    holds are most of the model, all run before the optimized ones and are no fresh draw;
    `unread`: the run learns and its module's output is not what enters the loss;
    `no_gradient`: (its optimizer, its recorded steps) where that optimizer's every recorded
    step ran on no gradient at all (_stepped_on_nothing)."""
    if info.get(name, {}).get("in_optimizer") is False and backbone:
        return (INFO, "the optimizer's param groups do not hold them, and they are most of "
                "the model and all run before the optimized parameters, as a backbone frozen "
                "by leaving it out of the optimizer is",
                "Freeze them with requires_grad_(False) (which also saves their backward), as "
                "a backbone frozen on purpose should be.")
    if info.get(name, {}).get("in_optimizer") is False:
        return (WARNING, "the optimizer's param groups do not hold them",
                "Build the optimizer after the model is complete, from model.parameters(), or "
                "add these parameters to a param group.")
    peak = _grad_max(grads, [name])
    if peak == 0 and invariant:
        # A recorded zero, not None: the backward pass reached them (an unused or detached
        # module gets no grad at all), and the rest of their sub-layer or module trains.
        return (INFO, "the gradients are exactly zero, not None, while other parameters of "
                "their module train: the backward pass reaches them and the loss does not "
                "depend on them, as with a bias that cancels in the difference of two passes "
                "through one shared network (a contrastive or triplet loss) or a direction of "
                "a bidirectional RNN whose output is discarded (only hidden[-1] used)",
                "Nothing to fix if that invariance is intended (or drop the parameter, e.g. "
                "bias=False); otherwise check what the module's output feeds.")
    if not peak >= 0 and unread:
        # No gradient ever, from a module whose output is not the loss's input, in a run
        # whose loss falls: a head computed and left unread costs the run nothing.
        return (INFO, "the gradients are never recorded (None) and the module's output is "
                "not what enters the loss, while the loss falls: a module computed but left "
                "unread (a classifier head whose penultimate features a hook feeds to the "
                "loss, a layer kept from the original model) costs the run nothing",
                "Nothing to fix if the module is not meant to be trained (drop it from the "
                "model or the optimizer); otherwise feed its output to the loss.")
    if no_gradient is not None:
        which, steps = no_gradient
        return (WARNING, f"{which} stepped with no gradient at all on each of its {steps} "
                "recorded steps (total grad norm 0 in its step pre-hook): the loss it steps "
                "on does not reach them, as when a .detach(), .data or torch.no_grad() cuts "
                "their path to it (a generator's samples detached in its own step)"
                + (", though other backward passes gave them gradients" if peak > 0 else ""),
                f"Keep the path from these parameters to the loss of {which} in the graph: "
                "remove the .detach() (or no_grad) in its step; detach only in the other "
                "player's step, where these parameters must not train.")
    if not peak > 0:
        what = "zero" if peak == 0 else "never recorded (None)"
        last = "dead units block the gradient downstream"
        if peak == 0:  # a weight beside a training bias: its input is zero
            last += ", or its input is zero (dead units before it, features all zero)"
        return (WARNING, f"the gradients are {what}: the module is unused in the forward "
                f"pass, its output is detached, or {last}",
                "Make sure the module is used in the forward pass and its output is not "
                "detached (no .detach(), .item() or torch.no_grad() on the way to the loss); "
                "see dead-units.")
    if peak < negligible * scale:
        return (INFO, "the gradients are negligible against the weights, too small to "
                "change float32 values: the loss hardly depends on them, as with a bias "
                "followed by a normalization layer or vanishing gradients",
                "Drop the redundant parameter (e.g. bias=False before BatchNorm) or ignore "
                "this note.")
    if own_lr is not None and own_lr > 0:
        return (INFO, f"their param group's learning rate is {fmt(own_lr)}, and the non-zero "
                "gradients read at step() need not be the ones their own optimizer used: with "
                "several optimizers, another player's backward (a generator's through the "
                "critic) fills them, while their own loss may not depend on them at all (a "
                "critic's output bias cancels in mean(real) - mean(fake))",
                "Nothing to fix if their own loss does not depend on them; otherwise check "
                "that their optimizer's loss reaches them.")
    return (WARNING, "the gradients are non-zero, so the param group's learning rate is "
            "zero or the optimizer skips the group",
            "Check the learning rate and the schedule of the param group holding these "
            "parameters.")
