"""Several optimizers and schedulers, and a run without an optimizer object: meta.json, the LR
scalars and the grads each optimizer used, against plain torch on real tiny trainings."""
import json

import pytest
import torch

import tracelab
from tracelab.analyzers._learning_rate import NO_OPTIMIZER_FIX, lr_fix, without_optimizer
from tracelab.analyzers.frozen_parameters import frozen_parameters
from tracelab.analyzers.update_ratio import update_ratio
from tracelab.app.engine import analyze
from tracelab.core.findings import NOT_RECORDED
from tracelab.core.run import open_run
from tracelab.core.schema import GRAD_NORM_STEP, META_OPTIMIZERS, META_SCHEDULERS

STEPS = 12


def _gan():
    torch.manual_seed(0)
    g = torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
    d = torch.nn.Sequential(torch.nn.Linear(2, 16), torch.nn.LeakyReLU(0.2),
                            torch.nn.Linear(16, 1))
    return g, d


def _train_gan(path):
    """A GAN on a 2-D Gaussian, the discriminator stepped first; returns what plain torch saw:
    each step's LRs and each optimizer's total grad norm just before its step."""
    g, d = _gan()
    g_opt = torch.optim.Adam(g.parameters(), lr=2e-3, betas=(0.5, 0.999))
    d_opt = torch.optim.SGD(d.parameters(), lr=0.05, momentum=0.5)
    g_sched = torch.optim.lr_scheduler.StepLR(g_opt, step_size=4, gamma=0.5)
    bce = torch.nn.functional.binary_cross_entropy_with_logits
    seen = {"lr/g/0": [], "lr/d/0": [], "g": [], "d": []}

    def total(module):
        return float(torch.linalg.vector_norm(torch.stack(
            [p.grad.double().norm() for p in module.parameters() if p.grad is not None])))
    with tracelab.Recorder(str(path), model=torch.nn.ModuleDict({"g": g, "d": d}),
                           optimizer={"g": g_opt, "d": d_opt}, scheduler={"g": g_sched}) as rec:
        for _ in range(STEPS):
            real = torch.randn(32, 2) * 0.5 + 2.0
            fake = g(torch.randn(32, 4))
            d_opt.zero_grad()
            d_loss = bce(d(real), torch.ones(32, 1)) + bce(d(fake.detach()), torch.zeros(32, 1))
            d_loss.backward()
            seen["d"].append(total(d))
            d_opt.step()
            g_opt.zero_grad()
            g_loss = bce(d(fake), torch.ones(32, 1))
            g_loss.backward()
            seen["g"].append(total(g))
            g_opt.step()
            seen["lr/g/0"].append(g_opt.param_groups[0]["lr"])
            seen["lr/d/0"].append(d_opt.param_groups[0]["lr"])
            rec.step(loss=g_loss)
            g_sched.step()
    return open_run(path), seen


def test_a_gan_records_both_optimizers_with_their_lrs_and_grads(tmp_path):
    run, seen = _train_gan(tmp_path / "run")
    meta = json.loads((tmp_path / "run" / "meta.json").read_text())
    opts = meta[META_OPTIMIZERS]
    assert list(opts) == ["g", "d"]
    assert opts["g"]["type"] == "Adam" and opts["d"]["type"] == "SGD"
    assert opts["g"]["groups"][0]["params"] == ["g.0.weight", "g.0.bias", "g.2.weight",
                                                "g.2.bias"]
    assert opts["d"]["groups"][0]["params"] == ["d.0.weight", "d.0.bias", "d.2.weight",
                                                "d.2.bias"]
    assert opts["d"]["groups"][0]["momentum"] == 0.5
    assert meta["optimizer"] == opts["g"]  # what older readers read
    assert meta[META_SCHEDULERS]["g"]["type"] == "StepLR"
    assert meta[META_SCHEDULERS]["g"]["settings"]["step_size"] == 4
    assert all(p["in_optimizer"] for p in meta["model"]["parameters"])
    for name in ("lr/g/0", "lr/d/0"):  # what the scheduler set, at every step
        assert run.scalar(name).tolist() == pytest.approx(seen[name], rel=1e-12)
    assert run.scalar("lr/g/0").iloc[-1] < run.scalar("lr/g/0").iloc[0]
    for name in ("g", "d"):
        assert run.signal(f"{GRAD_NORM_STEP}/{name}").tolist() == pytest.approx(seen[name],
                                                                                rel=1e-6)
    assert not without_optimizer(run)


