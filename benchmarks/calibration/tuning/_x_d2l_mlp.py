"""dsgiitr/d2l-pytorch Ch06 Dropout.ipynb, concise implementation, shrunk: Flatten,
Linear(784->256), ReLU, Dropout(0.2), Linear(256->256), ReLU, Dropout(0.5), Linear(256->10),
CrossEntropyLoss, SGD(lr=0.5), batch 64 (of 256), evaluate_accuracy() with net.eval() on the test set
(net.train() at the start of each epoch).
Data: scikit-learn's digits (64 pixels in 0-1 instead of Fashion-MNIST's 784); 15 epochs.

`bug` (None: as published):
- "no-eval": the test evaluation runs without net.eval(), Dropout active;
- "shuffled-labels": the training features shuffled by a permutation the labels do not get.
"""
from __future__ import annotations

import torch
import torch.nn as nn

import tracelab
from _x_data import batches, digits

SOURCE = ("https://github.com/dsgiitr/d2l-pytorch/blob/96dca2dc164c6698b07b2f6e2335b57f9f0c4d17/"
          "Ch06_Multilayer_Perceptrons/Dropout.ipynb")
BUGS = (None, "no-eval", "shuffled-labels")


def run(run_dir: str, seed: int = 0, bug: str | None = None, num_epochs: int = 15) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    x_tr, y_tr, x_te, y_te = digits(seed)
    if bug == "shuffled-labels":
        x_tr = x_tr[torch.randperm(len(x_tr), generator=gen)]
    net = nn.Sequential(nn.Flatten(), nn.Linear(64, 256), nn.ReLU(), nn.Dropout(0.2),
                        nn.Linear(256, 256), nn.ReLU(), nn.Dropout(0.5), nn.Linear(256, 10))
    for m in net:
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, std=0.01)
    loss = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(net.parameters(), lr=0.5)
    with tracelab.Recorder(run_dir, model=net, optimizer=optimizer, loss_fn=loss,
                           config={"lr": 0.5, "batch_size": 64, "dropout": [0.2, 0.5]}) as rec:
        for _ in range(num_epochs):
            net.train()
            for idx in batches(len(x_tr), 64, gen):
                X, y = x_tr[idx], y_tr[idx]
                y_hat = net(X)
                l = loss(y_hat, y)
                optimizer.zero_grad()
                l.backward()
                optimizer.step()
                rec.step(loss=l, inputs=X, targets=y, outputs=y_hat)
            if bug != "no-eval":
                net.eval()
            with torch.no_grad():
                y_hat = net(x_te)
                acc = (y_hat.argmax(1) == y_te).float().mean().item()
                test_loss = loss(y_hat, y_te).item()
            rec.log("val", metrics={"loss": test_loss, "acc": acc}, inputs=x_te, targets=y_te,
                    outputs=y_hat)
