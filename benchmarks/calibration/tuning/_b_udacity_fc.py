"""udacity/deep-learning-v2-pytorch intro-to-pytorch/fc_model.py (Part 5, Inference and
Validation), shrunk: the same Network (hidden Linear+ReLU+Dropout(0.5) layers, log_softmax
output) with NLLLoss and Adam(lr=0.001), batch size 64, validation every 40 steps between
model.eval() and model.train() as fc_model.train() does; 8x8 digits (64 inputs, hidden
[128, 64]) instead of Fashion-MNIST, normalized with Normalize((0.5,), (0.5,)).

Bugs (`bug=`): "no-train-after-val" (the model.train() after validation left out),
"no-eval" (validation without model.eval()), "logits-to-nll" (forward() returns the last
layer's output without log_softmax, still given to NLLLoss), "shuffled-labels" (the labels
shuffled apart from their images, so each image carries another image's label), "sigmoid"
(the hidden layers' F.relu replaced by torch.sigmoid). `hidden_layers=(64,) * 6, drop_p=0.1`
trains a deeper Network, the twin of "sigmoid"."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

import tracelab
from _b_data import batches, digits


class Network(nn.Module):
    def __init__(self, input_size, output_size, hidden_layers, drop_p=0.5, log_softmax=True,
                 activation=F.relu):
        super().__init__()
        self.hidden_layers = nn.ModuleList([nn.Linear(input_size, hidden_layers[0])])
        layer_sizes = zip(hidden_layers[:-1], hidden_layers[1:])
        self.hidden_layers.extend([nn.Linear(h1, h2) for h1, h2 in layer_sizes])
        self.output = nn.Linear(hidden_layers[-1], output_size)
        self.dropout = nn.Dropout(p=drop_p)
        self.log_softmax = log_softmax
        self.activation = activation

    def forward(self, x):
        for each in self.hidden_layers:
            x = self.activation(each(x))
            x = self.dropout(x)
        x = self.output(x)
        return F.log_softmax(x, dim=1) if self.log_softmax else x


def train(run_dir: str, seed: int = 0, *, bug: str | None = None, epochs: int = 12,
          print_every: int = 40, hidden_layers: tuple[int, ...] = (128, 64),
          drop_p: float = 0.5) -> None:
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    x_tr, y_tr, x_va, y_va = digits(seed)
    x_tr = (x_tr.float() / 255.0 - 0.5) / 0.5
    x_va = (x_va.float() / 255.0 - 0.5) / 0.5
    x_tr, x_va = x_tr.reshape(len(x_tr), 64), x_va.reshape(len(x_va), 64)
    if bug == "shuffled-labels":
        y_tr = y_tr[torch.randperm(len(y_tr), generator=torch.Generator().manual_seed(seed + 1))]

    model = Network(64, 10, list(hidden_layers), drop_p=drop_p,
                    log_softmax=bug != "logits-to-nll",
                    activation=torch.sigmoid if bug == "sigmoid" else F.relu)
    criterion = nn.NLLLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.001)
    steps = 0
    with tracelab.Recorder(run_dir, model=model, optimizer=optimizer, loss_fn=criterion,
                           config={"lr": 0.001, "batch_size": 64, "drop_p": drop_p,
                                   "hidden_layers": list(hidden_layers)}) as rec:
        for _ in range(epochs):
            model.train()
            for idx in batches(len(x_tr), 64, gen):
                steps += 1
                images, labels = x_tr[idx], y_tr[idx]
                optimizer.zero_grad()
                output = model.forward(images)
                loss = criterion(output, labels)
                loss.backward()
                optimizer.step()
                rec.step(loss=loss, inputs=images, targets=labels, outputs=output)
                if steps % print_every == 0:
                    if bug != "no-eval":
                        model.eval()
                    with torch.no_grad():
                        out = model.forward(x_va)
                        test_loss = criterion(out, y_va)
                        accuracy = (out.argmax(1) == y_va).float().mean()
                    rec.log("val", metrics={"loss": test_loss, "acc": accuracy}, inputs=x_va,
                            targets=y_va, outputs=out)
                    if bug != "no-train-after-val":
                        model.train()
