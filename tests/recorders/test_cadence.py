"""Which steps record what: a cadence fixed in advance, a pure function of the settings."""
import numpy as np
import pytest

from tracelab.recorders.cadence import DENSE_STEPS, Cadence
from tracelab.reports.context import grad_cadence, input_cadence


def _steps(test, steps: int = 100) -> list[int]:
    return [s for s in range(steps) if test(s)]


def test_the_defaults_record_norms_every_step_full_grads_every_10th_and_the_rest_every_25th():
    cadence = Cadence()
    dense = list(range(DENSE_STEPS))
    assert _steps(cadence.grads) == dense + list(range(DENSE_STEPS, 100, 10))
    assert _steps(cadence.weights) == dense + [25, 50, 75]
    assert _steps(cadence.grad_norms) == [s for s in range(DENSE_STEPS, 100) if s % 10]
    assert _steps(cadence.activations) == _steps(cadence.inputs) == [0, 25, 50, 75]
    # Every step has its grads' norms, from the full statistics or on their own.
    assert all(cadence.grads(s) != cadence.grad_norms(s) for s in range(100))
    assert cadence.settings() == {"grad_norm_every": 1, "every": 10, "weight_every": 25,
                                  "activation_every": 25, "input_every": 25,
                                  "dense_steps": DENSE_STEPS}


def test_each_setting_decides_its_own_steps():
    cadence = Cadence(grad_norm_every=2, every=3, weight_every=4, activation_every=5,
                      input_every=7, dense_steps=2)
    assert _steps(cadence.grads, 20) == [0, 1, 3, 6, 9, 12, 15, 18]
    assert _steps(cadence.grad_norms, 20) == [2, 4, 8, 10, 14, 16]
    assert _steps(cadence.weights, 20) == [0, 1, 4, 8, 12, 16]
    assert _steps(cadence.activations, 20) == [0, 5, 10, 15]
    assert _steps(cadence.inputs, 20) == [0, 7, 14]
    assert _steps(Cadence(dense_steps=0).grads, 30) == [0, 10, 20]


@pytest.mark.parametrize("option", ["grad_norm_every", "every", "weight_every",
                                    "activation_every", "input_every"])
@pytest.mark.parametrize("value", [0, -1, 1.5, True, "2"])
def test_a_cadence_that_is_not_a_positive_integer_is_refused(option, value):
    with pytest.raises(ValueError, match=f"{option} must be a positive integer, got"):
        Cadence(**{option: value})


def test_runs_recorded_with_the_adaptive_cadence_of_earlier_versions_still_report_it():
    """Runs recorded before the cadence was fixed carry `grad_every` and `input_cadence`."""
    old = {"every": "auto", "grad_budget": 0.015,
           "grad_every": [[0, 1], [256, 2], [384, 4]], "input_every": "auto",
           "input_budget": 0.01, "input_cadence": [[0, 10], [640, 20]]}
    assert grad_cadence(old) == (
        "every step (steps 0-255), then every 2nd step (steps 256-383), then every 4th step "
        "(from step 384), within the Recorder's budget of 1.5% of the training time")
    assert input_cadence(old) == (
        "every 10th step (steps 0-639), then every 20th step (from step 640), within the "
        "Recorder's budget of 1% of the training time")
    assert grad_cadence(Cadence().settings()) is None


torch = pytest.importorskip("torch", reason="the recorder needs torch (extra 'torch')")

import tracelab  # noqa: E402


def _train(run_dir, steps: int, **options):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    grads = []
    with tracelab.Recorder(run_dir, model, opt, **options) as rec:
        for _ in range(steps):
            x = torch.randn(16, 8)
            loss = (model(x) - x[:, :2]).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            grads.append({n: p.grad.detach().clone() for n, p in model.named_parameters()})
            rec.step(loss=loss, inputs=x)
    return tracelab.open_run(run_dir), grads


