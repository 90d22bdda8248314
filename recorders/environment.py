"""What a run needs to be reproduced: versions, devices, numerics flags, seeds, model, optimizer."""
from __future__ import annotations

import inspect
import itertools
import os
import platform
import socket
import subprocess
import sys
from typing import Any, Mapping, Sequence

import torch
from torch.nn.parameter import is_lazy

# torch seeds itself from /dev/urandom with a 64-bit value; manual_seed(n) with a
# human-chosen n is almost always below 2**32.
_HUMAN_SEED_LIMIT = 2 ** 32


def _git_commit() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                             timeout=2, cwd=os.getcwd())
        return out.stdout.strip() or None if out.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        return None


def environment() -> dict[str, Any]:
    cuda = torch.cuda.is_available()
    backends = torch.backends
    seed = torch.initial_seed()
    env: dict[str, Any] = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "torch": torch.__version__,
        "cuda_available": cuda,
        "cuda": torch.version.cuda,
        "cudnn": backends.cudnn.version() if backends.cudnn.is_available() else None,
        "devices": [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
        if cuda else [],
        "cudnn_benchmark": bool(backends.cudnn.benchmark),
        "cudnn_deterministic": bool(backends.cudnn.deterministic),
        "tf32_matmul": bool(backends.cuda.matmul.allow_tf32),
        "tf32_cudnn": bool(backends.cudnn.allow_tf32),
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
        "seed": seed,
        "seed_set": seed < _HUMAN_SEED_LIMIT,
        "pythonhashseed": os.environ.get("PYTHONHASHSEED"),
        "hostname": socket.gethostname(),
        "git_commit": _git_commit(),
        "argv": list(sys.argv),
    }
    return env


def unwrap(model: torch.nn.Module) -> torch.nn.Module:
    """The user's module inside DataParallel/DDP/torch.compile wrappers."""
    while True:
        inner = wrapped(model)
        if inner is None:
            return model
        model = inner


def wrapped(model: torch.nn.Module) -> torch.nn.Module | None:
    """The module a wrapper wraps: torch.compile's `_orig_mod`, or the `module` of
    DataParallel, DDP or FSDP when it is the wrapper's only child (a model of the user's own
    may have a submodule named `module` beside others); None for a module that wraps none."""
    inner = getattr(model, "_orig_mod", None)
    if isinstance(inner, torch.nn.Module):
        return inner
    inner = getattr(model, "module", None)
    if not isinstance(inner, torch.nn.Module):
        return None
    children = list(itertools.islice(model.children(), 2))
    return inner if len(children) == 1 and children[0] is inner else None


def model_summary(model: torch.nn.Module, optimizers: Sequence[Any]) -> dict[str, Any]:
    """The model's modules and parameters; `in_optimizer` says whether any of `optimizers`
    holds a parameter (None when the run watches no optimizer); a frozen parameter's `values`
    are frozen_values' statistics of it."""
    in_opt = {id(p) for opt in optimizers for g in opt.param_groups for p in g["params"]}
    frozen = frozen_values(model)
    params = []
    for name, p in model.named_parameters():
        lazy = is_lazy(p)  # a Lazy module's parameter has no shape before its first forward
        entry = {"name": name, "shape": None if lazy else list(p.shape),
                 "dtype": str(p.dtype).replace("torch.", ""), "device": str(p.device),
                 "requires_grad": p.requires_grad,
                 "in_optimizer": id(p) in in_opt if optimizers else None}
        if name in frozen:
            entry["values"] = frozen[name]
        params.append(entry)
    return {"type": type(model).__name__,
            "modules": [_module_entry(path, m) for path, m in model.named_modules()],
            "parameters": params}


# Frozen parameters are not tracked; their values are summarized once at the start and once
# at the end, from their first FROZEN_SAMPLE elements: what tells a random initialization
# (an i.i.d. sample) from trained values, at a fixed cost whatever the model's size.
FROZEN_SAMPLE = 65_536
FROZEN_STATS = ("numel", "mean", "std", "min", "max", "abs_mean")


