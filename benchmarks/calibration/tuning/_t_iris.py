"""jeffheaton/t81_558_deep_learning pytorch/t81_558_torch_class_reg.ipynb, shrunk: its Net
(fc 50 with ReLU, fc 25, fc out), nn.CrossEntropyLoss, Adam(lr=0.01), full-batch steps on the
iris table split 75/25 by train_test_split(random_state=42). The notebook reads iris.csv from
the course site; scikit-learn's bundled copy is the same table. 1000 epochs become 300, and the
test split is scored every 10 epochs (the notebook scores it once, at the end).

As published, forward() ends in nn.Softmax(dim=1) and CrossEntropyLoss applies its own
log-softmax to those probabilities: that is the faulty run (`bug="softmax"`); the healthy twin
(`bug=None`) returns the logits of fc3, as the fix in the thread does. `bug="sgd"` is healthy:
the notebook's commented-out alternative, SGD(lr=0.01), with the logits.
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F
from sklearn.model_selection import train_test_split

import tracelab
from _t_data import iris

SOURCE = ("https://github.com/jeffheaton/t81_558_deep_learning/blob/"
          "e674d07b85289b0cfb4cc57ff213228fd2ae4dc4/pytorch/t81_558_torch_class_reg.ipynb")
BUGS = (None, "softmax", "sgd")


class Net(nn.Module):
    def __init__(self, in_count, out_count, softmax=False):
        super().__init__()
        self.fc1 = nn.Linear(in_count, 50)
        self.fc2 = nn.Linear(50, 25)
        self.fc3 = nn.Linear(25, out_count)
        self.softmax = nn.Softmax(dim=1) if softmax else None

    def forward(self, x):
        x = F.relu(self.fc1(x))
        x = self.fc2(x)
        x = self.fc3(x)
        return self.softmax(x) if self.softmax is not None else x


def run(run_dir: str, seed: int = 0, bug: str | None = None, epochs: int = 300) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    x, y = iris()
    x_train, x_test, y_train, y_test = train_test_split(x, y, test_size=0.25, random_state=42)
    x_train, x_test = torch.tensor(x_train).float(), torch.tensor(x_test).float()
    y_train, y_test = torch.tensor(y_train).long(), torch.tensor(y_test).long()
    net = Net(x.shape[1], 3, softmax=bug == "softmax")
    criterion = nn.CrossEntropyLoss()
    if bug == "sgd":
        optimizer = torch.optim.SGD(net.parameters(), lr=0.01)
    else:
        optimizer = torch.optim.Adam(net.parameters(), lr=0.01)
    with tracelab.Recorder(run_dir, model=net, optimizer=optimizer, loss_fn=criterion,
                           config={"lr": 0.01, "epochs": epochs}) as rec:
        for epoch in range(epochs):
            optimizer.zero_grad()
            out = net(x_train)
            loss = criterion(out, y_train)
            loss.backward()
            optimizer.step()
            rec.step(loss=loss, inputs=x_train, targets=y_train, outputs=out)
            if epoch % 10 == 9:
                with torch.no_grad():
                    pred_prob = net(x_test)
                    test_loss = criterion(pred_prob, y_test).item()
                    acc = (pred_prob.argmax(1) == y_test).float().mean().item()
                rec.log("val", metrics={"loss": test_loss, "accuracy": acc}, inputs=x_test,
                        targets=y_test, outputs=pred_prob)
