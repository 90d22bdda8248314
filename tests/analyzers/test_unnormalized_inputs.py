"""unnormalized-inputs (TL303): raw pixels, large magnitudes, scales orders of magnitude apart;
standardized, min-max scaled, heavy-tailed, one-hot and id features stay quiet."""
import numpy as np
import pandas as pd
import pytest
from _data_frames import input_frames
from sklearn.datasets import load_breast_cancer, load_diabetes, load_wine
from sklearn.preprocessing import MinMaxScaler, StandardScaler

from tracelab.analyzers.unnormalized_inputs import unnormalized_inputs
from tracelab.core.run import Run

RNG = np.random.default_rng(0)
CONV = {"model": {"modules": [{"path": "conv", "type": "Conv2d"}]}}
EMBEDDING = {"model": {"modules": [{"path": "emb", "type": "Embedding"}]}}


def _run(x, meta=None, **kw):
    return Run.from_frames(meta, **input_frames({"train": x}, **kw))


def test_raw_tabular_features_fire_with_both_patterns():
    x, _ = load_breast_cancer(return_X_y=True)
    found = {f.evidence.get("ratio") is not None: f for f in unnormalized_inputs(_run(x))}
    large, spread = found[False], found[True]
    assert large.code == "TL303" and large.severity.value == "warning"
    assert "far from unit scale" in large.message and "'x/23' (mean 881" in large.message
    assert spread.evidence["ratio"] > 1e4 and spread.subject == "x/23 vs x/19"
    assert "StandardScaler" in spread.fix


def test_polynomial_features_of_a_standardized_input_are_information():
    x = np.random.default_rng(1).normal(0, 1.05, 2000)
    [f] = unnormalized_inputs(_run(np.c_[x, x ** 2, x ** 3, x ** 4]))  # x**4: rms 12
    assert f.severity.value == "info" and f.subject == "x/3" and "far from unit" in f.message


def test_raw_pixels_of_a_conv_model_or_uint8_images():
    pixels = RNG.integers(0, 256, (300, 3)).astype(float)
    [f] = unnormalized_inputs(_run(pixels, CONV, names=["channel[0]", "channel[1]", "channel[2]"]))
    assert "raw pixel values" in f.message and f.subject == "3 features" and "255" in f.fix
    [f] = unnormalized_inputs(_run(pixels, dtypes={"x/0": "uint8", "x/1": "uint8",
                                                   "x/2": "uint8"}))
    assert "raw pixel values" in f.message


@pytest.mark.parametrize("loader", [load_breast_cancer, load_wine, load_diabetes])
@pytest.mark.parametrize("scaler", [StandardScaler, MinMaxScaler])
def test_quiet_on_scaled_real_data(loader, scaler):
    x, _ = loader(return_X_y=True)
    assert unnormalized_inputs(_run(scaler().fit_transform(x))) == []


def test_quiet_on_heavy_tails_and_rare_indicators():
    z = RNG.standard_t(2, size=(5000, 3))
    z = (z - z.mean(0)) / z.std(0)                       # outliers reach |z| of 30 and more
    flags = (RNG.random((5000, 2)) < 0.002).astype(float)  # rare one-hot columns
    assert np.abs(z).max() > 20
    assert unnormalized_inputs(_run(np.c_[z, flags])) == []


def test_category_ids_stay_quiet_as_integers_or_next_to_an_embedding():
    x = np.c_[RNG.normal(size=3000), RNG.integers(0, 500, 3000)]
    assert unnormalized_inputs(_run(x, dtypes={"x/1": "int64"})) == []
    assert unnormalized_inputs(_run(x, EMBEDDING)) == []
    # Without an embedding a float-coded id reaches a linear layer as a number.
    assert unnormalized_inputs(_run(x)) != []


def test_a_raw_table_with_dates_is_not_judged():
    frame = pd.DataFrame({"ts": pd.date_range("2024-01-01", periods=500, freq="h"),
                          "amount": RNG.lognormal(3, 1, 500)})
    assert unnormalized_inputs(_run(frame)) == []


def test_empty_run():
    assert unnormalized_inputs(Run.from_frames()) == []
