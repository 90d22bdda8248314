"""A linear warm-up-and-decay schedule (transformers' get_linear_schedule_with_warmup) sized in
optimizer steps but stepped on every micro-batch under gradient accumulation of 2 (after
huggingface/diffusers issue 4387): the LR reaches 0 halfway through the run and stays there.

lr-schedule names it where the loss had learned nothing when the LR died (a model that starts
slowly, on learnable targets: the same run stepped once per optimizer step learns), and
target-problems stays quiet there: a model whose updates stopped halfway is no model the
optimizer moves, whatever its targets. With labels shuffled apart from their inputs and the
schedule stepped right, target-problems still names them."""
import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the tiny trainings need torch (extra 'torch')")
from torch import nn  # noqa: E402

import tracelab  # noqa: E402
from tracelab.analyzers.lr_schedule import lr_schedule  # noqa: E402
from tracelab.analyzers.target_problems import target_problems  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")
STEPS, ACCUMULATE, WARMUP = 150, 2, 15


def _accumulating(path, *, per_micro: bool, shuffle: bool = False, lr: float = 1e-3,
                  scale: float = 1.0, depth: int = 2):
    """An MLP (`depth` hidden layers, its initial weights times `scale`) on the XOR of two
    inputs' signs, AdamW, micro-batches of 16 accumulated in pairs, the schedule stepped per
    micro-batch (`per_micro`) or per optimizer step."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2048, 16, generator=g)
    y = ((x[:, 0] * x[:, 1]) > 0).long()
    if shuffle:
        y = y[torch.randperm(len(y), generator=g)]
    layers = [nn.Linear(16, 32), nn.ReLU()]
    for _ in range(depth - 1):
        layers += [nn.Linear(32, 32), nn.ReLU()]
    model = nn.Sequential(*layers, nn.Linear(32, 2))
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(scale)
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min((s + 1) / WARMUP, max(0.0, (STEPS - s) / (STEPS - WARMUP))))
    loss_fn = nn.CrossEntropyLoss()
    with tracelab.Recorder(str(path), model=model, optimizer=opt, scheduler=sched,
                           loss_fn=loss_fn) as rec:
        for micro in range(STEPS * ACCUMULATE):
            i = torch.randint(0, len(y), (16,), generator=g)
            out = model(x[i])
            loss = loss_fn(out, y[i])
            rec.accumulate_loss(loss)
            (loss / ACCUMULATE).backward()
            if micro % ACCUMULATE == ACCUMULATE - 1:
                opt.step()
                opt.zero_grad()
                if not per_micro:
                    sched.step()
                rec.step(inputs=x[i], targets=y[i], outputs=out)
            if per_micro:
                sched.step()
    return tracelab.open_run(str(path))


SLOW = {"lr": 1e-2, "scale": 0.1, "depth": 3}  # learnable, but only after a long plateau


def test_an_lr_that_runs_out_before_the_model_learned_is_named(tmp_path):
    run = _accumulating(tmp_path / "micro", per_micro=True, **SLOW)
    [f] = lr_schedule(run)
    assert f.evidence["kind"] == "died" and f.evidence["before_learning"]
    assert 0.4 <= f.evidence["dead_share"] <= 0.6
    assert f.evidence["loss_high_to"] >= 0.95 * f.evidence["constant_loss"]
    assert target_problems(run) == []


def test_the_same_schedule_stepped_per_optimizer_step_stays_quiet(tmp_path):
    run = _accumulating(tmp_path / "step", per_micro=False, **SLOW)
    loss = run.loss().to_numpy(dtype=float)
    assert np.median(loss[-20:]) < 0.9 * np.median(loss[:20])  # it learns, late
    assert lr_schedule(run) == []


def test_shuffled_labels_are_judged_only_while_the_optimizer_moves_the_model(tmp_path):
    stopped = _accumulating(tmp_path / "micro", per_micro=True, shuffle=True)
    assert [f for f in target_problems(stopped) if f.subject == "targets vs inputs"] == []
    moving = _accumulating(tmp_path / "step", per_micro=False, shuffle=True)
    assert [f.subject for f in target_problems(moving)] == ["targets vs inputs"]