def frozen_values(model: torch.nn.Module) -> dict[str, dict[str, float]]:
    """Per floating-point parameter with requires_grad=False, FROZEN_STATS of its first
    FROZEN_SAMPLE elements in row-major order (numel: how many were read). Plain tensors only:
    a sharded, meta or unmaterialized (Lazy) parameter, or one that fails to read, is left
    out."""
    out: dict[str, dict[str, float]] = {}
    for name, p in model.named_parameters():
        try:  # a Lazy module's parameter raises at any question but requires_grad
            if p.requires_grad or is_lazy(p) or not p.is_floating_point() or p.is_meta \
                    or p.numel() < 2:
                continue
            x = p.detach()
            if type(x) is not torch.Tensor:  # a DTensor's shard, a quantized wrapper
                continue
            if x.dim() > 1:  # the rows that hold the sample: no copy of a strided whole
                x = x[:-(-FROZEN_SAMPLE // max(x[0].numel(), 1))]
            x = x.reshape(-1)[:FROZEN_SAMPLE].double()
            values = torch.stack([x.mean(), x.std(), x.min(), x.max(), x.abs().mean()]).tolist()
        except Exception:  # a summary never stops recording
            continue
        out[name] = dict(zip(FROZEN_STATS, [int(x.numel())] + values))
    return out


# The configuration rules read of a leaf module, beside its extra_repr(): layouts a module
# expects (batch_first), normalization and dropout settings, the padding an embedding skips.
MODULE_ATTRIBUTES = ("batch_first", "eps", "momentum", "padding_idx", "track_running_stats",
                     "affine", "p", "inplace", "num_layers", "bidirectional", "hidden_size",
                     "input_size", "num_heads", "norm_first", "elementwise_affine",
                     "in_features", "out_features", "num_embeddings", "embedding_dim")
# The loss settings that change what a loss module expects or returns.
LOSS_ATTRIBUTES = ("reduction", "ignore_index", "label_smoothing", "log_input", "full")


def batch_first_of(module: torch.nn.Module) -> bool | None:
    """The layout a module reads its inputs in: its bool `batch_first` (RNN/LSTM/GRU,
    nn.MultiheadAttention, nn.Transformer), or its self-attention's (a Transformer encoder or
    decoder layer keeps the setting there); None for a module of no such setting."""
    for holder in (module, getattr(module, "self_attn", None)):
        value = getattr(holder, "batch_first", None) if holder is not None else None
        if isinstance(value, bool):
            return value
    return None


def _module_entry(path: str, module: torch.nn.Module) -> dict[str, Any]:
    """meta.json's entry of one module: its path and type, and for a leaf its extra_repr() and
    the MODULE_ATTRIBUTES it has; a module of children has them only when it reads a layout
    (batch_first_of: a Transformer layer, nn.MultiheadAttention)."""
    entry: dict[str, Any] = {"path": path or "", "type": type(module).__name__}
    if next(module.children(), None) is not None:
        first = batch_first_of(module)
        if first is not None:
            entry["config"] = {a: _plain(getattr(module, a)) for a in MODULE_ATTRIBUTES
                               if hasattr(module, a)} | {"batch_first": first}
        return entry
    try:
        entry["extra_repr"] = module.extra_repr()
    except Exception:  # a user module's extra_repr never stops recording
        pass
    config = {a: _plain(getattr(module, a)) for a in MODULE_ATTRIBUTES if hasattr(module, a)}
    if config:
        entry["config"] = config
    return entry


def loss_summary(loss_fn: Any) -> dict[str, Any]:
    """meta.json's `loss_fn`: the loss's class (or function) name, its LOSS_ATTRIBUTES, and
    whether it holds class weights or a pos_weight."""
    name = loss_fn.__name__ if inspect.isroutine(loss_fn) else type(loss_fn).__name__
    summary: dict[str, Any] = {"type": name}
    summary.update({a: _plain(getattr(loss_fn, a)) for a in LOSS_ATTRIBUTES
                    if hasattr(loss_fn, a)})
    for a in ("weight", "pos_weight"):
        if hasattr(loss_fn, a):
            summary[a] = getattr(loss_fn, a) is not None
    return summary


def optimizer_summary(optimizer: Any, names: Mapping[int, str] | None = None) -> dict[str, Any]:
    """Class and param groups: each group's hyperparameters, its parameter count and, given
    `names` (id of a parameter -> its name), the names of the tracked parameters it holds."""
    groups = []
    for group in optimizer.param_groups:
        summary = {k: _plain(v) for k, v in group.items() if k != "params"} \
            | {"n_params": len(group["params"])}
        if names is not None:
            summary["params"] = [names[id(p)] for p in group["params"] if id(p) in names]
        groups.append(summary)
    return {"type": type(optimizer).__name__, "groups": groups}


def scheduler_summary(scheduler: Any) -> dict[str, Any]:
    """An LR scheduler's class and plain settings (its state_dict, less the optimizer's)."""
    try:
        state = scheduler.state_dict()
    except Exception:  # a scheduler of no torch kind: its class is what is known
        state = {}
    settings = {k: _plain(v) for k, v in state.items()
                if not k.startswith("_") and isinstance(v, (str, int, float, bool, type(None)))}
    return {"type": type(scheduler).__name__, "settings": settings}


def _plain(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.item() if value.numel() == 1 else value.tolist()
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return repr(value)
