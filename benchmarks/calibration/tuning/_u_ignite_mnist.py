"""pytorch/ignite examples/mnist/mnist.py, shrunk: its Net (conv 1->10 k5, max-pool, ReLU,
conv 10->20 k5 with Dropout2d, max-pool, ReLU, fc 50, dropout, fc 10, log_softmax), F.nll_loss,
SGD(lr=0.01, momentum=0.5), batch 64, 10 epochs (20 here). create_supervised_trainer's update (model.train(),
zero_grad, forward, loss, backward, step) and create_supervised_evaluator's (model.eval(),
no_grad) are written out; the evaluator scores the validation set after every epoch. The data
is scikit-learn's 8x8 digits upsampled to 20x20 (uint8, 0-255) with the script's
ToTensor() + Normalize((0.1307,), (0.3081,)), so fc1 takes 20 * 2 * 2 features instead of 320.

`bug` plants one fault (None: the script as published):
- "augment": healthy, a train-only random shift of up to one pixel;
- "cosine": healthy, CosineAnnealingLR(T_max=epochs) stepped once per epoch;
- "softmax": forward returns F.softmax instead of F.log_softmax, nll_loss reads probabilities;
- "no-eval": the evaluator written by hand without model.eval() (dropout active at validation);
- "fc2-left-out": the optimizer built from the parameter groups of conv1, conv2 and fc1 only;
- "frozen-convs": the convolutions' parameters set requires_grad=False (a freeze never undone);
- "raw-pixels": no transform: the uint8 pixels go in as 0-255 floats;
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch.optim import SGD
from torch.optim.lr_scheduler import CosineAnnealingLR

import tracelab
from _u_data import batches, digits, normalize

SOURCE = ("https://github.com/pytorch/ignite/blob/16c6714dab044378346be942f24b091dcd5438ad/"
          "examples/mnist/mnist.py")
BUGS = (None, "augment", "cosine", "softmax", "no-eval", "fc2-left-out", "frozen-convs", "raw-pixels")


class Net(nn.Module):
    def __init__(self, softmax: bool = False):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 10, kernel_size=5)
        self.conv2 = nn.Conv2d(10, 20, kernel_size=5)
        self.conv2_drop = nn.Dropout2d()
        self.fc1 = nn.Linear(80, 50)
        self.fc2 = nn.Linear(50, 10)
        self.softmax = softmax

    def forward(self, x):
        x = F.relu(F.max_pool2d(self.conv1(x), 2))
        x = F.relu(F.max_pool2d(self.conv2_drop(self.conv2(x)), 2))
        x = x.view(-1, 80)
        x = F.relu(self.fc1(x))
        x = F.dropout(x, training=self.training)
        x = self.fc2(x)
        return F.softmax(x, dim=-1) if self.softmax else F.log_softmax(x, dim=-1)


def _transform(images, bug):
    return images.float() if bug == "raw-pixels" else normalize(images)


def _shift(x, gen):
    dx, dy = (int(v) for v in torch.randint(-1, 2, (2,), generator=gen))
    return torch.roll(x, shifts=(dx, dy), dims=(2, 3))


def run(run_dir: str, seed: int = 0, bug: str | None = None, epochs: int = 20) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    x_train, y_train, x_val, y_val = digits(seed, size=20)
    model = Net(softmax=bug == "softmax")
    lr, momentum = 0.01, 0.5
    if bug == "frozen-convs":
        for p in list(model.conv1.parameters()) + list(model.conv2.parameters()):
            p.requires_grad = False
    if bug == "fc2-left-out":
        params = [{"params": model.conv1.parameters()}, {"params": model.conv2.parameters()},
                  {"params": model.fc1.parameters()}]
    else:
        params = model.parameters()
    optimizer = SGD(params, lr=lr, momentum=momentum)
    scheduler = CosineAnnealingLR(optimizer, T_max=epochs) if bug == "cosine" else None
    with tracelab.Recorder(run_dir, model=model, optimizer=optimizer, loss_fn=nn.NLLLoss(),
                           scheduler=scheduler,
                           config={"lr": lr, "momentum": momentum, "batch_size": 64,
                                   "epochs": epochs}) as rec:
        for _ in range(epochs):
            for idx in batches(len(x_train), 64, gen):
                # create_supervised_trainer's update function
                model.train()
                optimizer.zero_grad()
                x = _transform(x_train[idx], bug)
                if bug == "augment":
                    x = _shift(x, gen)
                y = y_train[idx]
                y_pred = model(x)
                loss = F.nll_loss(y_pred, y)
                loss.backward()
                optimizer.step()
                rec.step(loss=loss, inputs=x, targets=y, outputs=y_pred)
            # create_supervised_evaluator on the validation loader
            if bug != "no-eval":
                model.eval()
            with torch.no_grad():
                x = _transform(x_val, bug)
                y_pred = model(x)
                nll = F.nll_loss(y_pred, y_val).item()
                acc = (y_pred.argmax(1) == y_val).float().mean().item()
            rec.log("val", metrics={"nll": nll, "loss": nll, "accuracy": acc}, inputs=x,
                    targets=y_val, outputs=y_pred)
            if scheduler is not None:
                scheduler.step()
