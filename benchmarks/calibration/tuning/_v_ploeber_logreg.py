"""patrickloeber/pytorchTutorial 08_logistic_regression.py, nearly as published: scikit-learn's
breast-cancer table split by train_test_split(test_size=0.2, random_state=1234), a
StandardScaler fit on the training rows, targets viewed as (N, 1), a one-layer Model (Linear then
torch.sigmoid), nn.BCELoss, SGD(lr=0.01), 100 full-batch epochs (backward, step, then zero_grad).
The test rows are scored (loss and accuracy of the rounded prediction) every 10 epochs instead
of once at the end; `seed` seeds the initialization (the split keeps its random_state).

`bug` plants one fault (None: the script as published):
- "unscaled": the StandardScaler left out, the raw columns (areas in the thousands) go in;
- "bce-with-logits": the criterion changed to nn.BCEWithLogitsLoss while the model still ends in
  torch.sigmoid, so the loss squashes probabilities a second time.
"""
from __future__ import annotations

import numpy as np
import torch
from sklearn import datasets
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler
from torch import nn

import tracelab

SOURCE = ("https://github.com/patrickloeber/pytorchTutorial/blob/"
          "322eeb4aa4b83498ab13a3707e29a538f45883a8/08_logistic_regression.py")
BUGS = (None, "unscaled", "bce-with-logits")


class Model(nn.Module):
    def __init__(self, n_input_features):
        super().__init__()
        self.linear = nn.Linear(n_input_features, 1)

    def forward(self, x):
        return torch.sigmoid(self.linear(x))


def run(run_dir: str, seed: int = 0, bug: str | None = None, num_epochs: int = 100) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    bc = datasets.load_breast_cancer()
    X, y = bc.data, bc.target
    n_samples, n_features = X.shape
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.2, random_state=1234)
    if bug != "unscaled":
        sc = StandardScaler()
        X_train = sc.fit_transform(X_train)
        X_test = sc.transform(X_test)
    X_train = torch.from_numpy(X_train.astype(np.float32))
    X_test = torch.from_numpy(X_test.astype(np.float32))
    y_train = torch.from_numpy(y_train.astype(np.float32)).view(-1, 1)
    y_test = torch.from_numpy(y_test.astype(np.float32)).view(-1, 1)
    model = Model(n_features)
    learning_rate = 0.01
    criterion = nn.BCEWithLogitsLoss() if bug == "bce-with-logits" else nn.BCELoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=learning_rate)
    with tracelab.Recorder(run_dir, model=model, optimizer=optimizer, loss_fn=criterion,
                           config={"lr": learning_rate, "epochs": num_epochs,
                                   "batch_size": len(X_train)}) as rec:
        for epoch in range(num_epochs):
            y_pred = model(X_train)
            loss = criterion(y_pred, y_train)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            rec.step(loss=loss, inputs=X_train, targets=y_train, outputs=y_pred)
            if (epoch + 1) % 10 == 0:
                with torch.no_grad():
                    y_predicted = model(X_test)
                    acc = y_predicted.round().eq(y_test).sum() / float(y_test.shape[0])
                    test_loss = criterion(y_predicted, y_test).item()
                rec.log("val", metrics={"loss": test_loss, "accuracy": acc.item()},
                        inputs=X_test, targets=y_test, outputs=y_predicted)