def test_a_recorder_records_the_steps_its_cadence_names(tmp_path):
    options = dict(grad_norm_every=2, every=3, weight_every=4, activation_every=5,
                   input_every=7)
    steps = DENSE_STEPS + 17
    run, _ = _train(tmp_path / "run", steps, **options)
    cadence = Cadence(**options)
    assert run.meta["recorder"] == dict(cadence.settings(), sample_size=2_000,
                                        cost=run.meta["recorder"]["cost"])
    tn = run.tensors
    grads = tn[tn["kind"] == "grad"]
    full, norms = grads[grads["std"].notna()], grads[grads["std"].isna()]
    for recorded, test in ((full, cadence.grads), (norms, cadence.grad_norms),
                           (tn[tn["kind"] == "weight"], cadence.weights),
                           (tn[tn["kind"] == "update"], cadence.weights),
                           (tn[tn["kind"] == "activation"], cadence.activations),
                           (run.inputs, cadence.inputs)):
        assert np.unique(recorded["step"]).tolist() == _steps(test, steps)
    assert len(run.loss()) == len(run.batches) == steps  # scalars and the sentinel: every step


def test_a_norm_only_step_records_each_grads_norm_as_torch_computes_it(tmp_path):
    steps = DENSE_STEPS + 3
    run, grads = _train(tmp_path / "run", steps)
    tn = run.tensors
    for step in range(DENSE_STEPS + 1, steps):
        rows = tn[(tn["step"] == step) & (tn["kind"] == "grad")].set_index("name")
        assert sorted(rows.index) == sorted(grads[step])
        for name, grad in grads[step].items():
            want = torch.linalg.vector_norm(grad.double()).item()
            assert rows.loc[name, "norm"] == pytest.approx(want, rel=1e-6)
            assert rows.loc[name, "numel"] == grad.numel()
            # The other statistics are not taken on this step: null, never a made-up value.
            assert rows.loc[[name], ["mean", "std", "min", "max", "zero_frac"]].isna().to_numpy().all()


def test_the_same_script_records_the_same_steps_however_slow_the_machine(tmp_path,
                                                                          monkeypatch):
    """A recorder whose statistics are dear records what a cheap one records: the cadence
    never depends on what the recording costs."""
    from tracelab.recorders.parameters import ParameterStats
    steps = DENSE_STEPS + 25
    cheap, _ = _train(tmp_path / "cheap", steps)
    record = ParameterStats.record

    def dear(self, *args, **kwargs):
        for _ in range(5):  # work, not a sleep: a recorder on a busy machine
            torch.randn(256, 256).matmul(torch.randn(256, 256))
        return record(self, *args, **kwargs)
    monkeypatch.setattr(ParameterStats, "record", dear)
    slow, _ = _train(tmp_path / "slow", steps)
    for table in ("tensors", "inputs"):
        a, b = getattr(cheap, table), getattr(slow, table)
        assert a[["step", "kind" if table == "tensors" else "feature"]].equals(
            b[["step", "kind" if table == "tensors" else "feature"]])


@pytest.mark.parametrize("option", ["every", "grad_norm_every", "weight_every",
                                    "activation_every", "input_every", "sample_size"])
def test_a_cadence_of_true_is_refused_not_taken_for_1(tmp_path, option):
    with pytest.raises(ValueError, match=f"{option} must be a positive integer, got True"):
        tracelab.Recorder(tmp_path / "run", **{option: True})
    assert not (tmp_path / "run").exists()


def test_grad_norms_beyond_float32s_squares_are_taken_in_float64():
    from tracelab.recorders.stats import norms
    tensors = [torch.full((10,), 1e-25), torch.full((10,), 1e25), torch.zeros(3),
               torch.tensor([1.0, float("nan")]), torch.randn(50)]
    got = norms(tensors).numpy()
    want = [torch.linalg.vector_norm(t.double()).item() for t in tensors]
    np.testing.assert_allclose(got, want, rtol=1e-6)
