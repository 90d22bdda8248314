"""One rank of a tiny FSDP2 (`fully_shard`) training job on the gloo backend, recorded by
tracelab, with the full parameters' statistics kept as the reference.

    python _fsdp_worker.py RANK WORLD INIT_FILE OUT_DIR [compiled]

Records OUT_DIR/run; rank 0 writes OUT_DIR/reference.json: {kind: {step: {name: stats}}} of
the whole (gathered) weights, grads and updates, in plain torch. With `compiled` the sharded
model is trained as torch.compile(model), first without a recorder, and each rank writes
dynamo's counters of both runs to OUT_DIR/graphs-rRANK.json.
"""
from __future__ import annotations

import contextlib
import json
import os

import torch
from torch import nn
from torch.distributed.fsdp import fully_shard

import tracelab
from _gloo import serve
from tracelab.recorders.stats import reference_stats

STEPS, BATCH = 6, 16


def full(t: torch.Tensor) -> torch.Tensor:
    """The whole tensor from every rank's shard (a collective: every rank calls it)."""
    return t.full_tensor().detach().clone()


def sharded_model() -> nn.Module:
    torch.manual_seed(0)
    # 33 rows shard unevenly (17 + 16); the last layer's one row leaves rank 1 an empty shard.
    model = nn.Sequential(nn.Linear(8, 33), nn.ReLU(), nn.Linear(33, 3), nn.ReLU(),
                          nn.Linear(3, 1))
    for layer in model:
        if isinstance(layer, nn.Linear):
            fully_shard(layer)
    fully_shard(model)
    return model


def train(rank: int, out_dir: str | None, compiled: bool = False) -> dict:
    """Train, recording into out_dir/run (None: not recorded); dynamo's counters after."""
    from torch._dynamo.utils import counters
    torch._dynamo.reset()
    counters.clear()
    model = sharded_model()
    net = torch.compile(model) if compiled else model
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    g = torch.Generator().manual_seed(100 + rank)
    reference: dict[str, dict[int, dict[str, dict]]] = {"weight": {}, "grad": {}, "update": {}}
    with contextlib.ExitStack() as stack:
        rec = None if out_dir is None else stack.enter_context(tracelab.Recorder(
            os.path.join(out_dir, "run"), model=net, optimizer=opt, flush_interval=0.2))
        for step in range(STEPS):
            x = torch.randn(BATCH, 8, generator=g)
            opt.zero_grad()
            loss = net(x).square().mean()
            loss.backward()
            before = {n: full(p) for n, p in model.named_parameters()}
            opt.step()
            after = {n: full(p) for n, p in model.named_parameters()}
            grads = {n: full(p.grad) for n, p in model.named_parameters()}
            for kind, tensors in (("weight", after), ("grad", grads),
                                  ("update", {n: after[n] - before[n] for n in after})):
                reference[kind][step] = {n: reference_stats(t) for n, t in tensors.items()}
            if rec is not None:
                rec.step(loss=loss)
    if rank == 0 and out_dir is not None:
        with open(os.path.join(out_dir, "reference.json"), "w") as f:
            json.dump(reference, f)
    return {"graphs": counters["stats"]["unique_graphs"],
            "breaks": sum(counters["graph_break"].values()),
            "frames": counters["frames"]["total"]}


def main(rank: int, world: int, args: list[str]) -> None:
    out_dir, compiled = args[0], args[1:] == ["compiled"]
    if not compiled:
        train(rank, out_dir)
        return
    graphs = {"unrecorded": train(rank, None, compiled=True),
              "recorded": train(rank, out_dir, compiled=True)}
    with open(os.path.join(out_dir, f"graphs-r{rank}.json"), "w") as f:
        json.dump(graphs, f)


if __name__ == "__main__":
    serve(main, timeout_s=30)
