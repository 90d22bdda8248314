"""d2l-en chapter_convolutional-modern/batch-norm.md (PyTorch tab), shrunk: BNLeNetConcise
(convs and Linear layers each followed by BatchNorm and Sigmoid, average pooling) trained as
d2l.Classifier with d2l.Trainer: CrossEntropyLoss, SGD(lr=0.1), batch size 128, model.train()
for each epoch and model.eval() for its validation pass. 8x8 digits instead of Fashion-MNIST
resized to 28x28, so the convs are 3x3 (the first padded) and the first Linear reads 16
features; a fixed 300 steps instead of 10 epochs.

Bugs (`bug=`): "batch-4" (batches of 4 images), "weight-decay" (SGD given weight_decay=0.5).
`label_smoothing=0.1` trains with label-smoothed cross-entropy (ordinary practice)."""
from __future__ import annotations

import torch
from torch import nn

import tracelab
from _b_data import batches, digits


def bn_lenet() -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(1, 6, kernel_size=3, padding=1), nn.BatchNorm2d(6), nn.Sigmoid(),
        nn.AvgPool2d(kernel_size=2, stride=2),
        nn.Conv2d(6, 16, kernel_size=3), nn.BatchNorm2d(16), nn.Sigmoid(),
        nn.AvgPool2d(kernel_size=2, stride=2), nn.Flatten(),
        nn.Linear(16, 120), nn.BatchNorm1d(120), nn.Sigmoid(),
        nn.Linear(120, 84), nn.BatchNorm1d(84), nn.Sigmoid(),
        nn.Linear(84, 10))


def train(run_dir: str, seed: int = 0, *, bug: str | None = None, steps: int = 300,
          lr: float = 0.1, label_smoothing: float = 0.0) -> None:
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    x_tr, y_tr, x_va, y_va = digits(seed)
    x_tr, x_va = x_tr.float() / 255.0, x_va.float() / 255.0  # ToTensor()
    batch_size = 4 if bug == "batch-4" else 128
    weight_decay = 0.5 if bug == "weight-decay" else 0.0
    model = bn_lenet()
    loss_fn = nn.CrossEntropyLoss(label_smoothing=label_smoothing)
    optim = torch.optim.SGD(model.parameters(), lr=lr, weight_decay=weight_decay)
    config = {"lr": lr, "batch_size": batch_size, "weight_decay": weight_decay,
              "label_smoothing": label_smoothing}
    done = 0
    with tracelab.Recorder(run_dir, model=model, optimizer=optim, loss_fn=loss_fn,
                           config=config) as rec:
        while done < steps:
            model.train()
            for idx in batches(len(x_tr), batch_size, gen):
                if len(idx) == 1:  # BatchNorm1d refuses a batch of one
                    continue
                X, y = x_tr[idx], y_tr[idx]
                y_hat = model(X)
                loss = loss_fn(y_hat, y)
                optim.zero_grad()
                loss.backward()
                optim.step()
                rec.step(loss=loss, inputs=X, targets=y, outputs=y_hat)
                done += 1
                if done == steps:
                    break
            model.eval()
            with torch.no_grad():
                out = model(x_va)
                val_loss = loss_fn(out, y_va)
                acc = (out.argmax(1) == y_va).float().mean()
            rec.log("val", metrics={"loss": val_loss, "acc": acc}, inputs=x_va, targets=y_va,
                    outputs=out)
