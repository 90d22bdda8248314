"""Lightning-AI/pytorch-lightning examples/pytorch/basics/backbone_image_classifier.py, shrunk: its
Backbone (l1 = Linear(28*28, 128), relu, l2 = Linear(128, 10), relu on the output as published),
LitClassifier's F.cross_entropy and Adam(lr=learning_rate) from configure_optimizers, run by a
plain loop doing what the Trainer does: model.train() for the training epoch, model.eval() and
torch.no_grad() for validation, one optimizer step per batch of 32 (no shuffle, as the example's
train_dataloader). The data is scikit-learn's 8x8 digits through ToTensor() (0-1 pixels), so l1
reads 64 features; random_split by a generator seeded 42 as the example's MyDataModule. The CLI
default learning_rate (1e-4) is raised to 1e-3 so the small set learns in 15 epochs.

`bug` plants one fault (None: the script as published):
- "lr-1": configure_optimizers returns Adam(lr=1.0);
- "val-from-all": the validation rows drawn again from the whole set by a second random split
  (another seed) instead of from the rows held out, so most of them are also trained on;
- "negative-init": l1's weights drawn from uniform(-0.05, 0) (an unlucky all-negative init), so
  with non-negative pixels every hidden ReLU is off on every input;
- "wide": healthy, a wider backbone (hidden_dim=256) validated every half epoch.
"""
from __future__ import annotations

import torch
from torch.nn import functional as F

import tracelab
from _d_data import batches, digits01

SOURCE = ("https://github.com/Lightning-AI/pytorch-lightning/blob/"
          "7f0c3436cd3f6ad3753125672024fc415cbcb414/examples/pytorch/basics/"
          "backbone_image_classifier.py")
BUGS = (None, "lr-1", "val-from-all", "negative-init", "wide")


class Backbone(torch.nn.Module):
    def __init__(self, hidden_dim=128, in_features=8 * 8):
        super().__init__()
        self.l1 = torch.nn.Linear(in_features, hidden_dim)
        self.l2 = torch.nn.Linear(hidden_dim, 10)

    def forward(self, x):
        x = x.view(x.size(0), -1)
        x = torch.relu(self.l1(x))
        return torch.relu(self.l2(x))


class LitClassifier(torch.nn.Module):
    def __init__(self, backbone=None, learning_rate: float = 0.0001):
        super().__init__()
        self.learning_rate = learning_rate
        self.backbone = backbone if backbone is not None else Backbone()

    def forward(self, x):
        return self.backbone(x)

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.learning_rate)


def _validate(model, rec, x_val, y_val):
    model.eval()
    with torch.no_grad():
        y_hat = model(x_val)
        loss = F.cross_entropy(y_hat, y_val)
        acc = (y_hat.argmax(1) == y_val).float().mean()
    rec.log("val", metrics={"loss": float(loss), "acc": float(acc)}, inputs=x_val,
            targets=y_val, outputs=y_hat)
    model.train()


def run(run_dir: str, seed: int = 0, bug: str | None = None, epochs: int = 15) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    x_train, y_train, x_val, y_val = digits01(42 + seed)
    if bug == "val-from-all":
        x_all, y_all = torch.cat([x_train, x_val]), torch.cat([y_train, y_val])
        pick = torch.randperm(len(x_all), generator=torch.Generator().manual_seed(7 + seed))
        x_val, y_val = x_all[pick[:len(x_val)]], y_all[pick[:len(y_val)]]
    backbone = Backbone(hidden_dim=256 if bug == "wide" else 128)
    if bug == "negative-init":
        torch.nn.init.uniform_(backbone.l1.weight, -0.05, 0.0)
    lr = 1.0 if bug == "lr-1" else 1e-3
    model = LitClassifier(backbone, learning_rate=lr)
    optimizer = model.configure_optimizers()
    val_every = 24 if bug == "wide" else None
    with tracelab.Recorder(run_dir, model=model, optimizer=optimizer,
                           loss_fn=torch.nn.CrossEntropyLoss(),
                           config={"learning_rate": lr, "batch_size": 32,
                                   "hidden_dim": backbone.l1.out_features}) as rec:
        for _ in range(epochs):
            model.train()
            for i, idx in enumerate(batches(len(x_train), 32, None, shuffle=False)):
                x, y = x_train[idx], y_train[idx]
                y_hat = model(x)
                loss = F.cross_entropy(y_hat, y)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                rec.step(loss=loss, inputs=x, targets=y, outputs=y_hat)
                if val_every and (i + 1) % val_every == 0:
                    _validate(model, rec, x_val, y_val)
            if not val_every:
                _validate(model, rec, x_val, y_val)
