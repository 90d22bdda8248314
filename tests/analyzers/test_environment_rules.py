"""nondeterminism-risk (TL401), gpu-unused (TL402) and input-pipeline-bound (TL403) on
in-memory runs."""
import numpy as np
import pandas as pd

from tracelab.analyzers.gpu_unused import gpu_unused
from tracelab.analyzers.input_pipeline_bound import input_pipeline_bound
from tracelab.analyzers.nondeterminism_risk import nondeterminism_risk
from tracelab.core.run import Run

SAFE = {"cuda_available": False, "seed_set": True, "seed": 0, "cudnn_benchmark": False,
        "cudnn_deterministic": False, "tf32_matmul": False, "tf32_cudnn": True,
        "deterministic_algorithms": False, "devices": []}
GPU = {**SAFE, "cuda_available": True, "devices": ["NVIDIA H100"]}


def _params(device, n=3):
    return {"parameters": [{"name": f"fc{i}.weight", "shape": [64, 64], "device": device}
                           for i in range(n)]}


def _loss(values, step0=0):
    return pd.DataFrame({"step": np.arange(step0, step0 + len(values)), "split": "train",
                         "name": "loss", "value": values, "wall_time": 0.0})


def _run(env, model=None, loss=None, config=None):
    meta = {"environment": env, "config": config or {"lr": 0.1}}
    if model:
        meta["model"] = model
    return Run.from_frames(meta, scalars=loss if loss is not None else _loss(np.ones(20)))


# -- nondeterminism-risk ---------------------------------------------------------------------
def test_no_seed_is_info():
    [f] = nondeterminism_risk(_run({**SAFE, "seed_set": False, "seed": 8731290183}))
    assert f.code == "TL401" and f.severity.value == "info"
    assert "no seed set (torch drew seed 8731290183" in f.message
    assert "Seed torch" in f.fix


def test_cuda_flags_count_only_on_cuda():
    env = {**GPU, "cudnn_benchmark": True, "tf32_matmul": True}
    [f] = nondeterminism_risk(_run(env, _params("cuda:0")))
    for hazard in ("cudnn.benchmark on", "cudnn.deterministic off",
                   "TF32 enabled for matmul and cuDNN convolutions"):
        assert hazard in f.message
    assert nondeterminism_risk(_run(env, _params("cpu"))) == []
    assert nondeterminism_risk(_run(SAFE)) == []


def test_a_diverging_baseline_with_the_same_config_makes_it_a_warning():
    env = {**GPU, "tf32_matmul": True}
    curve = 2 * np.exp(-np.arange(200) / 40) + 0.3
    run = _run(env, _params("cuda:0"), _loss(curve * (1 + np.linspace(0, 0.5, 200))))
    base = _run({**env, "tf32_matmul": False, "devices": ["Tesla V100"]}, _params("cuda:0"),
                _loss(curve))
    [f] = nondeterminism_risk(run, baseline=base)
    assert f.severity.value == "warning" and f.evidence["baseline_loss_gap"] > 0.3
    assert "tf32_matmul False → True" in f.message and "Tesla V100" in f.message
    # Same curve up to noise: still only the hazard.
    close = _run(env, _params("cuda:0"), _loss(curve * 1.01))
    assert nondeterminism_risk(close, baseline=base)[0].severity.value == "info"
    # A different config explains any difference.
    other = _run(env, _params("cuda:0"), _loss(curve * 2), config={"lr": 1.0})
    assert nondeterminism_risk(other, baseline=base)[0].severity.value == "info"


# -- gpu-unused ------------------------------------------------------------------------------
def test_model_on_cpu_with_cuda_available():
    [f] = gpu_unused(_run(GPU, _params("cpu")))
    assert f.code == "TL402" and f.severity.value == "warning"
    assert "NVIDIA H100" in f.message and "all 3 parameters (12.3k values)" in f.message
    assert "model.to(device)" in f.fix


def test_partly_on_cpu_is_info_naming_the_parameters():
    model = _params("cuda:0")
    model["parameters"].append({"name": "head.weight", "shape": [10, 64], "device": "cpu"})
    [f] = gpu_unused(_run(GPU, model))
    assert f.severity.value == "info" and "head.weight" in f.message


def test_quiet_on_gpu_or_without_cuda():
    assert gpu_unused(_run(GPU, _params("cuda:0"))) == []
    assert gpu_unused(_run(SAFE, _params("cpu"))) == []
    assert gpu_unused(Run.from_frames()) == []


# -- input-pipeline-bound --------------------------------------------------------------------
def _timed(data_ms, compute_ms, n=100, seed=0):
    rng = np.random.default_rng(seed)
    data = data_ms / 1000 * rng.lognormal(0, 0.3, n)
    step = data + compute_ms / 1000 * rng.lognormal(0, 0.1, n)
    rows = [pd.DataFrame({"step": np.arange(n), "split": "train", "name": name, "value": v,
                          "wall_time": 0.0}) for name, v in (("data_time", data),
                                                             ("step_time", step))]
    return Run.from_frames(scalars=pd.concat(rows, ignore_index=True))


def test_fires_when_the_loader_dominates():
    [f] = input_pipeline_bound(_timed(data_ms=60, compute_ms=20))
    assert f.code == "TL403" and f.severity.value == "warning"
    assert 0.7 < f.evidence["data_share"] < 0.8 and "num_workers" in f.fix
    assert "% of the training time" in f.message and "median wait" in f.message


def test_quiet_when_compute_dominates_or_the_waits_are_negligible():
    assert input_pipeline_bound(_timed(data_ms=5, compute_ms=50)) == []
    # 70% data share but 0.07 s in all: a toy loop, nothing worth fixing.
    assert input_pipeline_bound(_timed(data_ms=0.7, compute_ms=0.3)) == []
    assert input_pipeline_bound(Run.from_frames()) == []
