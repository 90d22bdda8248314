"""One rank of a tiny DDP training job on the gloo backend, recorded by tracelab.

    python _ddp_worker.py RANK WORLD INIT_FILE OUT_DIR SCENARIO[,SCENARIO...]

Scenarios, each recorded into OUT_DIR/SCENARIO:
  healthy   DDP, every rank trains on its own shard of one dataset
  skewed    as healthy, but rank 1's labels are shuffled (a data-skewed rank)
  unsynced  the model is not wrapped in DDP: the ranks train separate replicas
  compiled-outside, compiled-inside
            torch.compile(DDP(model)) and DDP(torch.compile(model)), each trained first
            without a recorder, then recorded; dynamo's counters of both go to
            OUT_DIR/SCENARIO-graphs-rRANK.json
  dies      rank 1 flushes at step 20 and is killed at step 25; the others then fail
            (run it last: it ends the job)
"""
from __future__ import annotations

import json
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


def fit(model, opt, x, y, rank: int, steps: int, rec=None, after=None) -> None:
    """Train on random batches of this rank's shard; `after(step)` after each step."""
    g = torch.Generator().manual_seed(100 + rank)
    for step in range(steps):
        idx = torch.randint(len(x), (BATCH,), generator=g)
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x[idx]), y[idx])
        loss.backward()
        opt.step()
        if rec is not None:
            rec.step(loss=loss, inputs=x[idx])
        if after is not None:
            after(step)


def train(rank: int, world: int, run_dir: str, scenario: str) -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 3))
    if scenario != "unsynced":
        model = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    x, y = data(rank, world, scenario == "skewed")
    with tracelab.Recorder(run_dir, model=model, optimizer=opt, flush_interval=0.2) as rec:
        def dies(step: int) -> None:
            if step == 20:
                rec.writer.flush()
            if step == 25:
                os._exit(1)  # like the OOM killer: no exception, no close, no atexit
        fit(model, opt, x, y, rank, STEPS, rec, dies if scenario == "dies" and rank == 1 else None)
        if rank == 0:
            rec.log("val", metrics={"loss": nn.functional.cross_entropy(model(x), y)})


COMPILED_STEPS, ACTIVATION_EVERY = 12, 5


def train_compiled(rank: int, world: int, run_dir: str | None, outside: bool) -> dict:
    """The compiled scenarios: dynamo's counters of one run from a fresh cache, recorded into
    run_dir (None: not recorded)."""
    from torch._dynamo.utils import counters
    torch._dynamo.reset()
    counters.clear()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 3))
    net = torch.compile(nn.parallel.DistributedDataParallel(model)) if outside \
        else nn.parallel.DistributedDataParallel(torch.compile(model))
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)
    x, y = data(rank, world, False)
    rec = None if run_dir is None else tracelab.Recorder(
        run_dir, model=net, optimizer=opt, activation_every=ACTIVATION_EVERY, flush_interval=0.2)
    fit(net, opt, x, y, rank, COMPILED_STEPS, rec)
    if rec is not None:
        rec.close()
    return {"graphs": counters["stats"]["unique_graphs"],
            "breaks": sum(counters["graph_break"].values()),
            "frames": counters["frames"]["total"]}


def main(rank: int, world: int, args: list[str]) -> None:
    out_dir, scenarios = args
    for scenario in scenarios.split(","):
        run_dir = os.path.join(out_dir, scenario)
        if scenario.startswith("compiled-"):
            outside = scenario == "compiled-outside"
            graphs = {"unrecorded": train_compiled(rank, world, None, outside),
                      "recorded": train_compiled(rank, world, run_dir, outside)}
            with open(f"{run_dir}-graphs-r{rank}.json", "w") as f:
                json.dump(graphs, f)
        else:
            train(rank, world, run_dir, scenario)


if __name__ == "__main__":
    serve(main)
