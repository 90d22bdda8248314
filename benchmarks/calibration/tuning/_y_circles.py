"""mrdbourke/pytorch-deep-learning 02_pytorch_classification.ipynb, shrunk: CircleModelV2 (Linear
2-10-10-1 with ReLU), nn.BCEWithLogitsLoss() on the squeezed logits, torch.optim.SGD(lr=0.1),
full-batch training on make_circles(1000, noise=0.03, random_state=42) split 80/20 by
train_test_split(random_state=42); the loop as published (model_3.eval() for the test pass each
epoch and no model.train() call back; the model has no dropout or BatchNorm). 1000 epochs as
published; the test pass is logged every 10th epoch instead of printed every 100th.

`bug` plants one fault (None: the notebook as published):
- "sigmoid-into-logits-loss": the model ends in torch.sigmoid and the probabilities go into
  BCEWithLogitsLoss;
- "no-zero-grad": optimizer.zero_grad() left out of the loop.
"""
from __future__ import annotations

import torch
from sklearn.datasets import make_circles
from sklearn.model_selection import train_test_split
from torch import nn

import tracelab

SOURCE = ("https://github.com/mrdbourke/pytorch-deep-learning/blob/"
          "baa27b691617461c173ecf3439793cd8cde74e13/02_pytorch_classification.ipynb")
BUGS = (None, "sigmoid-into-logits-loss", "no-zero-grad")


class CircleModelV2(nn.Module):
    def __init__(self, sigmoid: bool = False):
        super().__init__()
        self.layer_1 = nn.Linear(in_features=2, out_features=10)
        self.layer_2 = nn.Linear(in_features=10, out_features=10)
        self.layer_3 = nn.Linear(in_features=10, out_features=1)
        self.relu = nn.ReLU()
        self.sigmoid = sigmoid

    def forward(self, x):
        out = self.layer_3(self.relu(self.layer_2(self.relu(self.layer_1(x)))))
        return torch.sigmoid(out) if self.sigmoid else out


def accuracy_fn(y_true, y_pred):
    return torch.eq(y_true, y_pred).sum().item() / len(y_pred)


def run(run_dir: str, seed: int = 0, bug: str | None = None, epochs: int = 1000) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    X, y = make_circles(1000, noise=0.03, random_state=42)
    X = torch.from_numpy(X).type(torch.float)
    y = torch.from_numpy(y).type(torch.float)
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.2, random_state=42)
    torch.manual_seed(42 + seed)
    model_3 = CircleModelV2(sigmoid=bug == "sigmoid-into-logits-loss")
    loss_fn = nn.BCEWithLogitsLoss()
    optimizer = torch.optim.SGD(model_3.parameters(), lr=0.1)
    with tracelab.Recorder(run_dir, model=model_3, optimizer=optimizer, loss_fn=loss_fn,
                           config={"lr": 0.1, "epochs": epochs}) as rec:
        for epoch in range(epochs):
            y_logits = model_3(X_train).squeeze()
            y_pred = torch.round(torch.sigmoid(y_logits))
            loss = loss_fn(y_logits, y_train)
            acc = accuracy_fn(y_true=y_train, y_pred=y_pred)
            if bug != "no-zero-grad":
                optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            rec.step(loss=loss, inputs=X_train, targets=y_train, outputs=y_logits,
                     metrics={"acc": acc})
            model_3.eval()
            if epoch % 10 == 0 or epoch == epochs - 1:
                with torch.inference_mode():
                    test_logits = model_3(X_test).squeeze()
                    test_pred = torch.round(torch.sigmoid(test_logits))
                    test_loss = loss_fn(test_logits, y_test)
                    test_acc = accuracy_fn(y_true=y_test, y_pred=test_pred)
                rec.log("val", metrics={"loss": test_loss.item(), "acc": test_acc},
                        inputs=X_test, targets=y_test, outputs=test_logits)
