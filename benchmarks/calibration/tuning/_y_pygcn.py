"""tkipf/pygcn pygcn/train.py with models.py, layers.py and utils.py, shrunk: GCN (two
GraphConvolution layers, ReLU, F.dropout(0.5, training=self.training), log_softmax), F.nll_loss on
idx_train, optim.Adam(lr=0.01, weight_decay=5e-4), full-graph steps with model.train() and the
validation pass after model.eval() (the script's default, fastmode off), 200 epochs, hidden 16.
The Cora download is replaced by a synthetic citation graph of 600 nodes in 5 classes (a
stochastic block model, sparse binary bag-of-words features with class-dependent words), the
features row-normalized and the adjacency symmetrized, given self-loops and row-normalized as
utils.load_data does; idx_train = range(140), idx_val = range(200, 500), idx_test = range(500,
600) as load_data picks them.

`bug` plants one fault (None: the script as published):
- "val-from-train": the validation indices start at 0 (range(0, 300)), so they hold every
  training node;
- "fastmode": the validation pass reuses the training forward (model left in training mode,
  dropout active), as --fastmode does;
- "train-labels-shuffled": the training nodes' labels permuted among themselves (the label
  vector shuffled apart from the node order).
"""
from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.nn.parameter import Parameter

import tracelab

SOURCE = ("https://github.com/tkipf/pygcn/blob/1600b5b748b3976413d1e307540ccc62605b4d6d/"
          "pygcn/train.py")
BUGS = (None, "val-from-train", "fastmode", "train-labels-shuffled")


class GraphConvolution(nn.Module):
    def __init__(self, in_features, out_features, bias=True):
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.weight = Parameter(torch.FloatTensor(in_features, out_features))
        self.bias = Parameter(torch.FloatTensor(out_features)) if bias else None
        self.reset_parameters()

    def reset_parameters(self):
        stdv = 1. / math.sqrt(self.weight.size(1))
        self.weight.data.uniform_(-stdv, stdv)
        if self.bias is not None:
            self.bias.data.uniform_(-stdv, stdv)

    def forward(self, input, adj):
        support = torch.mm(input, self.weight)
        output = torch.spmm(adj, support)
        return output + self.bias if self.bias is not None else output


class GCN(nn.Module):
    def __init__(self, nfeat, nhid, nclass, dropout):
        super().__init__()
        self.gc1 = GraphConvolution(nfeat, nhid)
        self.gc2 = GraphConvolution(nhid, nclass)
        self.dropout = dropout

    def forward(self, x, adj):
        x = F.relu(self.gc1(x, adj))
        x = F.dropout(x, self.dropout, training=self.training)
        x = self.gc2(x, adj)
        return F.log_softmax(x, dim=1)


def normalize(mx):
    rowsum = np.array(mx.sum(1))
    r_inv = np.power(rowsum, -1.0).flatten()
    r_inv[np.isinf(r_inv)] = 0.
    return r_inv[:, None] * mx


def accuracy(output, labels):
    preds = output.max(1)[1].type_as(labels)
    return preds.eq(labels).double().sum() / len(labels)


def load_data(seed: int, n: int = 600, k: int = 5, d: int = 300):
    rng = np.random.default_rng(100 + seed)
    labels = rng.integers(0, k, n)
    same = labels[:, None] == labels[None, :]
    prob = np.where(same, 0.02, 0.002)
    upper = np.triu(rng.random((n, n)) < prob, 1)
    adj = (upper | upper.T).astype(np.float32)
    words = rng.random((k, d)) < 0.08
    p_word = np.where(words[labels], 0.15, 0.02)
    features = (rng.random((n, d)) < p_word).astype(np.float32)
    features = normalize(features)
    adj = normalize(adj + np.eye(n, dtype=np.float32))
    return (torch.from_numpy(adj).float().to_sparse(), torch.from_numpy(features).float(),
            torch.from_numpy(labels).long())


def run(run_dir: str, seed: int = 0, bug: str | None = None, epochs: int = 200) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    np.random.seed(42 + seed)
    torch.manual_seed(42 + seed)
    adj, features, labels = load_data(seed)
    idx_train = torch.arange(140)
    idx_val = torch.arange(0, 300) if bug == "val-from-train" else torch.arange(200, 500)
    idx_test = torch.arange(500, 600)
    if bug == "train-labels-shuffled":
        labels = labels.clone()
        labels[idx_train] = labels[idx_train][torch.randperm(len(idx_train))]
    model = GCN(nfeat=features.shape[1], nhid=16, nclass=int(labels.max()) + 1, dropout=0.5)
    optimizer = optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)
    with tracelab.Recorder(run_dir, model=model, optimizer=optimizer, loss_fn=nn.NLLLoss(),
                           config={"lr": 0.01, "weight_decay": 5e-4, "hidden": 16,
                                   "dropout": 0.5, "epochs": epochs}) as rec:
        for _ in range(epochs):
            model.train()
            optimizer.zero_grad()
            output = model(features, adj)
            loss_train = F.nll_loss(output[idx_train], labels[idx_train])
            acc_train = accuracy(output[idx_train], labels[idx_train])
            loss_train.backward()
            optimizer.step()
            rec.step(loss=loss_train, inputs=features[idx_train], targets=labels[idx_train],
                     outputs=output[idx_train], metrics={"acc": acc_train.item()})
            if bug != "fastmode":
                model.eval()
                output = model(features, adj)
            loss_val = F.nll_loss(output[idx_val], labels[idx_val])
            acc_val = accuracy(output[idx_val], labels[idx_val])
            rec.log("val", metrics={"loss": loss_val.item(), "acc": acc_val.item()},
                    inputs=features[idx_val], targets=labels[idx_val],
                    outputs=output[idx_val].detach())
        model.eval()
        output = model(features, adj)
        rec.log("test", metrics={"loss": F.nll_loss(output[idx_test], labels[idx_test]).item(),
                                 "acc": accuracy(output[idx_test], labels[idx_test]).item()})
