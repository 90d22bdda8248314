"""jcjohnson/pytorch-examples autograd/two_layer_net_autograd.py, shrunk: two weight matrices
w1 (D_in, H) and w2 (H, D_out) drawn from randn, no biases, y_pred = x.mm(w1).clamp(min=0).mm(w2),
the summed squared error (y_pred - y).pow(2).sum(), loss.backward() and a hand-written gradient
descent step w -= learning_rate * w.grad, then w.grad.zero_(). The script fits one fixed random
batch for 500 steps at learning_rate 1e-6 with D_in 1000; here each step draws 64 rows from 2,048
rows whose targets a fixed random network gives (D_in 100, H 100, D_out 10), 1,000 steps at
learning_rate 1e-5 (the smaller input sums ten times fewer terms), and 512 held-out rows are
scored every 50 steps. The weights are plain tensors, so the Recorder is given a Module that
holds them as parameters (the update still goes through .data, as in the script).

`bug` plants one fault (None: the script as published):
- "no-zero": the two w.grad.data.zero_() lines left out, so gradients pile up over the steps;
- "lr-1e-4": learning_rate 1e-4, ten times the rate this size trains at.
"""
from __future__ import annotations

import torch

import tracelab
from _u_data import teacher_regression

SOURCE = ("https://github.com/jcjohnson/pytorch-examples/blob/"
          "0d8adca7c5ef427c738fe3a484edc76ab6ddc105/autograd/two_layer_net_autograd.py")
BUGS = (None, "no-zero", "lr-1e-4")


class TwoLayer(torch.nn.Module):
    """The script's two weight tensors, registered so that the Recorder sees them."""

    def __init__(self, D_in: int, H: int, D_out: int):
        super().__init__()
        self.w1 = torch.nn.Parameter(torch.randn(D_in, H))
        self.w2 = torch.nn.Parameter(torch.randn(H, D_out))

    def forward(self, x):
        return x.mm(self.w1).clamp(min=0).mm(self.w2)


def run(run_dir: str, seed: int = 0, bug: str | None = None, steps: int = 1000) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    N, D_in, H, D_out = 64, 100, 100, 10
    x_all, y_all = teacher_regression(seed, 2048 + 512, D_in, D_out)
    x, y, x_val, y_val = x_all[:2048], y_all[:2048], x_all[2048:], y_all[2048:]
    net = TwoLayer(D_in, H, D_out)
    w1, w2 = net.w1, net.w2
    learning_rate = 1e-4 if bug == "lr-1e-4" else 1e-5
    with tracelab.Recorder(run_dir, model=net, config={"lr": learning_rate, "batch_size": N,
                                                       "D_in": D_in, "H": H}) as rec:
        for t in range(steps):
            idx = torch.randint(0, len(x), (N,), generator=gen)
            xb, yb = x[idx], y[idx]
            y_pred = xb.mm(w1).clamp(min=0).mm(w2)
            loss = (y_pred - yb).pow(2).sum()
            loss.backward()
            w1.data -= learning_rate * w1.grad.data
            w2.data -= learning_rate * w2.grad.data
            rec.step(loss=loss, inputs=xb, targets=yb, outputs=y_pred)
            if bug != "no-zero":
                w1.grad.data.zero_()
                w2.grad.data.zero_()
            if (t + 1) % 50 == 0:
                with torch.no_grad():
                    out = net(x_val)
                    val = (out - y_val).pow(2).sum().item() / len(x_val)
                rec.log("val", metrics={"loss": val}, inputs=x_val, targets=y_val,
                        outputs=out)
