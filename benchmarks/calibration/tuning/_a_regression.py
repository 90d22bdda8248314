"""pytorch/examples regression/main.py, kept whole but for its stopping rule: a Linear(4, 1)
fitting a degree-4 polynomial from the features [x, x^2, x^3, x^4], F.smooth_l1_loss and a
hand-written SGD update (param.data.add_(-0.1 * param.grad)) after fc.zero_grad(). It runs a
fixed number of batches instead of stopping once the loss is below 1e-3.

`bug` plants one fault (None: the script as published):
- "flat-target": get_batch returns f(x) flattened to (32,), broadcast against the (32, 1)
  prediction by smooth_l1_loss (PyTorch warns "Using a target size ... different to the input
  size").
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

import tracelab

SOURCE = ("https://github.com/pytorch/examples/blob/77f55b912142e11fcfdf5b530231fb9c52f181e8/"
          "regression/main.py")
BUGS = (None, "flat-target")
POLY_DEGREE = 4


def make_features(x):
    """Builds features i.e. a matrix with columns [x, x^2, x^3, x^4]."""
    x = x.unsqueeze(1)
    return torch.cat([x ** i for i in range(1, POLY_DEGREE + 1)], 1)


def run(run_dir: str, seed: int = 0, bug: str | None = None, steps: int = 300) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    w_target = torch.randn(POLY_DEGREE, 1) * 5
    b_target = torch.randn(1) * 5

    def get_batch(batch_size=32):
        x = make_features(torch.randn(batch_size))
        y = x.mm(w_target) + b_target.item()
        return x, (y.flatten() if bug == "flat-target" else y)

    fc = torch.nn.Linear(POLY_DEGREE, 1)
    with tracelab.Recorder(run_dir, model=fc, loss_fn=torch.nn.SmoothL1Loss(),
                           config={"lr": 0.1, "batch_size": 32}) as rec:
        for _ in range(steps):
            batch_x, batch_y = get_batch()
            fc.zero_grad()
            pred = fc(batch_x)
            output = F.smooth_l1_loss(pred, batch_y)
            output.backward()
            for param in fc.parameters():
                param.data.add_(-0.1 * param.grad)
            rec.step(loss=output, inputs=batch_x, targets=batch_y, outputs=pred)
        with torch.no_grad():
            val_x, val_y = get_batch(256)
            pred = fc(val_x)
            rec.log("val", metrics={"loss": F.smooth_l1_loss(pred, val_y).item()},
                    inputs=val_x, targets=val_y, outputs=pred)
