"""nonfinite-values: the first NaN/Inf is found and its earliest source named in causal order."""
import numpy as np
import pandas as pd
from dynamics_frames import make_run, scalar_rows, tensor_rows

from tracelab.analyzers.nonfinite_values import nonfinite_values

N = 20


def _counts(bad_from=None, n=N, count=4):
    nan = np.zeros(n, dtype=np.int64)
    if bad_from is not None:
        nan[bad_from:] = count
    return {"norm": np.where(nan > 0, np.nan, 1.0), "nan_count": nan, "inf_count": [0] * n}


def _loss(bad_from=None, value=np.nan):
    loss = np.linspace(2.0, 1.0, N)
    if bad_from is not None:
        loss[bad_from:] = value
    return scalar_rows("loss", loss)


def _inputs(bad_step, split="train"):
    return pd.DataFrame({"step": list(range(N)), "split": split, "feature": "x3",
                         "dtype": "float32", "count": 32, "mean": 0.0,
                         "nan_count": [2 if s == bad_step else 0 for s in range(N)],
                         "inf_count": 0})


def test_an_input_nan_is_named_before_what_it_spreads_to():
    acts = tensor_rows("activation", {"fc1": _counts(10), "act1": _counts(10)})
    grads = tensor_rows("grad", {"fc1.weight": _counts(10)})
    weights = tensor_rows("weight", {"fc1.weight": _counts(10)})
    run = make_run(scalars=[_loss(10)], tensors=[acts, grads, weights], inputs=_inputs(10))
    [f] = nonfinite_values(run)
    assert f.code == "TL104" and f.severity.value == "error"
    assert f.subject == "x3" and f.steps == (10, N - 1)
    assert "step 10 in the train input batch's feature 'x3' (2 NaN, 0 Inf)" in f.message
    assert "then spread to activation, loss, grad, weight" in f.message
    assert f.evidence["steps_nonfinite"] == N - 10


def test_the_first_activation_in_forward_order_is_named():
    acts = tensor_rows("activation", {"embed": _counts(), "attn": _counts(5), "mlp": _counts(5)})
    run = make_run(scalars=[_loss(5)], tensors=[acts])
    [f] = nonfinite_values(run)
    assert f.subject == "attn" and "output of module 'attn'" in f.message


def test_an_earlier_step_wins_over_causal_order():
    acts = tensor_rows("activation", {"fc1": _counts(8)})
    grads = tensor_rows("grad", {"fc1.weight": _counts(6), "fc2.weight": _counts(6)})
    run = make_run(scalars=[_loss(9, np.inf)], tensors=[acts, grads])
    [f] = nonfinite_values(run)
    # Gradients are produced output side first: fc2 before fc1.
    assert f.steps[0] == 6 and f.subject == "fc2.weight" and "gradient of" in f.message
    assert f.severity.value == "error"


def test_a_nonfinite_loss_alone_is_an_error():
    [f] = nonfinite_values(make_run(scalars=[_loss(12, np.inf)]))
    assert f.subject == "loss" and f.evidence["inf_count"] == 1 and f.evidence["step"] == 12


def test_gradient_overflow_alone_is_info_as_with_a_gradient_scaler():
    nan = np.zeros(N, dtype=np.int64)
    nan[[4, 11]] = 1  # two skipped steps; loss and weights stay finite
    grads = tensor_rows("grad", {"fc.weight": {"norm": [1.0] * N, "inf_count": nan,
                                                "nan_count": [0] * N}})
    weights = tensor_rows("weight", {"fc.weight": _counts()})
    [f] = nonfinite_values(make_run(scalars=[_loss()], tensors=[grads, weights]))
    assert f.severity.value == "info" and "gradient scaler" in f.message


def test_nonfinite_inputs_with_a_finite_loss_are_a_warning():
    run = make_run(scalars=[_loss()], inputs=_inputs(3))
    [f] = nonfinite_values(run)
    assert f.severity.value == "warning" and f.subject == "x3"


def test_the_split_of_a_bad_input_batch_is_named():
    [f] = nonfinite_values(make_run(scalars=[_loss()], inputs=_inputs(7, split="val")))
    assert "the val input batch's feature 'x3'" in f.message


def test_quiet_when_everything_is_finite():
    acts = tensor_rows("activation", {"fc1": _counts()})
    run = make_run(scalars=[_loss()], tensors=[acts], inputs=_inputs(None))
    assert nonfinite_values(run) == []


def test_a_validation_loss_that_is_never_finite_is_named():
    # The train loss is finite: only the evaluation is broken (a mean over an empty split).
    val = scalar_rows("loss", [np.nan] * 4, split="val", steps=[4, 9, 14, 19])
    [f] = nonfinite_values(make_run(scalars=[_loss(), val]))
    assert f.severity.value == "warning" and f.subject == "val loss"
    assert f.message.startswith("The first NaN/Inf appeared at step 4 in the val loss (1 NaN")
    assert "evaluation loop" in f.fix


def test_a_train_loss_that_breaks_first_is_named_before_the_validation_loss():
    val = scalar_rows("loss", [1.0, np.nan, np.nan, np.nan], split="val", steps=[4, 9, 14, 19])
    [f] = nonfinite_values(make_run(scalars=[_loss(6), val]))
    assert f.subject == "loss" and f.severity.value == "error" and f.evidence["step"] == 6


def test_quiet_when_the_validation_loss_is_finite():
    val = scalar_rows("loss", [1.0, 0.9, 0.8, 0.7], split="val", steps=[4, 9, 14, 19])
    assert nonfinite_values(make_run(scalars=[_loss(), val])) == []