def test_a_healthy_gan_has_neither_model_reported_frozen(tmp_path):
    run, _ = _train_gan(tmp_path / "run")
    assert frozen_parameters(run) == []


def test_a_list_of_optimizers_is_named_by_position(tmp_path):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Linear(4, 1))
    opts = [torch.optim.SGD(model[0].parameters(), lr=0.1),
            torch.optim.SGD(model[1].parameters(), lr=0.01)]
    with tracelab.Recorder(str(tmp_path / "run"), model=model, optimizer=opts) as rec:
        for _ in range(3):
            for o in opts:
                o.zero_grad()
            model(torch.randn(8, 3)).pow(2).mean().backward()
            for o in opts:
                o.step()
            rec.step(loss=1.0)
    run = open_run(tmp_path / "run")
    assert list(run.meta[META_OPTIMIZERS]) == ["0", "1"]
    assert run.scalar("lr/0/0").tolist() == [0.1] * 3
    assert run.scalar("lr/1/0").tolist() == [0.01] * 3


def _manual_sgd(path, lr):
    """A model trained by a hand-written update: no optimizer object."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Linear(8, 1))
    with tracelab.Recorder(str(path), model=model) as rec:
        for _ in range(30):
            x = torch.randn(64, 8)
            loss = torch.nn.functional.mse_loss(model(x), x.sum(1, keepdim=True))
            model.zero_grad()
            loss.backward()
            with torch.no_grad():
                for p in model.parameters():
                    p -= lr * p.grad
            rec.step(loss=loss)
    return open_run(path)


def test_manual_sgd_records_no_optimizer_and_no_lr_advice(tmp_path):
    run = _manual_sgd(tmp_path / "run", lr=0.05)
    assert run.meta[META_OPTIMIZERS] == {}
    assert not [n for n in run.scalars["name"].unique() if str(n).startswith("lr/")]
    assert all(p["in_optimizer"] is None for p in run.meta["model"]["parameters"])
    assert without_optimizer(run)
    # The rules judging the LR's size from the updates say what to pass to record them.
    result = analyze(run)
    [skipped] = [s for s in result.skipped if s.rule == "update-ratio"]
    assert skipped.reason.startswith(NOT_RECORDED) and "Recorder(optimizer=...)" in skipped.reason
    # A rule advising on the LR names what is unknown instead of advising to lower it.
    assert lr_fix(run, "Lower the learning rate.") == NO_OPTIMIZER_FIX
    assert "Recorder(optimizer=...)" in NO_OPTIMIZER_FIX


def test_an_optimizer_keeps_the_learning_rate_advice(tmp_path):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=1e-8)
    with tracelab.Recorder(str(tmp_path / "run"), model=model, optimizer=opt) as rec:
        for _ in range(30):
            x = torch.randn(64, 8)
            opt.zero_grad()
            torch.nn.functional.mse_loss(model(x), x.sum(1, keepdim=True)).backward()
            opt.step()
            rec.step(loss=1.0)
    [finding] = update_ratio(open_run(tmp_path / "run"))
    assert finding.fix.startswith("Raise the learning rate")


def test_old_runs_without_the_optimizers_field_still_open(tmp_path):
    run, _ = _train_gan(tmp_path / "run")
    meta_path = tmp_path / "run" / "meta.json"
    meta = json.loads(meta_path.read_text())
    for key in (META_OPTIMIZERS, META_SCHEDULERS):
        del meta[key]
    meta_path.write_text(json.dumps(meta))
    old = open_run(tmp_path / "run")
    assert old.meta["optimizer"]["type"] == "Adam"
    assert not without_optimizer(old)
    assert lr_fix(old, "Lower the learning rate.") == "Lower the learning rate."
    assert frozen_parameters(old) == []
