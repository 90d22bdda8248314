"""Shawn1993/cnn-text-classification-pytorch (model.py, train.py), shrunk: CNN_Text (an
embedding, Conv2d filters of widths 3, 4 and 5 over the embedded sentence, ReLU, max-pool over
time, dropout 0.5, a linear layer), F.cross_entropy, Adam(lr=1e-3), model.train() once before
the loop and eval() every test_interval steps, which calls model.eval() and model.train() again
at its end. The data is a synthetic two-class "review" corpus of token ids (500 words, 40
tokens) instead of torchtext's MR/SST; embedding 64, 50 filters of each width, batch 64.

`bug` plants one fault (None: the script as published):
- "eval-no-eval-mode": eval() runs the dev set without model.eval() (dropout active).
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

import tracelab
from _w_data import sentiment

SOURCE = ("https://github.com/Shawn1993/cnn-text-classification-pytorch/blob/"
          "0175451850b5c033a9a739ee02ea5188bd34031f/train.py")
BUGS = (None, "eval-no-eval-mode")


class CNN_Text(nn.Module):
    def __init__(self, embed_num, embed_dim, class_num, kernel_num, kernel_sizes, dropout):
        super().__init__()
        V, D, C, Ci, Co, Ks = embed_num, embed_dim, class_num, 1, kernel_num, kernel_sizes
        self.embed = nn.Embedding(V, D)
        self.convs1 = nn.ModuleList([nn.Conv2d(Ci, Co, (K, D)) for K in Ks])
        self.dropout = nn.Dropout(dropout)
        self.fc1 = nn.Linear(len(Ks) * Co, C)

    def forward(self, x):
        x = self.embed(x).unsqueeze(1)
        x = [F.relu(conv(x)).squeeze(3) for conv in self.convs1]
        x = [F.max_pool1d(i, i.size(2)).squeeze(2) for i in x]
        x = torch.cat(x, 1)
        x = self.dropout(x)
        return self.fc1(x)


def run(run_dir: str, seed: int = 0, bug: str | None = None, epochs: int = 4,
        batch_size: int = 64, lr: float = 1e-3, test_interval: int = 10) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    x_train, y_train, x_dev, y_dev = sentiment(seed)
    model = CNN_Text(500, 64, 2, 50, [3, 4, 5], 0.5)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    with tracelab.Recorder(run_dir, model=model, optimizer=optimizer,
                           config={"lr": lr, "batch_size": batch_size, "dropout": 0.5}) as rec:

        def evaluate():
            if bug != "eval-no-eval-mode":
                model.eval()
            with torch.no_grad():
                logit = model(x_dev)
                loss = F.cross_entropy(logit, y_dev, reduction="sum")
                corrects = (torch.max(logit, 1)[1] == y_dev).sum().item()
            size = len(y_dev)
            rec.log("val", metrics={"loss": loss.item() / size, "acc": corrects / size},
                    inputs=x_dev, targets=y_dev, outputs=logit)
            model.train()

        steps = 0
        model.train()
        for _ in range(epochs):
            for idx in torch.randperm(len(x_train), generator=gen).split(batch_size):
                feature, target = x_train[idx], y_train[idx]
                optimizer.zero_grad()
                logit = model(feature)
                loss = F.cross_entropy(logit, target)
                loss.backward()
                optimizer.step()
                steps += 1
                rec.step(loss=loss, inputs=feature, targets=target, outputs=logit)
                if steps % test_interval == 0:
                    evaluate()
