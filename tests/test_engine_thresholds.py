"""Threshold overrides from config: checked against each rule's keyword-only defaults."""
import numpy as np
import pandas as pd
import pytest

import tracelab
from tracelab.core.config import Config
from tracelab.core.errors import ConfigError
from tracelab.core.run import Run


def _run():
    rng = np.random.default_rng(0)
    loss = 0.5 * np.exp(0.1 * rng.standard_normal(200))
    loss[150] = 5.0
    return Run.from_frames(scalars=pd.DataFrame({"step": range(200), "split": "train",
                                                 "name": "loss", "value": loss}))


def _config(**thresholds):
    return Config.from_mapping({"rules": {"loss-spike": thresholds}}, "tracelab.toml")


def test_an_override_reaches_the_rule():
    assert [f.rule for f in tracelab.analyze(_run(), select=["loss-spike"]).findings] == [
        "loss-spike"]
    quiet = tracelab.analyze(_run(), config=_config(z=1000.0), select=["loss-spike"])
    assert quiet.findings == [] and quiet.errors == []


def test_an_int_given_for_a_float_threshold_is_fine():
    assert tracelab.analyze(_run(), config=_config(z=12), select=["TL102"]).errors == []


@pytest.mark.parametrize("value", [50.0, "50", True])
def test_an_int_threshold_refuses_other_types(value):
    with pytest.raises(ConfigError, match=r"loss-spike.window = .*; expected an int like 50"):
        tracelab.analyze(_run(), config=_config(window=value))


def test_an_unknown_threshold_is_named():
    with pytest.raises(ConfigError, match="has no threshold 'windw'"):
        tracelab.analyze(_run(), config=_config(windw=10))


def test_a_rule_that_reads_findings_is_configured_selected_and_run_like_any_other():
    cfg = Config.from_mapping({"rules": {"learning-rate-too-high": {"far_above": 30.0}}},
                              "tracelab.toml")
    d = tracelab.analyze(_run(), config=cfg)
    assert d.errors == [] and d.rules_run[-1] == "learning-rate-too-high"  # after the others
    assert "learning-rate-too-high" not in tracelab.analyze(
        _run(), ignore=["TL208"]).rules_run
    with pytest.raises(ConfigError, match="learning-rate-too-high"):
        tracelab.analyze(_run(), config=Config.from_mapping(
            {"rules": {"learning-rate-too-high": {"far_abov": 30.0}}}, "tracelab.toml"))
