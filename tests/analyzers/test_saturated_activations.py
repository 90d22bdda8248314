"""saturated-activations: hidden sigmoid/tanh layers stuck at their bounds; the output is exempt."""
import numpy as np
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
