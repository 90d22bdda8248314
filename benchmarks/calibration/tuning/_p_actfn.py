"""phlippe/uvadlc_notebooks tutorial3 Activation_Functions.ipynb, shrunk: its BaseNetwork (MLP
with hidden sizes 512, 256, 256, 128 and the chosen activation after each, a last Linear to 10
classes), train_model() as published (SGD(lr=1e-2, momentum=0.9), CrossEntropyLoss, batch 256
shuffled with drop_last, net.train() per epoch, test_model() with net.eval() under no_grad on
the validation split each epoch), the notebook's transform ToTensor() + Normalize((0.5,),
(0.5,)). Data: scikit-learn's 8x8 digits instead of FashionMNIST (input_size 64), 300 held out
as the validation split; 60 epochs instead of 50 (the dataset is 33 times smaller), no checkpointing. The healthy run uses ReLU,
the notebook's recommended activation.

`bug` (None: the notebook's ReLU network):
- "sigmoid": the same network built with act_fn=Sigmoid() (the notebook's sigmoid run);
- "val-no-normalize": the validation loader's transform is ToTensor() only, without the
  Normalize((0.5,), (0.5,)) the training data gets.
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.optim as optim

import tracelab
from _p_data import digits

SOURCE = ("https://github.com/phlippe/uvadlc_notebooks/blob/"
          "0da8037c7abc32f478ff6142acceb72dbcf088ee/docs/tutorial_notebooks/tutorial3/"
          "Activation_Functions.ipynb")
BUGS = (None, "sigmoid", "val-no-normalize")


class BaseNetwork(nn.Module):
    def __init__(self, act_fn, input_size=64, num_classes=10, hidden_sizes=(512, 256, 256, 128)):
        super().__init__()
        layers = []
        layer_sizes = [input_size] + list(hidden_sizes)
        for layer_index in range(1, len(layer_sizes)):
            layers += [nn.Linear(layer_sizes[layer_index - 1], layer_sizes[layer_index]), act_fn]
        layers += [nn.Linear(layer_sizes[-1], num_classes)]
        self.layers = nn.Sequential(*layers)

    def forward(self, x):
        x = x.view(x.size(0), -1)
        return self.layers(x)


def run(run_dir: str, seed: int = 0, bug: str | None = None, max_epochs: int = 60,
        batch_size: int = 256) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    x_tr, y_tr, x_va, y_va = digits(seed)
    to_tensor = lambda x: x.float() / 255.0
    x_tr = (to_tensor(x_tr) - 0.5) / 0.5
    x_va = to_tensor(x_va) if bug == "val-no-normalize" else (to_tensor(x_va) - 0.5) / 0.5
    net = BaseNetwork(act_fn=nn.Sigmoid() if bug == "sigmoid" else nn.ReLU())
    optimizer = optim.SGD(net.parameters(), lr=1e-2, momentum=0.9)
    loss_module = nn.CrossEntropyLoss()
    gen = torch.Generator().manual_seed(seed)
    with tracelab.Recorder(run_dir, model=net, optimizer=optimizer, loss_fn=loss_module,
                           config={"lr": 1e-2, "momentum": 0.9, "batch_size": batch_size,
                                   "act_fn": "sigmoid" if bug == "sigmoid" else "relu"}) as rec:
        for epoch in range(max_epochs):
            net.train()
            for idx in torch.randperm(len(x_tr), generator=gen).split(batch_size):
                if len(idx) < batch_size:
                    continue  # drop_last=True
                imgs, labels = x_tr[idx], y_tr[idx]
                optimizer.zero_grad()
                preds = net(imgs)
                loss = loss_module(preds, labels)
                loss.backward()
                optimizer.step()
                rec.step(loss=loss, inputs=imgs, targets=labels, outputs=preds)
            net.eval()
            with torch.no_grad():
                preds = net(x_va)
                val_acc = (preds.argmax(dim=-1) == y_va).float().mean().item()
                val_loss = loss_module(preds, y_va).item()
            rec.log("val", metrics={"acc": val_acc, "loss": val_loss}, inputs=x_va, targets=y_va,
                    outputs=preds)
    print(f"    actfn bug={bug}: val acc {val_acc:.3f}")
