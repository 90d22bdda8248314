"""Parameters the loss depends on that the recorded model does not hold.

A module kept in a plain Python list or dict (not nn.ModuleList / nn.ModuleDict) is not
registered: its parameters are in neither `model.parameters()` nor an optimizer built from
it, so no hook, stat or optimizer sees them, yet the loss's graph reaches them. At the first
step whose loss has a graph, the graph's leaves that are nn.Parameters (AccumulateGrad nodes)
and not among the model's parameters are summarized; at close, whether each changed since
(another optimizer, not given to the Recorder, may update them); null where the parameter was
freed before close (one made afresh each step) or cannot be read. Meta key
`unregistered_parameters`: a list of {"shape", "in_optimizer", "grad_norm", "changed"}.
"""
from __future__ import annotations

import math
import weakref
from typing import Any, Iterable

import torch

from tracelab.recorders.stats import dense_equivalent

MAX_NODES = 100_000  # a graph walk's budget: larger graphs are walked this far
MAX_PARAMETERS = 64  # parameters summarized at most
# Elements reduced at a time: a float64 reduction of a float32 tensor on the CPU converts its
# input, so a piece's copy (8 MB) is the most the check allocates, whatever the parameter's size.
_PIECE = 1 << 20


def graph_parameters(loss: Any, known: set[int]) -> list[torch.nn.Parameter]:
    """The nn.Parameters the graph of `loss` accumulates gradients into, less `known` ids."""
    fn = getattr(loss, "grad_fn", None)
    if fn is None:
        return []
    seen, stack, found = set(), [fn], {}
    while stack and len(seen) < MAX_NODES:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        variable = getattr(node, "variable", None)
        if isinstance(variable, torch.nn.Parameter) and id(variable) not in known:
            found[id(variable)] = variable
        stack.extend(n for n, _ in getattr(node, "next_functions", ()))
    return list(found.values())[:MAX_PARAMETERS]


def _pieces(t: torch.Tensor) -> Iterable[torch.Tensor]:
    """Views of t of at most _PIECE elements that cover it (a row at a time where t is not
    contiguous); a complex tensor as its real and imaginary parts."""
    if t.is_complex():
        t = torch.view_as_real(t)
    if t.numel() <= _PIECE or t.dim() == 0:
        yield t
    elif t.is_contiguous():
        yield from t.view(-1).split(_PIECE)
    elif t[0].numel() <= _PIECE:
        yield from t.split(max(1, _PIECE // max(1, t[0].numel())))
    else:
        for row in range(t.shape[0]):
            yield from _pieces(t[row])


def _fingerprint(t: torch.Tensor) -> tuple[float, float]:
    """(sum of |x|, sum of x^2) of t's values (a complex value's two parts), in float64,
    without a float64 copy of t."""
    with torch.no_grad():
        f64, l1, squares = torch.float64, 0.0, 0.0
        for piece in _pieces(t.detach()):
            l1 += float(torch.linalg.vector_norm(piece, 1, dtype=f64))
            squares += float(torch.linalg.vector_norm(piece, 2, dtype=f64)) ** 2
        return l1, squares


def _norm(grad: torch.Tensor) -> float:
    """The L2 norm of a grad (a complex one's magnitudes; a sparse one's stored values)."""
    if grad.layout != torch.strided:
        grad = dense_equivalent(grad)
    return math.sqrt(_fingerprint(grad)[1])


def _readable(p: torch.Tensor) -> bool:
    """A plain tensor with its storage allocated (not freed after use, as a sharded module's
    unsharded copy is, and not on the meta device)."""
    try:
        return type(p) in (torch.Tensor, torch.nn.Parameter) and not p.is_meta and \
            p.untyped_storage().size() > 0
    except Exception:  # a tensor subclass without storage
        return False


class UnregisteredParameters:
    """Finds them once, on the first loss with a graph; says at close whether they changed."""

    def __init__(self) -> None:
        self.done = False
        # Each parameter by weak reference: one made afresh at each step (an adversarial
        # perturbation, FreeLB/PGD style) is freed with its step, not kept until close.
        self._found: list[tuple[weakref.ref, tuple[float, float], dict]] = []

    def check(self, loss: Any, model: Any, optimizers: Iterable[Any]) -> list[dict] | None:
        """The summaries, the first time `loss` has a graph (None otherwise)."""
        if self.done or not isinstance(loss, torch.Tensor) or loss.grad_fn is None or \
                model is None:
            return None
        self.done = True
        params = list(model.parameters())
        if any(type(p) not in (torch.Tensor, torch.nn.Parameter) for p in params):
            return None  # sharded (FSDP2's DTensors): the graph holds its unsharded copies
        held = {id(p) for o in optimizers for g in getattr(o, "param_groups", ())
                for p in g.get("params", ())}
        known = {id(p) for p in params}
        for p in graph_parameters(loss, known):
            if not _readable(p):
                continue
            grad = p.grad
            summary = {"shape": list(p.shape), "in_optimizer": id(p) in held,
                       "grad_norm": _norm(grad)
                       if isinstance(grad, torch.Tensor) else None}
            self._found.append((weakref.ref(p), _fingerprint(p), summary))
        return [s for _, _, s in self._found]

    def at_close(self) -> list[dict] | None:
        if not self._found:
            return None
        for ref, first, summary in self._found:
            p = ref()  # None: freed since (whether it changed is unknown)
            summary["changed"] = _fingerprint(p) != first if p is not None and _readable(p) \
                else None
        return [s for _, _, s in self._found]
