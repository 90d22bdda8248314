"""The grad statistics' cadence under the Recorder's cost budget (`every=None`)."""
import time

import numpy as np
import pytest

from tracelab.recorders.cadence import (AUTO_FROM, INPUT_EVERY, INPUT_WINDOW, MAX_EVERY,
                                        MIN_COST_S, WINDOW, GradCadence, InputCadence)


def _run(cadence: GradCadence, steps: range, wall: float, cost_per_record: float) -> None:
    for step in steps:
        recorded = step % cadence.every == 0
        cadence.observe(step, wall, cost_per_record if recorded else 0.0, recorded)


def test_dear_statistics_stretch_the_cadence_by_doubling_until_they_fit():
    cadence = GradCadence(budget=0.02)
    # 0.6 ms of a 10 ms step: 6 % every step, 3 % every 2nd, 1.5 % every 4th.
    _run(cadence, range(AUTO_FROM + 3 * WINDOW), wall=0.010, cost_per_record=0.0006)
    assert cadence.changes == [(0, 1), (AUTO_FROM, 2), (AUTO_FROM + WINDOW, 4)]
    assert cadence.every == 4
    # Cheaper again (another phase of training): at a quarter of the budget it halves.
    _run(cadence, range(AUTO_FROM + 3 * WINDOW, AUTO_FROM + 5 * WINDOW), wall=0.010,
         cost_per_record=0.00001)
    assert cadence.changes[-2:] == [(AUTO_FROM + 4 * WINDOW, 2), (AUTO_FROM + 5 * WINDOW, 1)]
    assert cadence.settings() == {"every": "auto", "grad_budget": 0.02, "grad_every": [
        [0, 1], [256, 2], [384, 4], [768, 2], [896, 1]]}
    # Each change takes effect on a step the new cadence records.
    assert all(start % every == 0 for start, every in cadence.changes)


def test_cheap_statistics_and_the_run_start_keep_every_step():
    cadence = GradCadence(budget=0.02)
    _run(cadence, range(AUTO_FROM - 1), wall=0.001, cost_per_record=0.0009)  # 90 %, early
    assert cadence.changes == [(0, 1)]
    # Its first decision reads the window before it: a dear start (compiling, say) is past.
    cadence = GradCadence(budget=0.02)
    _run(cadence, range(AUTO_FROM - WINDOW), wall=0.001, cost_per_record=0.0009)
    # A toy model: most of its step, but under MIN_COST_S a record: not worth a gap.
    _run(cadence, range(AUTO_FROM - WINDOW, AUTO_FROM + 5 * WINDOW), wall=MIN_COST_S,
         cost_per_record=MIN_COST_S / 2)
    assert cadence.changes == [(0, 1)]
    # Within the budget: every step.
    cadence = GradCadence(budget=0.02)
    _run(cadence, range(AUTO_FROM + 5 * WINDOW), wall=0.010, cost_per_record=0.00019)
    assert cadence.changes == [(0, 1)]


def test_records_that_waited_now_and_then_do_not_stretch_the_cadence():
    # 50 us a record of a 10 ms step, but one in 8 waits 3 ms (for the interpreter the writer
    # thread held, say): the mean, 425 us, passes MIN_COST_S and 2 % of the step, and would
    # stretch the cadence; the typical record does not.
    cadence = GradCadence(budget=0.02)
    for step in range(AUTO_FROM + 3 * WINDOW):
        wait = 0.003 if step % 8 == 5 else 0.0
        cadence.observe(step, 0.010 + wait, 0.00005 + wait, True)
    assert cadence.changes == [(0, 1)]
    # A record that is dear every time still stretches it.
    cadence = GradCadence(budget=0.02)
    for step in range(AUTO_FROM + WINDOW):
        cadence.observe(step, 0.0016, 0.0006 if step % 2 == 0 else 0.0007, step % cadence.every == 0)
    assert cadence.changes[:2] == [(0, 1), (AUTO_FROM, 2)]


def test_the_cadence_never_passes_max_every():
    cadence = GradCadence(budget=0.02)
    _run(cadence, range(AUTO_FROM + 10 * WINDOW), wall=0.001, cost_per_record=0.001)
    assert cadence.every == MAX_EVERY and len(cadence.changes) == 1 + int(np.log2(MAX_EVERY))


