"""gradient-accumulation: real tiny trainings whose recorded backward passes and resets
(backward/passes, backward/resets) are checked against what the loop did."""
import numpy as np
import pandas as pd
import pytest

from tracelab.analyzers.gradient_accumulation import gradient_accumulation
from tracelab.core.run import Run, open_run

K = 4
STEPS = 8


def _mlp():
    import torch
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))


def _accumulating(path, *, reset_inside=None, divide=True, k=K):
    """SGD on a regression, k micro-batches per optimizer step. reset_inside: None (zero_grad
    after the step), "none" or "zeros" (zero_grad(set_to_none=...) before each micro-batch).
    Returns the run and the resets the loop made between passes of each step."""
    import torch
    import tracelab
    model = _mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    g = torch.Generator().manual_seed(1)
    made = []
    with tracelab.Recorder(str(path), model=model, optimizer=opt,
                           loss_fn=torch.nn.MSELoss()) as rec:
        for _ in range(STEPS):
            resets = 0
            for i in range(k):
                if reset_inside is not None:
                    resets += i > 0  # the first micro-batch's reset is the step's own
                    opt.zero_grad(set_to_none=reset_inside == "none")
                x = torch.randn(8, 6, generator=g)
                loss = torch.nn.functional.mse_loss(model(x)[:, 0], x.sum(1))
                (loss / k if divide else loss).backward()
                rec.accumulate_loss(loss)
            opt.step()
            if reset_inside is None:
                opt.zero_grad()
            rec.step()
            made.append(resets)
    return open_run(path), made


@pytest.mark.parametrize("reset_inside", ["none", "zeros"])
def test_fires_on_zero_grad_inside_the_accumulation_loop(tmp_path, one_thread, reset_inside):
    run, made = _accumulating(tmp_path / "run", reset_inside=reset_inside)
    assert run.signal("backward/passes").tolist() == [K] * STEPS
    assert run.signal("backward/resets").tolist() == made == [K - 1] * STEPS
    [f] = gradient_accumulation(run)
    assert f.code == "TL613" and f.severity.value == "error"
    assert f.evidence["steps_reset"] == STEPS and f.evidence["median_passes"] == K
    assert "after optimizer.step()" in f.fix


def test_quiet_on_correct_accumulation(tmp_path, one_thread):
    run, made = _accumulating(tmp_path / "run")
    assert run.signal("backward/passes").tolist() == [K] * STEPS
    assert run.signal("backward/resets").tolist() == made == [0] * STEPS
    assert gradient_accumulation(run) == []


def test_quiet_on_losses_not_divided_by_the_count(tmp_path, one_thread):
    """The other fault of the loop is a learning rate k times larger in every recorded fact:
    not seen (the rule's docstring), and the passes are recorded as they were."""
    run, _ = _accumulating(tmp_path / "run", divide=False)
    assert run.signal("backward/resets").tolist() == [0] * STEPS
    assert gradient_accumulation(run) == []


def test_quiet_on_one_pass_training(tmp_path, one_thread):
    from _contract_runs import regression, train
    import torch
    run = open_run(train(tmp_path / "run", torch.nn.Linear(8, 1), regression(256),
                         lambda out, y: torch.nn.functional.mse_loss(out[:, 0], y), steps=12))
    assert run.signal("backward/passes").tolist() == [1] * 12
    assert run.signal("backward/resets").tolist() == [0] * 12
    assert gradient_accumulation(run) == []


def test_quiet_on_a_loop_that_now_and_then_skips_a_batch_after_backward(tmp_path, one_thread):
    """A spike check that drops a batch after its backward (no step): the next step takes two
    passes with a reset between them, a minority of the steps, not accumulation."""
    import torch
    import tracelab
    model = _mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    g = torch.Generator().manual_seed(1)
    with tracelab.Recorder(str(tmp_path / "run"), model=model, optimizer=opt) as rec:
        for s in range(60):
            opt.zero_grad()
            x = torch.randn(8, 6, generator=g)
            loss = torch.nn.functional.mse_loss(model(x)[:, 0], x.sum(1))
            loss.backward()
            if s % 10 == 5:
                continue
            opt.step()
            rec.step(loss=loss)
    run = open_run(tmp_path / "run")
    passes = run.signal("backward/passes")
    assert (passes == 2).sum() == 6 and (passes == 1).sum() == len(passes) - 6
    assert (run.signal("backward/resets") == 1).sum() == 6
    assert gradient_accumulation(run) == []


