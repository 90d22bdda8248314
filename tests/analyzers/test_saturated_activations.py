"""saturated-activations: hidden sigmoid/tanh layers stuck at their bounds; the output is exempt."""
import numpy as np
import pytest
from dynamics_frames import make_run, model_meta, tensor_rows

from tracelab.analyzers.saturated_activations import saturated_activations

STEPS = list(range(0, 200, 10))
MODULES = [("fc1", "Linear"), ("tanh1", "Tanh"), ("fc2", "Linear"), ("out", "Sigmoid")]


def _run(tanh1, out=0.2):
    n = len(STEPS)
    per = {"fc1": {"saturated_frac": [np.nan] * n}, "tanh1": {"saturated_frac": tanh1},
           "fc2": {"saturated_frac": [np.nan] * n}, "out": {"saturated_frac": [out] * n}}
    return make_run(model_meta(modules=MODULES),
                    tensors=[tensor_rows("activation", per, steps=STEPS)])


def test_fires_on_a_saturated_hidden_tanh():
    [f] = saturated_activations(_run(np.linspace(0.3, 0.95, len(STEPS))))
    assert f.code == "TL204" and f.severity.value == "warning" and f.subject == "tanh1"
    assert f.evidence["saturated_frac"] > 0.8 and "(Tanh)" in f.message


def test_quiet_on_a_healthy_tanh_and_on_a_saturated_output_sigmoid():
    assert saturated_activations(_run(np.full(len(STEPS), 0.05), out=0.99)) == []


def test_quiet_when_saturation_is_only_transient():
    values = np.full(len(STEPS), 0.1)
    values[3:8] = 0.9  # early, recovered
    assert saturated_activations(_run(values)) == []


# -- real tiny trainings: is the gradient starved before the saturated layer? ---------------------
def _mlp_with_a_huge_layer(tmp_path, scale):
    """A tanh MLP on separable blobs whose middle Linear starts `scale` times too large: the
    Tanh after it saturates; at 30x its units sit deep at their bounds."""
    torch = pytest.importorskip("torch", reason="the tiny trainings need torch (extra 'torch')")
    from _contract_runs import blobs, train
    from torch import nn
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 32), nn.Tanh(),
                        nn.Linear(32, 4))
    with torch.no_grad():
        net[2].weight.mul_(scale)
    return train(tmp_path / f"x{scale}", net, blobs(512), nn.CrossEntropyLoss(), steps=120)


def test_fires_where_the_saturated_tanh_starves_the_layer_that_feeds_it(tmp_path):
    import tracelab
    [f] = saturated_activations(tracelab.open_run(_mlp_with_a_huge_layer(tmp_path, 30.0)))
    assert f.subject == "3" and f.evidence["saturated_frac"] > 0.8
    assert f.evidence["feeding_layer"] == "2.weight"
    assert f.evidence["feeding_grad_share"] < 0.02 and "which feeds it" in f.message


def test_quiet_on_a_gan_whose_saturated_discriminator_still_trains_through(tmp_path):
    pytest.importorskip("torch", reason="the tiny trainings need torch (extra 'torch')")
    import tracelab
    from _gan_training import train
    run = tracelab.open_run(train(tmp_path / "gan", steps=800, seed=0))
    assert saturated_activations(run) == []
    # Its Tanh is saturated all the same: only the gradient reaching D.2 clears it.
    [f] = saturated_activations(run, starved=1.0)
    assert f.subject == "D.3" and f.evidence["saturated_frac"] > 0.8
    assert 0.02 < f.evidence["feeding_grad_share"] < 1.0