def test_a_dear_input_profile_stretches_its_cadence_from_its_first_window():
    cadence = InputCadence(budget=0.01)
    # 1 ms a profile of a 2 ms step, every 10th step: 5 %, then 2.5 %, then 1.25 %.
    _run(cadence, range(3 * INPUT_WINDOW + 5), wall=0.002, cost_per_record=0.001)
    assert cadence.changes == [(0, INPUT_EVERY), (INPUT_WINDOW, 20), (2 * INPUT_WINDOW, 40),
                               (3 * INPUT_WINDOW, 80)]
    assert all(start % every == 0 for start, every in cadence.changes)
    assert cadence.settings() == {"input_every": "auto", "input_budget": 0.01,
                                  "input_cadence": [[0, 10], [640, 20], [1280, 40], [1920, 80]]}
    # Never past every 80th step, and back to every 10th when the profiles get cheap.
    _run(cadence, range(3 * INPUT_WINDOW + 5, 6 * INPUT_WINDOW), wall=0.002,
         cost_per_record=0.001)
    assert cadence.every == 80
    _run(cadence, range(6 * INPUT_WINDOW, 9 * INPUT_WINDOW), wall=0.010,
         cost_per_record=MIN_COST_S)
    assert cadence.every == INPUT_EVERY


def test_a_short_run_or_a_cheap_input_profile_keeps_every_10th_step():
    cadence = InputCadence(budget=0.01)
    _run(cadence, range(INPUT_WINDOW - 1), wall=0.001, cost_per_record=0.001)
    assert cadence.changes == [(0, INPUT_EVERY)]
    cadence = InputCadence(budget=0.01)  # a profile under MIN_COST_S: not worth a gap
    _run(cadence, range(3 * INPUT_WINDOW), wall=0.001, cost_per_record=MIN_COST_S / 2)
    assert cadence.changes == [(0, INPUT_EVERY)]


torch = pytest.importorskip("torch", reason="the recorder needs torch (extra 'torch')")

import tracelab  # noqa: E402
from tracelab.recorders.parameters import ParameterStats  # noqa: E402
from tracelab.recorders.inputs import InputStats  # noqa: E402
from tracelab.reports.context import grad_cadence, input_cadence, recorded  # noqa: E402


def _train(run_dir, steps: int, slow_stats: bool, monkeypatch, *, slow_profile: bool = False,
           **options):
    """A tiny linear model; with `slow_stats`, each record of its statistics costs 2 ms
    more, as a wide model's read of its grads does; with `slow_profile`, each profile of its
    input batch (then given to step()) 5 ms more, as a batch of thousands of features does."""
    for slow_down, cls, seconds in ((slow_stats, ParameterStats, 0.002),
                                    (slow_profile, InputStats, 0.005)):
        if slow_down:
            monkeypatch.setattr(cls, "record", _slowed(cls.record, seconds))
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    with tracelab.Recorder(run_dir, model, opt, **options) as rec:
        for _ in range(steps):
            x = torch.randn(16, 8)
            loss = (model(x) - x[:, :2]).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            rec.step(loss=loss, inputs=x if slow_profile else None)
    monkeypatch.undo()
    return tracelab.open_run(run_dir)


def _slowed(record, seconds: float):
    def slow(self, *args, **kwargs):
        time.sleep(seconds)
        return record(self, *args, **kwargs)
    return slow


def test_a_recorder_whose_grad_statistics_cost_much_records_them_less_often(tmp_path,
                                                                           monkeypatch):
    steps = AUTO_FROM + 2 * WINDOW + 20
    run = _train(tmp_path / "auto", steps, True, monkeypatch)
    settings = run.meta["recorder"]
    # 2 ms of a step of about 2 ms: past the budget at every cadence, so it doubles each window
    assert settings["every"] == "auto" and settings["grad_budget"] == 0.015
    assert settings["grad_every"] == [[0, 1], [AUTO_FROM, 2], [AUTO_FROM + WINDOW, 4],
                                      [AUTO_FROM + 2 * WINDOW, 8]]
    steps_with_grads = np.unique(run.tensors.loc[run.tensors["kind"] == "grad", "step"])
    expected = [s for s in range(steps) if s < AUTO_FROM
                or (s < AUTO_FROM + WINDOW and s % 2 == 0)
                or (s < AUTO_FROM + 2 * WINDOW and s % 4 == 0) or s % 8 == 0]
    assert steps_with_grads.tolist() == expected
    assert len(run.loss()) == steps  # the loss and the other scalars keep every step
    assert grad_cadence(settings) == (
        "every step (steps 0-255), then every 2nd step (steps 256-383), then every 4th step "
        "(steps 384-511), then every 8th step (from step 512), within the Recorder's budget "
        "of 1.5% of the training time")
    assert ("gradient stats cadence", grad_cadence(settings)) in recorded(run)["rows"]


def test_a_cadence_the_user_gave_is_kept_whatever_it_costs(tmp_path, monkeypatch):
    steps = AUTO_FROM + WINDOW + 10
    run = _train(tmp_path / "every1", steps, True, monkeypatch, every=1)
    assert run.meta["recorder"]["every"] == 1 and "grad_every" not in run.meta["recorder"]
    grads = run.tensors[run.tensors["kind"] == "grad"]
    assert np.unique(grads["step"]).tolist() == list(range(steps))
    assert grad_cadence(run.meta["recorder"]) is None


