"""TrainCheck's reproduction of Stack Overflow 60335387 (a PyTorch MNIST CNN that does not
converge), shrunk: the same two-conv Net, Adam, CrossEntropyLoss, batch size 30, model.train()
at each epoch's start and evaluate() (model.eval(), no_grad) at its end; 8x8 digits instead of
MNIST, so the convs have 16 and 32 channels and fc1 reads 128 features.

Bugs (`bug=`): "missing-zero-grad" (the question's own code), "frozen" (every layer but the
first conv set to requires_grad=False), "raw-pixels" (uint8 pixels cast to float, never divided
by 255 nor normalized), "val-unnormalized" (the test transform lacks Normalize()).
`augment=True` adds a train-only random shift of up to one pixel (ordinary practice)."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

import tracelab
from _b_data import batches, digits

MEAN, STD = 0.1307, 0.3081


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, 1)
        self.conv2 = nn.Conv2d(16, 32, 3, 1)
        self.fc1 = nn.Linear(128, 64)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = self.conv2(x)
        x = F.max_pool2d(x, 2)
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        return self.fc2(x)


def _transform(images: torch.Tensor, *, normalize: bool = True, scale: bool = True):
    x = images.float()
    if scale:
        x = x / 255.0
    return (x - MEAN) / STD if normalize else x


def _shift(x: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    dx, dy = (torch.randint(-1, 2, (2,), generator=generator)).tolist()
    return torch.roll(x, shifts=(dy, dx), dims=(2, 3))


def train(run_dir: str, seed: int = 0, *, bug: str | None = None, augment: bool = False,
          epochs: int = 6, lr: float = 1e-3) -> None:
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    x_tr, y_tr, x_va, y_va = digits(seed)
    raw = bug == "raw-pixels"
    x_tr = _transform(x_tr, normalize=not raw, scale=not raw)
    x_va = _transform(x_va, normalize=not raw and bug != "val-unnormalized", scale=not raw)

    model = Net()
    if bug == "frozen":
        for name, param in model.named_parameters():
            if not name.startswith("conv1"):
                param.requires_grad = False
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    config = {"lr": lr, "batch_size": 30, "epochs": epochs, "augment": augment}
    with tracelab.Recorder(run_dir, model=model, optimizer=optimizer, loss_fn=criterion,
                           config=config) as rec:
        for _ in range(epochs):
            model.train()
            for idx in batches(len(x_tr), 30, gen):
                data, label = x_tr[idx], y_tr[idx]
                if augment:
                    data = _shift(data, gen)
                if bug != "missing-zero-grad":
                    optimizer.zero_grad()
                pred_score = model(data)
                loss = criterion(pred_score, label)
                loss.backward()
                optimizer.step()
                acc = (pred_score.argmax(1) == label).float().mean()
                rec.step(loss=loss, inputs=data, targets=label, outputs=pred_score,
                         metrics={"acc": acc})
            model.eval()
            with torch.no_grad():
                out = model(x_va)
                val_loss = criterion(out, y_va)
                val_acc = (out.argmax(1) == y_va).float().mean()
            rec.log("val", metrics={"loss": val_loss, "acc": val_acc}, inputs=x_va,
                    targets=y_va, outputs=out)
