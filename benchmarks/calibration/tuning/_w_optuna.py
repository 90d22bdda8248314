"""optuna/optuna-examples pytorch/pytorch_simple.py, shrunk: the MLP of one trial (define_model
with n_layers=2, 64 and 32 units, Dropout 0.3 and 0.2 after each ReLU, a LogSoftmax head),
F.nll_loss, the optimizer the trial picks from Adam/RMSprop/SGD with its lr, batch 128, 10
epochs, model.train() before each epoch and model.eval() + no_grad for the validation accuracy
(the script computes no validation loss). The data is scikit-learn's 8x8 digits upsampled to
28x28 and ToTensor()'d, standing in for FashionMNIST; there is no optuna study, one trial's
parameters are fixed.

`bug` plants one fault (None: the script as published):
- "adam-sgd-lr": Adam given the learning rate of 0.1 tuned for SGD.
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim

import tracelab
from _w_data import batches, digits, to_tensor

SOURCE = ("https://github.com/optuna/optuna-examples/blob/"
          "52a8573f64ac50d6d6983b39a7fad42ee6162fa4/pytorch/pytorch_simple.py")
BUGS = (None, "adam-sgd-lr")
CLASSES = 10


def define_model(units=(64, 32), dropouts=(0.3, 0.2)):
    layers, in_features = [], 28 * 28
    for out_features, p in zip(units, dropouts):
        layers += [nn.Linear(in_features, out_features), nn.ReLU(), nn.Dropout(p)]
        in_features = out_features
    layers += [nn.Linear(in_features, CLASSES), nn.LogSoftmax(dim=1)]
    return nn.Sequential(*layers)


def run(run_dir: str, seed: int = 0, bug: str | None = None, optimizer_name: str = "RMSprop",
        lr: float = 1e-3, epochs: int = 10, batchsize: int = 128) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    x_train, y_train, x_val, y_val = digits(seed)
    if bug == "adam-sgd-lr":
        optimizer_name, lr = "Adam", 0.1
    model = define_model()
    optimizer = getattr(optim, optimizer_name)(model.parameters(), lr=lr)
    with tracelab.Recorder(run_dir, model=model, optimizer=optimizer, loss_fn=nn.NLLLoss(),
                           config={"optimizer": optimizer_name, "lr": lr,
                                   "batch_size": batchsize}) as rec:
        for _ in range(epochs):
            model.train()
            for idx in batches(len(x_train), batchsize, gen):
                data, target = to_tensor(x_train[idx]).view(len(idx), -1), y_train[idx]
                optimizer.zero_grad()
                output = model(data)
                loss = F.nll_loss(output, target)
                loss.backward()
                optimizer.step()
                rec.step(loss=loss, inputs=data, targets=target, outputs=output)
            model.eval()
            with torch.no_grad():
                data = to_tensor(x_val).view(len(x_val), -1)
                output = model(data)
                pred = output.argmax(dim=1, keepdim=True)
                accuracy = pred.eq(y_val.view_as(pred)).sum().item() / len(y_val)
            rec.log("val", metrics={"acc": accuracy}, inputs=data, targets=y_val,
                    outputs=output)
