"""mlflow/mlflow examples/pytorch/torchscript/IrisClassification/iris_classification.py, shrunk:
its IrisClassifier (4-10-10-3 with ReLU and a functional F.dropout(x, 0.2) before the last
layer, which stays active in eval mode as published), nn.CrossEntropyLoss, SGD(lr=0.01,
momentum=0.9) on the whole training set for 50 epochs, test_model() after each epoch calling
model.eval() and never model.train() again (the net has no dropout module, so that is
harmless). scikit-learn's bundled Iris, train_test_split(test_size=0.2, random_state=42,
stratify) as published; no mlflow tracking, no TorchScript.

`bug` plants one fault (None: the script as published):
- "shuffle-x-only": the training rows are shuffled without their labels.
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from sklearn.datasets import load_iris
from sklearn.model_selection import train_test_split

import tracelab

SOURCE = ("https://github.com/mlflow/mlflow/blob/699a465e791d34dee0f68696c4a310a47cd67b5f/"
          "examples/pytorch/torchscript/IrisClassification/iris_classification.py")
BUGS = (None, "shuffle-x-only")


class IrisClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 10)
        self.fc2 = nn.Linear(10, 10)
        self.fc3 = nn.Linear(10, 3)

    def forward(self, x):
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        x = F.dropout(x, 0.2)
        return self.fc3(x)


def run(run_dir: str, seed: int = 0, bug: str | None = None, lr: float = 0.01,
        momentum: float = 0.9, epochs: int = 50) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    iris = load_iris()
    X_train, X_test, y_train, y_test = train_test_split(
        iris.data, iris.target, test_size=0.2, random_state=42, shuffle=True,
        stratify=iris.target)
    if bug == "shuffle-x-only":
        X_train = X_train[np.random.default_rng(seed).permutation(len(X_train))]
    X_train, X_test = torch.FloatTensor(X_train), torch.FloatTensor(X_test)
    y_train, y_test = torch.LongTensor(y_train), torch.LongTensor(y_test)
    model = IrisClassifier()
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum)
    with tracelab.Recorder(run_dir, model=model, optimizer=optimizer, loss_fn=criterion,
                           config={"learning_rate": lr, "momentum": momentum}) as rec:
        for _ in range(epochs):
            out = model(X_train)
            loss = criterion(out, y_train)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            rec.step(loss=loss, inputs=X_train, targets=y_train, outputs=out)
            model.eval()
            with torch.no_grad():
                predict_out = model(X_test)
                acc = (predict_out.argmax(1) == y_test).float().mean().item()
            rec.log("val", metrics={"acc": acc}, inputs=X_test, targets=y_test,
                    outputs=predict_out)
