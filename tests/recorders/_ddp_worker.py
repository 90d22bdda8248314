"""One rank of a tiny DDP training job on the gloo backend, recorded by tracelab.

    python _ddp_worker.py RANK WORLD INIT_FILE OUT_DIR SCENARIO[,SCENARIO...]

Scenarios, each recorded into OUT_DIR/SCENARIO:
  healthy   DDP, every rank trains on its own shard of one dataset
  skewed    as healthy, but rank 1's labels are shuffled (a data-skewed rank)
  unsynced  the model is not wrapped in DDP: the ranks train separate replicas
  dies      rank 1 flushes at step 20 and is killed at step 25; the others then fail
            (run it last: it ends the job)
"""
from __future__ import annotations

import os

import torch
import torch.distributed as dist
from torch import nn

import tracelab
from _gloo import serve

STEPS, BATCH = 60, 32


def data(rank: int, world: int, skewed: bool) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2048, 8, generator=g)
    y = (x @ torch.randn(8, 3, generator=g)).argmax(dim=1)
    x, y = x[rank::world], y[rank::world]  # this rank's shard, like DistributedSampler
    if skewed and rank == 1:
        y = y[torch.randperm(len(y), generator=torch.Generator().manual_seed(1))]
    return x, y


def train(rank: int, world: int, run_dir: str, scenario: str) -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 3))
    if scenario != "unsynced":
        model = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    x, y = data(rank, world, scenario == "skewed")
    g = torch.Generator().manual_seed(100 + rank)
    with tracelab.Recorder(run_dir, model=model, optimizer=opt, flush_interval=0.2) as rec:
        for step in range(STEPS):
            idx = torch.randint(len(x), (BATCH,), generator=g)
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(x[idx]), y[idx])
            loss.backward()
            opt.step()
            rec.step(loss=loss, inputs=x[idx])
            if scenario == "dies" and rank == 1:
                if step == 20:
                    rec.writer.flush()
                if step == 25:
                    os._exit(1)  # like the OOM killer: no exception, no close, no atexit
        if rank == 0:
            rec.log("val", metrics={"loss": nn.functional.cross_entropy(model(x), y)})


def main(rank: int, world: int, args: list[str]) -> None:
    out_dir, scenarios = args
    for scenario in scenarios.split(","):
        train(rank, world, os.path.join(out_dir, scenario), scenario)


if __name__ == "__main__":
    serve(main)
