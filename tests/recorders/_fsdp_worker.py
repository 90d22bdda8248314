"""One rank of a tiny FSDP2 (`fully_shard`) training job on the gloo backend, recorded by
tracelab, with the full parameters' statistics kept as the reference.

    python _fsdp_worker.py RANK WORLD INIT_FILE OUT_DIR

Records OUT_DIR/run; rank 0 writes OUT_DIR/reference.json: {kind: {step: {name: stats}}} of
the whole (gathered) weights, grads and updates, in plain torch.
"""
from __future__ import annotations

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


def train(rank: int, out_dir: str) -> None:
    torch.manual_seed(0)
    # 33 rows shard unevenly (17 + 16); the last layer's one row leaves rank 1 an empty shard.
    model = nn.Sequential(nn.Linear(8, 33), nn.ReLU(), nn.Linear(33, 3), nn.ReLU(),
                          nn.Linear(3, 1))
    for layer in model:
        if isinstance(layer, nn.Linear):
            fully_shard(layer)
    fully_shard(model)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    g = torch.Generator().manual_seed(100 + rank)
    reference: dict[str, dict[int, dict[str, dict]]] = {"weight": {}, "grad": {}, "update": {}}
    with tracelab.Recorder(os.path.join(out_dir, "run"), model=model, optimizer=opt,
                           flush_interval=0.2) as rec:
        for step in range(STEPS):
            x = torch.randn(BATCH, 8, generator=g)
            opt.zero_grad()
            loss = model(x).square().mean()
            loss.backward()
            before = {n: full(p) for n, p in model.named_parameters()}
            opt.step()
            after = {n: full(p) for n, p in model.named_parameters()}
            grads = {n: full(p.grad) for n, p in model.named_parameters()}
            for kind, tensors in (("weight", after), ("grad", grads),
                                  ("update", {n: after[n] - before[n] for n in after})):
                reference[kind][step] = {n: reference_stats(t) for n, t in tensors.items()}
            rec.step(loss=loss)
    if rank == 0:
        with open(os.path.join(out_dir, "reference.json"), "w") as f:
            json.dump(reference, f)


def main(rank: int, world: int, args: list[str]) -> None:
    train(rank, args[0])


if __name__ == "__main__":
    serve(main, timeout_s=30)
