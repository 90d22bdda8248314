"""dmlc/dgl examples/pytorch/gcn (train.py with gcn.py's GCN), shrunk: a two-layer GCN
(GraphConv in -> 16 with ReLU, dropout 0.5 before the second GraphConv 16 -> classes, symmetric
degree normalization, self-loops), nn.CrossEntropyLoss on the training mask, Adam(lr=1e-2,
weight_decay=5e-4), 200 full-graph epochs, evaluate() on the validation mask after each under
model.eval() and torch.no_grad(). GraphConv is written in plain torch (D^-1/2 (A+I) D^-1/2 H W),
no dgl. The graph is synthetic in place of Cora: 400 nodes in 5 classes, a stochastic block
model (edges mostly within a class), 100 sparse bag-of-words features whose rates depend on the
class; 20 training nodes per class, 100 validation nodes, the rest test.

`bug` plants one fault (None: the script as published):
- "no-eval": evaluate() without model.eval(), so the validation pass runs with dropout active;
- "new-head": the output GraphConv re-created after the optimizer was built (a layer swapped in
  afterwards), so its parameters are in no optimizer;
- "overlap": the validation nodes cut from the same shuffled order as the training nodes
  (order[:100]), so most training nodes are validated on;
- "two-layers": healthy, --n-layers 2 (a second 16-unit hidden GraphConv).
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

import tracelab

SOURCE = ("https://github.com/dmlc/dgl/blob/0c56b41ee9cbdd759ba2bc8b062fb637503426fb/"
          "examples/pytorch/gcn/train.py")
BUGS = (None, "no-eval", "new-head", "overlap", "two-layers")


class GraphConv(nn.Module):
    def __init__(self, in_feats, out_feats, activation=None):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(in_feats, out_feats))
        self.bias = nn.Parameter(torch.zeros(out_feats))
        nn.init.xavier_uniform_(self.weight)
        self.activation = activation

    def forward(self, adj, h):
        h = adj @ (h @ self.weight) + self.bias
        return self.activation(h) if self.activation is not None else h


class GCN(nn.Module):
    def __init__(self, adj, in_feats, n_hidden, n_classes, n_layers, activation, dropout):
        super().__init__()
        self.adj = adj
        self.layers = nn.ModuleList([GraphConv(in_feats, n_hidden, activation=activation)])
        for _ in range(n_layers - 1):
            self.layers.append(GraphConv(n_hidden, n_hidden, activation=activation))
        self.layers.append(GraphConv(n_hidden, n_classes))
        self.dropout = nn.Dropout(p=dropout)

    def forward(self, features):
        h = features
        for i, layer in enumerate(self.layers):
            if i != 0:
                h = self.dropout(h)
            h = layer(self.adj, h)
        return h


def graph(seed: int, n: int = 400, classes: int = 5, feats: int = 100, overlap: bool = False):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, classes, size=n)
    same = labels[:, None] == labels[None, :]
    p = np.where(same, 0.03, 0.004)
    a = np.triu(rng.random((n, n)) < p, 1)
    a = (a | a.T).astype(np.float32) + np.eye(n, dtype=np.float32)  # self-loops
    deg = a.sum(1)
    norm = deg ** -0.5
    adj = torch.from_numpy(norm[:, None] * a * norm[None, :])
    rates = rng.gamma(0.3, 1.0, size=(classes, feats)) * 0.15
    x = (rng.random((n, feats)) < rates[labels]).astype(np.float32)
    x = x / np.maximum(x.sum(1, keepdims=True), 1.0)  # row-normalized, as Cora's features
    order = rng.permutation(n)
    train = np.zeros(n, bool)
    for c in range(classes):
        train[[i for i in order if labels[i] == c][:20]] = True
    rest = [i for i in order if not train[i]]
    val = np.zeros(n, bool)
    val[[i for i in order if train[i]][:80] + rest[:20] if overlap else rest[:100]] = True
    test = ~(train | val)
    return (adj, torch.from_numpy(x), torch.from_numpy(labels), torch.from_numpy(train),
            torch.from_numpy(val), torch.from_numpy(test))


def evaluate(model, features, labels, mask, bug):
    if bug != "no-eval":
        model.eval()
    with torch.no_grad():
        logits = model(features)
        logits = logits[mask]
        labels = labels[mask]
        _, indices = torch.max(logits, dim=1)
        correct = torch.sum(indices == labels)
        return correct.item() * 1.0 / len(labels), F.cross_entropy(logits, labels).item(), logits


def run(run_dir: str, seed: int = 0, bug: str | None = None, n_epochs: int = 200) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    adj, features, labels, train_mask, val_mask, test_mask = graph(seed, overlap=bug == "overlap")
    n_layers = 2 if bug == "two-layers" else 1
    model = GCN(adj, features.shape[1], 16, 5, n_layers, F.relu, 0.5)
    loss_fcn = torch.nn.CrossEntropyLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2, weight_decay=5e-4)
    if bug == "new-head":
        model.layers[-1] = GraphConv(16, 5)
    with tracelab.Recorder(run_dir, model=model, optimizer=optimizer, loss_fn=loss_fcn,
                           config={"lr": 1e-2, "weight_decay": 5e-4, "dropout": 0.5,
                                   "n_hidden": 16}) as rec:
        for _ in range(n_epochs):
            model.train()
            logits = model(features)
            loss = loss_fcn(logits[train_mask], labels[train_mask])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            rec.step(loss=loss, inputs=features[train_mask], targets=labels[train_mask],
                     outputs=logits[train_mask])
            acc, val_loss, val_logits = evaluate(model, features, labels, val_mask, bug)
            rec.log("val", metrics={"loss": val_loss, "acc": acc}, inputs=features[val_mask],
                    targets=labels[val_mask], outputs=val_logits)