def test_quiet_on_a_gan(tmp_path, one_thread):
    """DCGAN's loop with the discriminator's update after the generator's: the generator's pass
    adds to the discriminator's grads, which its zero_grad() resets before its own passes."""
    import torch
    import tracelab
    torch.manual_seed(0)
    gen = torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.ReLU(), torch.nn.Linear(16, 6))
    disc = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    model = torch.nn.ModuleDict({"g": gen, "d": disc})
    opt_g = torch.optim.Adam(gen.parameters(), lr=1e-3)
    opt_d = torch.optim.Adam(disc.parameters(), lr=1e-3)
    bce = torch.nn.BCEWithLogitsLoss()
    with tracelab.Recorder(str(tmp_path / "run"), model=model,
                           optimizer={"g": opt_g, "d": opt_d}) as rec:
        for _ in range(STEPS):
            real = torch.randn(16, 6) + 2
            fake = gen(torch.randn(16, 4))
            opt_g.zero_grad()
            err_g = bce(disc(fake)[:, 0], torch.ones(16))
            err_g.backward()  # reaches the discriminator's watched bias
            opt_g.step()
            opt_d.zero_grad()  # resets what the generator's pass added there
            bce(disc(real)[:, 0], torch.ones(16)).backward()
            bce(disc(fake.detach())[:, 0], torch.zeros(16)).backward()
            opt_d.step()
            rec.step(loss=err_g)
    run = open_run(tmp_path / "run")
    assert run.signal("backward/passes").tolist() == [3] * STEPS
    assert run.signal("backward/resets").tolist() == [1] * STEPS  # recorded as it happened
    assert gradient_accumulation(run) == []


def test_quiet_when_the_grads_were_assembled_after_backward(tmp_path, one_thread):
    """Gradient surgery: each task's grads read and reset, their sum written into .grad."""
    import torch
    import tracelab
    model = _mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    params = list(model.parameters())
    with tracelab.Recorder(str(tmp_path / "run"), model=model, optimizer=opt) as rec:
        for _ in range(STEPS):
            x = torch.randn(8, 6)
            out = model(x)[:, 0]
            per_task = []
            for target in (x.sum(1), x[:, 0]):
                opt.zero_grad()
                torch.nn.functional.mse_loss(out, target).backward(retain_graph=True)
                per_task.append([p.grad.clone() for p in params])
            for p, *grads in zip(params, *per_task):
                p.grad = sum(grads)
            opt.step()
            rec.step(loss=1.0)
    run = open_run(tmp_path / "run")
    assert run.signal("backward/resets").tolist() == [1] * STEPS
    assert gradient_accumulation(run) == []


def _frames(passes, resets, optimizers=1):
    n = len(passes)
    signals = pd.DataFrame({"step": list(range(n)) * 2, "split": "train",
                            "name": ["backward/passes"] * n + ["backward/resets"] * n,
                            "value": np.r_[np.asarray(passes, float), np.asarray(resets, float)]})
    meta = {"optimizers": {str(i): {"type": "SGD"} for i in range(optimizers)}}
    return Run.from_frames(signals=signals, meta=meta)


def test_rare_resets_few_steps_several_optimizers_and_bad_values_are_quiet():
    assert gradient_accumulation(_frames([4] * 10, [3] * 4 + [0] * 6)) == []  # 40 %
    assert gradient_accumulation(_frames([4] * 4, [3] * 4)) == []  # too few steps
    assert gradient_accumulation(_frames([4] * 10, [3] * 10, optimizers=2)) == []
    assert gradient_accumulation(_frames([np.nan] * 10, [np.inf] * 10)) == []
    assert gradient_accumulation(Run.from_frames()) == []
    [f] = gradient_accumulation(_frames([1] * 5 + [4] * 10, [0] * 5 + [3] * 10))
    assert f.evidence["steps_accumulating"] == 10


def _two_pass(path, method):
    """Two backward passes a step with zero_grad() between them, by design. "sam": sharpness-
    aware minimization (perturb every weight along its grad, backward there, restore, step);
    "fgsm": adversarial training (the input's gradient, then a backward on the perturbed
    batch). Returns the run and whether the watched weight moved between the passes, as torch
    shows it."""
    import torch
    import tracelab
    model = _mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    g = torch.Generator().manual_seed(1)
    watched = model[2].bias  # the smallest parameter
    moved = []
    with tracelab.Recorder(str(path), model=model, optimizer=opt,
                           loss_fn=torch.nn.MSELoss()) as rec:
        for _ in range(STEPS):
            x = torch.randn(8, 6, generator=g)
            x.requires_grad_(method == "fgsm")
            loss = torch.nn.functional.mse_loss(model(x)[:, 0], x.detach().sum(1))
            loss.backward()
            first = watched.detach().clone()
            with torch.no_grad():
                if method == "sam":
                    norm = torch.stack([p.grad.norm() for p in model.parameters()]).norm()
                    eps = [0.05 * p.grad / (norm + 1e-12) for p in model.parameters()]
                    for p, e in zip(model.parameters(), eps):
                        p.add_(e)
                else:
                    x = (x + 0.1 * x.grad.sign()).detach()
            opt.zero_grad()
            out = model(x)[:, 0]
            moved.append(not torch.equal(watched, first))
            torch.nn.functional.mse_loss(out, x.sum(1)).backward()
            if method == "sam":
                with torch.no_grad():
                    for p, e in zip(model.parameters(), eps):
                        p.sub_(e)
            opt.step()
            opt.zero_grad()
            rec.step(loss=loss)
    return open_run(path), moved


