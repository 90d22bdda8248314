"""Parameters the loss does not depend on, told from a recorded exact-zero gradient: the one
classifier frozen-parameters, dead-units and target-problems read.

A gradient recorded as exactly zero, not None, means the backward pass reached the parameter.
Two shapes of it are an invariance of the loss, not a fault:
- an unread sub-layer. A fused module computes several outputs in one autograd node -- a
  stacked or bidirectional RNN/LSTM/GRU returns the output sequence and the last hidden state
  of each layer and direction -- and backward gives a gradient tensor to every one of its
  weights, zeros for those behind the outputs the code leaves unread (`fc(hidden[-1])` reads
  only the last layer's backward direction). A whole sub-layer -- a weight and its bias --
  then gets zero gradients while the module's other parameters get some.
- a bias that cancels. A bias's gradient is the sum of its outputs' gradients, so it is
  exactly zero while its weight's is not only when those sum to zero at every step: the loss
  reads a difference in which the bias cancels (a Siamese or triplet network's output bias in
  `out2 - out1`).
The opposite shape is not one: a weight whose gradient is zero beside a bias that trains has
an input that is zero (the units before it dead, features that are all zero), so dead units or
the input are at fault. A whole module with zero gradients is not one either (unused, output
multiplied by zero, dead units downstream).

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
    """The trainable parameters the loss is invariant to: those whose recorded gradient is
    exactly zero at every recording where, within one module, a whole sub-layer -- a weight
    and its bias -- gets no gradient while some other parameter of that module does (an
    unread layer or direction of a fused recurrent module), or a bias gets none while its
    sub-layer's weight does (a bias that cancels). Empty where gradients were not recorded;
    never raises."""
    try:
        info = run.parameters()
        grads = finite_stat(run, GRAD, "norm")
    except Exception:  # malformed trace: nothing to say
        return set()
    zero: dict[str, bool] = {}
    for name in grads.columns:
        if info.get(name, {}).get("requires_grad", True) is not True:
            continue  # frozen: no gradient to read (parameters unknown to a summary train)
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
            weights = [n for n in group if _leaf(n).startswith("weight")]
            biases = [n for n in group if _leaf(n).startswith("bias")]
            if not weights or not biases:
                continue
            if all(zero[n] for n in group):
                found.update(group)  # a whole sub-layer: unread
            elif not any(zero[n] for n in weights):
                found.update(n for n in biases if zero[n])  # its weight trains: it cancels
    return found


def _leaf(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def off_the_loss(run: Run, module: str) -> bool:
    """Whether the output of `module` is not what enters the loss: the forward pass's recorded
    shapes (meta.json `module_shapes`, each leaf module's outputs at its calls) hold none that
    matches, batch dims aside (`_same_samples`), the shape of the outputs given to step() or
    log() (`outputs`, any split: each split's latest shape, maybe an epoch's smaller last
    batch), or do not hold the module at all (never called). A head computed and left unread
    (a ResNet's fc where BYOL reads the penultimate layer through a hook) is off the loss; an
    output layer whose result enters the loss detached, reshaped (`logits.view(-1, V)`) or in
    a smaller last batch is not. False where those facts were not recorded or a shape is not a
    plain list; never raises."""
    try:
        shapes, outputs = run.meta.get("module_shapes"), run.meta.get("outputs")
        if not isinstance(shapes, dict) or not shapes or not isinstance(outputs, dict):
            return False
        read = [entry.get("shape") for entry in outputs.values() if isinstance(entry, dict)]
        read = [list(s) for s in read if _plain(s)]
        if not read:
            return False
        calls = shapes.get(module)
        if calls is None:
            return True  # recorded shapes without it: never called
        produced = [c.get("output") for c in calls if isinstance(c, dict)]
        if not produced or not all(_plain(s) for s in produced):
            return False
        return not any(_same_samples(list(p), r) for p in produced for r in read)
    except Exception:  # malformed trace: nothing to say
        return False


def _prod(dims) -> int:
    n = 1
    for d in dims:
        n *= d
    return n


def _same_samples(produced: list[int], read: list[int]) -> bool:
    """Whether a module's output of shape `produced` can be the outputs of shape `read` with
    the batch dims left aside (the recorded shapes are of different steps, maybe of another
    batch size): equal shapes, the same dims after the first (another batch), the same
    number of values per sample (a flattened [B, C*H*W]), the batch dims merged into the
    first (`logits.view(-1, V)`: [B, T, V] as [B*T, V], B*T a multiple of T), or the same
    number of values in all (the whole output flattened)."""
    if not produced or not read:
        return produced == read
    if produced == read or produced[1:] == read[1:]:
        return True
    if _prod(produced[1:]) == _prod(read[1:]) or _prod(produced) == _prod(read):
        return True
    lead = len(produced) - len(read) + 1  # the dims of `produced` merged into read[0]
    return len(read) >= 2 and lead >= 2 and produced[lead:] == read[1:] \
        and _prod(produced[1:lead]) > 0 and read[0] % _prod(produced[1:lead]) == 0


def _plain(shape) -> bool:
    return isinstance(shape, (list, tuple)) and all(
        isinstance(d, int) and not isinstance(d, bool) for d in shape)
