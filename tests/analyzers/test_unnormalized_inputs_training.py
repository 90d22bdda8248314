"""unnormalized-inputs on real tiny trainings: images in [0, 1] whose border pixels are mostly
zero stay quiet; a raw-unit feature beside them fires."""
import pytest

pytest.importorskip("torch", reason="the tiny trainings need torch (extra 'torch')")

import torch  # noqa: E402
from _contract_runs import train  # noqa: E402
from torch import nn  # noqa: E402

from tracelab.analyzers.unnormalized_inputs import unnormalized_inputs  # noqa: E402
from tracelab.core.run import open_run  # noqa: E402


def _blob_images(n: int, seed: int = 0):
    """Flattened 12x12 images in [0, 1] (ToTensor scale, no mean/std normalization): a bright
    blob near the centre on a black background, so the border pixels are mostly 0 and reach
    only a few levels of 1/255 -- the MNIST picture."""
    g = torch.Generator().manual_seed(seed)
    yy, xx = torch.meshgrid(torch.arange(12.), torch.arange(12.), indexing="ij")
    centre = 5.5 + torch.randn(n, 2, generator=g) * 0.6
    r2 = (yy - centre[:, 0, None, None]) ** 2 + (xx - centre[:, 1, None, None]) ** 2
    x = (torch.round(torch.exp(-r2 / 3.0) * 255) / 255).reshape(n, -1)
    return x, (centre[:, 0] > 5.5).long()


def test_quiet_on_unit_range_images_of_a_real_mlp_training(tmp_path):
    x, y = _blob_images(600)
    path = train(tmp_path / "mlp", nn.Sequential(nn.Linear(144, 32), nn.ReLU(),
                                                 nn.Linear(32, 2)),
                 (x, y), nn.functional.cross_entropy, steps=40)
    run = open_run(path)
    assert len(run.inputs) and float(x.max()) == 1.0
    small = x[:, x.pow(2).mean(0) > 0].pow(2).mean(0).sqrt()
    assert float(small.max() / small.min()) > 100  # scales far apart, all inside [0, 1]
    assert unnormalized_inputs(run) == []
    # The same pixels beside one raw-unit feature (a size in pixels²) fire.
    raw = torch.cat([x, (x.sum(1, keepdim=True) * 40)], 1)
    path = train(tmp_path / "raw", nn.Sequential(nn.Linear(145, 32), nn.ReLU(),
                                                 nn.Linear(32, 2)),
                 (raw, y), nn.functional.cross_entropy, steps=40)
    run = open_run(path)
    assert any("ratio" in f.evidence for f in unnormalized_inputs(run))