def test_quiet_on_sharpness_aware_minimization(tmp_path, one_thread):
    """SAM moves every weight between its two passes: recorded, and not judged."""
    run, moved = _two_pass(tmp_path / "run", "sam")
    assert run.signal("backward/passes").tolist() == [2] * STEPS
    assert run.signal("backward/resets").tolist() == [1] * STEPS  # recorded as it happened
    assert run.signal("backward/weights_moved").tolist() == [float(m) for m in moved]
    assert all(moved)
    assert gradient_accumulation(run) == []


def test_two_passes_without_moved_weights_are_a_warning_that_names_adversarial_training(
        tmp_path, one_thread):
    """FGSM reads as 2 micro-batches with zero_grad between them: whether the passes saw the
    same batch is not recorded, so a warning that says what else it may be."""
    run, moved = _two_pass(tmp_path / "run", "fgsm")
    assert run.signal("backward/weights_moved").tolist() == [0.0] * STEPS and not any(moved)
    [f] = gradient_accumulation(run)
    assert f.severity.value == "warning" and f.evidence["median_passes"] == 2
    assert "adversarial training" in f.message and "sharpness" not in f.message
    accumulated, _ = _accumulating(tmp_path / "acc", reset_inside="none", k=2)
    [f] = gradient_accumulation(accumulated)
    assert f.severity.value == "warning" and "adversarial training" in f.message


def test_a_trace_without_the_weights_movement_names_sam_too():
    """Recorded before backward/weights_moved: two passes may be SAM as well; three or more
    passes are no two-pass method and stay an error."""
    [f] = gradient_accumulation(_frames([2] * 10, [1] * 10))
    assert f.severity.value == "warning" and not f.evidence["weights_moved_recorded"]
    assert "sharpness-aware minimization" in f.message and "adversarial" in f.message
    [f] = gradient_accumulation(_frames([3] * 10, [2] * 10))
    assert f.severity.value == "error" and "adversarial" not in f.message


def test_steps_whose_weights_moved_are_not_judged():
    def frames(moved):
        run = _frames([2] * 10, [1] * 10)
        extra = pd.DataFrame({"step": range(10), "split": "train",
                              "name": "backward/weights_moved", "value": moved})
        return Run.from_frames(signals=pd.concat([run.signals, extra], ignore_index=True),
                               meta={"optimizers": {"0": {"type": "SGD"}}})
    assert gradient_accumulation(frames([1.0] * 10)) == []
    assert gradient_accumulation(frames([1.0] * 6 + [0.0] * 4)) == []  # 4 of 10: a minority
    [f] = gradient_accumulation(frames([0.0] * 10))
    assert f.severity.value == "warning" and f.evidence["weights_moved_recorded"]


def _declared(path, *, step_inside):
    """SGD on a regression with config accumulation_steps=K: the optimizer steps after each
    micro-batch with zero_grad() after the K of them (step_inside), or once after them."""
    import torch
    import tracelab
    model = _mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    g = torch.Generator().manual_seed(1)
    with tracelab.Recorder(str(path), model=model, optimizer=opt, loss_fn=torch.nn.MSELoss(),
                           config={"accumulation_steps": K}) as rec:
        for _ in range(STEPS):
            for _ in range(K):
                x = torch.randn(8, 6, generator=g)
                loss = torch.nn.functional.mse_loss(model(x)[:, 0], x.sum(1))
                (loss / K).backward()
                if step_inside:
                    opt.step()
            if not step_inside:
                opt.step()
            opt.zero_grad()
            rec.step(loss=loss)
    return open_run(path)


def test_fires_on_a_step_inside_a_declared_accumulation_loop(tmp_path, one_thread):
    [f] = gradient_accumulation(_declared(tmp_path / "inside", step_inside=True))
    assert f.evidence["declared_accumulation"] == K and f.severity.value == "error"
    assert gradient_accumulation(_declared(tmp_path / "after", step_inside=False)) == []
