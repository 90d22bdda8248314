"""vanishing-gradients: some layers receive orders of magnitude less gradient than the rest.

What it detects
    For each weight matrix or kernel, the typical gradient size per element (gradient norm /
    sqrt(numel), median over the later `1 - settle` of the recorded steps, so that the first
    steps' transients do not count). A layer is flagged when that is below `ratio` times the
    largest layer's value (or below the absolute `floor`) and below `median_ratio` times the
    median layer's. Layers whose gradients are exactly zero are left to frozen-parameters. The finding names the layers and gives their
    ratio to the largest and to the median layer.

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
    period. Biases and normalization scales are not judged.
    A diverging run is judged only up to its first non-finite gradient, and not at all when a
    layer's median gradient norm exceeds `max_reference`: the gap then comes from an exploding
    layer, which exploding-gradients reports.
"""
from __future__ import annotations

import numpy as np

from tracelab.analyzers._dynamics import OUTCOME, fmt, matrix_params, name_list, subject_of
from tracelab.core import causes
from tracelab.core.causes import explains
from tracelab.core.findings import WARNING, Finding
from tracelab.core.rules import Plot, rule
from tracelab.core.run import Run
from tracelab.core.schema import GRAD, Needs


@rule(name="vanishing-gradients", code="TL201", requires=(Needs.GRADS,), plot=Plot.GRADIENT_LAYERS,
      links=(explains("update-ratio", "frozen-parameters",
                      why="layers without gradient barely move", timing="overlap",
                      place="downstream", when=causes.low_updates),
             explains(*OUTCOME, why="layers that get no gradient do not learn", timing="overlap")))
def vanishing_gradients(run: Run, *, ratio: float = 1e-3, median_ratio: float = 1e-2,
                        floor: float = 1e-9, settle: float = 0.5, max_reference: float = 100.0,
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
    norms = norms.iloc[min(int(len(norms) * settle), len(norms) - min_steps):]
    rms = (norms[names] / np.sqrt(numel[names])).median()
    rms = rms[np.isfinite(rms) & (rms > 0)]
    if rms.empty or float(norms[names].median().max()) > max_reference:
        return []  # the gap comes from an exploding layer: exploding-gradients reports it
    top = float(rms.max())
    middle = float(rms.median())
    low = rms[((rms < ratio * top) | (rms < floor)) & (rms < median_ratio * middle)]
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
