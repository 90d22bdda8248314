"""pyg-team/pytorch_geometric examples/gcn.py, shrunk: its GCN (dropout 0.5, GCNConv(in, 16),
ReLU, dropout 0.5, GCNConv(16, classes)), GCNConv written out densely as
D^-1/2 (A + I) D^-1/2 X W + b (GCNConv's normalize=True with self-loops), Adam(lr=0.01) with
two param groups (weight_decay 5e-4 on conv1 only, 0 on conv2), F.cross_entropy on the
training mask, full-batch train() / test() as published (test() under no_grad with
model.eval()), 200 epochs. Data: a synthetic Planetoid stand-in (600 nodes in 5 classes, a
stochastic block graph, sparse binary bag-of-words features whose word rates depend on the
class) with T.NormalizeFeatures() (row sums to 1) and Planetoid's split: 20 training nodes per
class, 150 validation, the rest test.

`bug` (None: the example as published):
- "no-eval": test() runs without model.eval(), so both dropouts stay active when the
  validation and test accuracies are computed;
- "lr-1e-5": Adam(lr=1e-5) (--lr 1e-5) instead of the example's 0.01.
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

import tracelab

SOURCE = ("https://github.com/pyg-team/pytorch_geometric/blob/"
          "0116e7f06d4be3fbaf2b6c1b40b237157a730bfb/examples/gcn.py")
BUGS = (None, "no-eval", "lr-1e-5")


class GCNConv(torch.nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.lin = torch.nn.Linear(in_channels, out_channels, bias=False)
        self.bias = torch.nn.Parameter(torch.zeros(out_channels))
        torch.nn.init.xavier_uniform_(self.lin.weight)

    def forward(self, x, adj_norm):
        return adj_norm @ self.lin(x) + self.bias


class GCN(torch.nn.Module):
    def __init__(self, in_channels, hidden_channels, out_channels):
        super().__init__()
        self.conv1 = GCNConv(in_channels, hidden_channels)
        self.conv2 = GCNConv(hidden_channels, out_channels)

    def forward(self, x, adj_norm):
        x = F.dropout(x, p=0.5, training=self.training)
        x = self.conv1(x, adj_norm).relu()
        x = F.dropout(x, p=0.5, training=self.training)
        return self.conv2(x, adj_norm)


def planetoid_like(seed, n=600, c=5, vocab=300):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, c, n)
    p = np.where(y[:, None] == y[None, :], 0.03, 0.002)
    a = np.triu(rng.random((n, n)) < p, 1)
    a = (a | a.T).astype(np.float32)
    rates = rng.gamma(0.3, 1.0, (c, vocab)) * 0.05
    x = (rng.random((n, vocab)) < np.clip(rates[y], 0, 0.5)).astype(np.float32)
    x[x.sum(1) == 0, rng.integers(vocab)] = 1.0
    x = x / x.sum(1, keepdims=True)  # T.NormalizeFeatures()
    a_hat = a + np.eye(n, dtype=np.float32)
    d = a_hat.sum(1) ** -0.5
    adj_norm = d[:, None] * a_hat * d[None, :]
    train_mask = np.zeros(n, bool)
    for k in range(c):
        train_mask[np.flatnonzero(y == k)[:20]] = True
    rest = np.flatnonzero(~train_mask)
    val_mask, test_mask = np.zeros(n, bool), np.zeros(n, bool)
    val_mask[rest[:150]], test_mask[rest[150:]] = True, True
    t = torch.from_numpy
    return t(x), t(adj_norm), t(y), t(train_mask), t(val_mask), t(test_mask)


def run(run_dir: str, seed: int = 0, bug: str | None = None, epochs: int = 200) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    x, adj_norm, y, train_mask, val_mask, test_mask = planetoid_like(seed)
    model = GCN(x.size(1), 16, int(y.max()) + 1)
    optimizer = torch.optim.Adam([dict(params=model.conv1.parameters(), weight_decay=5e-4),
                                  dict(params=model.conv2.parameters(), weight_decay=0)],
                                 lr=1e-5 if bug == "lr-1e-5" else 0.01)
    best_val_acc = test_acc = 0
    with tracelab.Recorder(run_dir, model=model, optimizer=optimizer,
                           config={"hidden_channels": 16, "epochs": epochs,
                                   "lr": 1e-5 if bug == "lr-1e-5" else 0.01}) as rec:
        for epoch in range(1, epochs + 1):
            model.train()
            optimizer.zero_grad()
            out = model(x, adj_norm)
            loss = F.cross_entropy(out[train_mask], y[train_mask])
            loss.backward()
            optimizer.step()
            rec.step(loss=loss, inputs=x, targets=y[train_mask], outputs=out[train_mask])
            with torch.no_grad():
                if bug != "no-eval":
                    model.eval()
                out = model(x, adj_norm)
                pred = out.argmax(dim=-1)
                accs = [int((pred[m] == y[m]).sum()) / int(m.sum())
                        for m in (train_mask, val_mask, test_mask)]
                val_loss = F.cross_entropy(out[val_mask], y[val_mask]).item()
            if accs[1] > best_val_acc:
                best_val_acc, test_acc = accs[1], accs[2]
            if epoch % 5 == 0:
                rec.log("val", metrics={"acc": accs[1], "loss": val_loss, "test_acc": accs[2]},
                        inputs=x, targets=y[val_mask], outputs=out[val_mask])
    print(f"    gcn bug={bug}: last val acc {accs[1]:.3f} test {accs[2]:.3f}, best val "
          f"{best_val_acc:.3f}")
