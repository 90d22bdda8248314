"""Parameters behind a part of a module's output that the loss never reads.

A fused module computes several outputs in one autograd node -- a stacked or bidirectional
RNN/LSTM/GRU returns the output sequence and the last hidden state of each layer and direction
-- and backward gives a gradient tensor to every one of its weights, zeros for those behind the
outputs the code leaves unread (`fc(hidden[-1])` reads only the last layer's backward
direction). Those weights get an exact zero gradient, not None, while the module's other
weights get gradients: no unit is dead and nothing is detached; that part of the module is
simply not used. Told apart from a layer that dead units starve by its biases: zero inputs
(the units before a layer dead) leave the layer's bias a gradient, while an unread output
takes it from the weights and the biases that produce it alike.

Pure helpers over a run; no rule lives here.
"""
from __future__ import annotations

from tracelab.analyzers._dynamics import finite_stat, layer_of
from tracelab.core.run import Run
from tracelab.core.schema import GRAD


def _part(name: str) -> tuple[str, str]:
    """(module, sub-layer key) of a parameter: its leaf name without "weight"/"bias", so that
    `gru.weight_ih_l1` and `gru.bias_ih_l1` share the key ("gru", "_ih_l1")."""
    leaf = name.rsplit(".", 1)[-1]
    return layer_of(name), leaf.replace("weight", "").replace("bias", "")


def unread_parameters(run: Run) -> set[str]:
    """The trainable parameters whose recorded gradient is exactly zero at every recording
    where, within one module, a whole sub-layer -- a weight and its bias -- gets no gradient
    while some other parameter of that module does (an unread layer or direction of a fused
    recurrent module). Empty where gradients were not recorded; never raises."""
    try:
        info = run.parameters()
        grads = finite_stat(run, GRAD, "norm")
    except Exception:  # malformed trace: nothing to say
        return set()
    zero: dict[str, bool] = {}
    for name in grads.columns:
        if info.get(name, {}).get("requires_grad") is not True:
            continue
        series = grads[name].dropna()
        if len(series):
            zero[str(name)] = bool((series == 0).all())
    modules: dict[str, dict[str, list[str]]] = {}
    for name in zero:
        module, key = _part(name)
        modules.setdefault(module, {}).setdefault(key, []).append(name)
    found: set[str] = set()
    for parts in modules.values():
        names = [n for group in parts.values() for n in group]
        if all(zero[n] for n in names) or not any(zero[n] for n in names):
            continue  # the whole module or none of it: not a part left unread
        for group in parts.values():
            leaves = [n.rsplit(".", 1)[-1] for n in group]
            if all(zero[n] for n in group) and any(leaf.startswith("weight") for leaf in leaves) \
                    and any(leaf.startswith("bias") for leaf in leaves):
                found.update(group)
    return found