def test_cheap_grad_statistics_keep_every_step_by_default(tmp_path, monkeypatch):
    steps = AUTO_FROM + WINDOW + 10
    run = _train(tmp_path / "cheap", steps, False, monkeypatch)
    assert run.meta["recorder"]["grad_every"] == [[0, 1]]
    grads = run.tensors[run.tensors["kind"] == "grad"]
    assert np.unique(grads["step"]).tolist() == list(range(steps))


def test_steps_that_waited_for_something_else_do_not_dilute_the_cost():
    # Every 10th step waits 1 s for an evaluation: counted, the statistics would look cheap.
    cadence = GradCadence(budget=0.02)
    for step in range(AUTO_FROM):
        cadence.observe(step, 1.0 if step % 10 == 9 else 0.010, 0.0006, True)
    assert cadence.changes == [(0, 1), (AUTO_FROM, 2)]


def test_a_launched_distributed_run_keeps_every_step(tmp_path, monkeypatch):
    # torchrun sets WORLD_SIZE before the process group exists: rank 0 must not adapt alone.
    monkeypatch.setenv("WORLD_SIZE", "2")
    rec = tracelab.Recorder(tmp_path / "run")
    assert rec._cadence is None and rec.every == 1
    assert rec._input_cadence is None and rec.input_every == 10
    assert rec._settings["input_every"] == 10
    rec.close()
    monkeypatch.setenv("WORLD_SIZE", "1")
    rec = tracelab.Recorder(tmp_path / "run2")
    assert rec._cadence is not None and rec._input_cadence is not None
    rec.close()


def test_a_recorder_whose_input_profile_costs_much_profiles_less_often(tmp_path, monkeypatch):
    """The input cadence doubles at each window from step 640 on; the batch check stays every
    step."""
    steps = 2 * INPUT_WINDOW + 50
    run = _train(tmp_path / "run", steps, False, monkeypatch, slow_profile=True, every=10)
    settings = run.meta["recorder"]
    assert settings["input_every"] == "auto" and settings["input_budget"] == 0.01
    assert settings["input_cadence"] == [[0, 10], [INPUT_WINDOW, 20], [2 * INPUT_WINDOW, 40]]
    profiled = np.unique(run.inputs["step"]).tolist()
    assert profiled == [s for s in range(steps) if s % 10 == 0 and (
        s < INPUT_WINDOW or s % 20 == 0 and (s < 2 * INPUT_WINDOW or s % 40 == 0))]
    assert len(run.batches) == steps  # the per-step batch check is not on the cadence
    assert input_cadence(settings) == (
        "every 10th step (steps 0-639), then every 20th step (steps 640-1,279), then every "
        "40th step (from step 1,280), within the Recorder's budget of 1% of the training time")
    assert ("input profile cadence", input_cadence(settings)) in recorded(run)["rows"]


def test_an_input_cadence_the_user_gave_is_kept_whatever_it_costs(tmp_path, monkeypatch):
    run = _train(tmp_path / "run", INPUT_WINDOW + 30, False, monkeypatch, slow_profile=True,
                 every=10, input_every=10)
    assert np.unique(run.inputs["step"]).tolist() == list(range(0, INPUT_WINDOW + 30, 10))
    assert run.meta["recorder"]["input_every"] == 10 and "input_cadence" not in run.meta["recorder"]
    assert input_cadence(run.meta["recorder"]) is None


@pytest.mark.parametrize("split", ["val", "train"])
def test_dear_profiles_of_log_do_not_stretch_the_step_inputs_cadence(tmp_path, monkeypatch,
                                                                     split):
    """log() profiles every batch it is given, whatever the cadence (an evaluation's, or more
    train batches): the writer's CPU time on those is not the cost of step()'s profiles."""
    from tracelab.recorders import inputs as inputs_module
    profile = inputs_module.array_profile

    def dear_for_logged_batches(a, rng):
        start = time.thread_time()
        while a.shape[0] == 32 and time.thread_time() - start < 0.002:  # CPU, as a wide one
            pass
        return profile(a, rng)
    monkeypatch.setattr(inputs_module, "array_profile", dear_for_logged_batches)
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 2)
    with tracelab.Recorder(tmp_path / "run", model, every=10) as rec:
        for step in range(INPUT_WINDOW + 10):
            x = torch.randn(16, 8)
            rec.step(loss=model(x).pow(2).mean(), inputs=x)
            rec.log(split, inputs=torch.randn(32, 8))  # 32 rows: the dear ones
    settings = tracelab.open_run(tmp_path / "run").meta["recorder"]
    assert settings["input_cadence"] == [[0, 10]]


@pytest.mark.parametrize("option", ["every", "weight_every", "activation_every", "input_every",
                                    "sample_size"])
def test_a_cadence_of_true_is_refused_not_taken_for_1(tmp_path, option):
    with pytest.raises(ValueError, match=f"{option} must be a positive integer, got True"):
        tracelab.Recorder(tmp_path / "run", **{option: True})
    assert not (tmp_path / "run").exists()
