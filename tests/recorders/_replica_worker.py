"""One rank of a tiny DDP job on the gloo backend whose replicas should stay identical,
recorded by tracelab.

    python _replica_worker.py RANK WORLD INIT_FILE OUT_DIR SCENARIO[,SCENARIO...]

Scenarios, each recorded into OUT_DIR/SCENARIO:
  healthy      DDP, every rank trains on its own shard of one dataset
  lr-one-rank  as healthy, but rank 1 lowers its learning rate 10x at step 30 (a schedule
               stepped on one rank only): the gradients stay all-reduced, the weights part
  load-rank0   rank 0 loads other weights after DDP broadcast the initial ones (a checkpoint
               loaded on rank 0 only)
"""
from __future__ import annotations

import os

import torch
from torch import nn

import tracelab
from _gloo import serve

STEPS, BATCH, LATE = 50, 32, 30
WEIGHT_EVERY = 10  # weights every step up to 20, then every 10th: step LATE records them


def train(rank: int, world: int, run_dir: str, scenario: str) -> None:
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(1024, 8, generator=g)
    y = (x @ torch.randn(8, 3, generator=g)).argmax(dim=1)
    x, y = x[rank::world], y[rank::world]
    model = nn.parallel.DistributedDataParallel(
        nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 3)))
    if scenario == "load-rank0" and rank == 0:
        with torch.no_grad():
            for p in model.parameters():
                p.mul_(1.5)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    batches = torch.Generator().manual_seed(100 + rank)
    with tracelab.Recorder(run_dir, model=model, optimizer=opt, weight_every=WEIGHT_EVERY,
                           flush_interval=0.2) as rec:
        for step in range(STEPS):
            if scenario == "lr-one-rank" and rank == 1 and step == LATE:
                for group in opt.param_groups:
                    group["lr"] *= 0.1
            idx = torch.randint(len(x), (BATCH,), generator=batches)
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(x[idx]), y[idx])
            loss.backward()
            opt.step()
            rec.step(loss=loss, inputs=x[idx])


def main(rank: int, world: int, args: list[str]) -> None:
    out_dir, scenarios = args
    for scenario in scenarios.split(","):
        train(rank, world, os.path.join(out_dir, scenario), scenario)


if __name__ == "__main__":
    serve(main)
