"""The grads as the optimizer used them (loop_checks.GradNorms) against plain torch: the total
norm at the end of backward, in the optimizer's step pre-hook, and what a clip did to them."""
import pytest
import torch

import tracelab
from tracelab.core.run import open_run
from tracelab.core.schema import GRAD, GRAD_NORM_BACKWARD, GRAD_NORM_STEP

MAX_NORM = 0.05  # below every step's gradient norm here: the clip always acts


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.Tanh(), torch.nn.Linear(16, 2))


def _train(path, clip, steps=6, passes=1):
    """Train for real; return the total grad norm each step's backward left (plain torch)."""
    model = _model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    unclipped = []
    with tracelab.Recorder(str(path), model=model, optimizer=opt) as rec:
        for _ in range(steps):
            opt.zero_grad()
            for _ in range(passes):
                x, y = torch.randn(32, 6), torch.randn(32, 2)
                torch.nn.functional.mse_loss(model(x), y).backward()
            unclipped.append(float(torch.linalg.vector_norm(torch.stack(
                [p.grad.double().norm() for p in model.parameters()]))))
            if clip == "before":
                torch.nn.utils.clip_grad_norm_(model.parameters(), MAX_NORM)
            opt.step()
            if clip == "after":  # the bug: the step used the unclipped gradients
                torch.nn.utils.clip_grad_norm_(model.parameters(), MAX_NORM)
            rec.step(loss=1.0)
    return open_run(path), unclipped


def _recorded_total(run):
    """The total norm of the per-layer grad norms recorded at Recorder.step()."""
    norms = run.stat(GRAD, "norm")
    return ((norms ** 2).sum(axis=1) ** 0.5).to_numpy()


def test_without_a_clip_backward_step_and_recorded_norms_agree(tmp_path):
    run, unclipped = _train(tmp_path / "run", clip=None)
    assert run.signal(GRAD_NORM_BACKWARD).tolist() == pytest.approx(unclipped, rel=1e-6)
    assert run.signal(GRAD_NORM_STEP).tolist() == pytest.approx(unclipped, rel=1e-6)
    assert _recorded_total(run).tolist() == pytest.approx(unclipped, rel=1e-6)


def test_a_clip_before_the_step_shows_as_a_step_norm_below_the_backward_norm(tmp_path):
    run, unclipped = _train(tmp_path / "run", clip="before")
    assert run.signal(GRAD_NORM_BACKWARD).tolist() == pytest.approx(unclipped, rel=1e-6)
    assert run.signal(GRAD_NORM_STEP).tolist() == pytest.approx([MAX_NORM] * 6, rel=1e-4)
    assert _recorded_total(run).tolist() == pytest.approx([MAX_NORM] * 6, rel=1e-4)


def test_a_clip_after_the_step_records_the_grads_the_step_used(tmp_path):
    after, unclipped = _train(tmp_path / "after", clip="after")
    before, _ = _train(tmp_path / "before", clip="before")
    # The step used the unclipped grads: its norm is theirs, not the clipped ones'.
    assert after.signal(GRAD_NORM_STEP).tolist() == pytest.approx(unclipped, rel=1e-6)
    assert min(unclipped) > 2 * MAX_NORM
    assert after.signal(GRAD_NORM_STEP).tolist() != pytest.approx(
        before.signal(GRAD_NORM_STEP).tolist(), rel=0.1)
    # What Recorder.step() reads afterwards is the clipped grads: the two differ.
    assert _recorded_total(after).tolist() == pytest.approx([MAX_NORM] * 6, rel=1e-4)


def test_accumulated_passes_give_the_norm_of_the_sum(tmp_path):
    run, totals = _train(tmp_path / "run", clip=None, passes=3)
    assert run.signal(GRAD_NORM_BACKWARD).tolist() == pytest.approx(totals, rel=1e-6)
    assert run.signal(GRAD_NORM_STEP).tolist() == pytest.approx(totals, rel=1e-6)


def test_a_step_on_no_gradient_records_a_norm_of_0_not_nothing(tmp_path):
    # zero_grad() (set_to_none) between backward and step: the step runs with every grad None.
    model = _model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with tracelab.Recorder(str(tmp_path / "run"), model=model, optimizer=opt) as rec:
        for _ in range(4):
            torch.nn.functional.mse_loss(model(torch.randn(8, 6)), torch.randn(8, 2)).backward()
            opt.zero_grad()
            assert all(p.grad is None for p in model.parameters())
            opt.step()
            rec.step(loss=1.0)
    run = open_run(tmp_path / "run")
    assert run.signal(GRAD_NORM_STEP).tolist() == [0.0] * 4
    assert (run.signal(GRAD_NORM_BACKWARD) > 0).all()
