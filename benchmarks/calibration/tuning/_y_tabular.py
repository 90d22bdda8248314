"""manujosephv/pytorch_tabular examples/covertype_classification.py with the
CategoryEmbeddingModel (models/category_embedding), shrunk to a plain loop doing what the library
does with the example's configs: categorical columns label-encoded into an Embedding1dLayer
(embedding dims min(50, (cardinality + 1) // 2), BatchNorm1d on the continuous inputs), the
backbone "128-64-32" of Linear + ReLU with kaiming init, no batch norm and no dropout, the
LinearHeadConfig head (dropout 0.1, one Linear to the classes), continuous features standardized
(normalize_continuous_features=True, the scaler fit on the training split), nn.CrossEntropyLoss(),
torch.optim.Adam at the OptimizerConfig default lr 1e-3, batch 512, 5 epochs (max_epochs), the
validation split evaluated after each epoch in eval mode, train/val/test from two
train_test_split(random_state=42). The covertype download is replaced by a synthetic
covertype-like table of 12000 rows (10 continuous columns in raw units such as elevations of
2000-3800 m, a 4-level wilderness area and a 40-level soil type, 7 classes drawn from a random
function of them). auto_lr_find is left out (the lr is the default).

`bug` plants one fault (None: the example as published):
- "target-in-features": the target column is listed among the continuous columns
  (num_col_names + target_name), so the label is fed to the model as a feature.
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn as nn
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

import tracelab

SOURCE = ("https://github.com/manujosephv/pytorch_tabular/blob/"
          "023db2776f96a0f2854e837eef62840be1a12a5e/examples/covertype_classification.py")
BUGS = (None, "target-in-features")
N_CLASSES = 7


def covertype_like(seed: int, n: int = 12000):
    rng = np.random.default_rng(300 + seed)
    scale = np.array([450., 110., 7., 210., 58., 1550., 27., 20., 38., 1320.])
    loc = np.array([2960., 155., 14., 270., 46., 2350., 212., 223., 142., 1980.])
    z = rng.normal(size=(n, 10))
    cont = loc + scale * z
    wild = rng.integers(0, 4, n)
    soil = rng.integers(0, 40, n)
    w = rng.normal(size=(10, N_CLASSES))
    logits = np.tanh(z) @ w * 1.5 + rng.normal(size=(4, N_CLASSES))[wild] \
        + 0.8 * rng.normal(size=(40, N_CLASSES))[soil]
    y = (logits + rng.gumbel(size=logits.shape)).argmax(1)
    return cont.astype(np.float32), wild, soil, y


class CategoryEmbeddingModel(nn.Module):
    def __init__(self, continuous_dim, cardinalities, n_classes):
        super().__init__()
        dims = [min(50, (c + 1) // 2) for c in cardinalities]
        self.cat_embedding_layers = nn.ModuleList(
            [nn.Embedding(c, d) for c, d in zip(cardinalities, dims)])
        self.normalizing_batch_norm = nn.BatchNorm1d(continuous_dim)
        layers, units_in = [], continuous_dim + sum(dims)
        for units in (128, 64, 32):
            linear = nn.Linear(units_in, units)
            nn.init.kaiming_normal_(linear.weight, nonlinearity="relu")
            layers += [linear, nn.ReLU()]
            units_in = units
        self.linear_layers = nn.Sequential(*layers)
        self.head = nn.Sequential(nn.Dropout(0.1), nn.Linear(units_in, n_classes))
        nn.init.kaiming_normal_(self.head[1].weight)

    def forward(self, cont, cat):
        emb = [layer(cat[:, i]) for i, layer in enumerate(self.cat_embedding_layers)]
        x = torch.cat(emb + [self.normalizing_batch_norm(cont)], dim=1)
        return self.head(self.linear_layers(x))


def run(run_dir: str, seed: int = 0, bug: str | None = None, max_epochs: int = 5) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    cont, wild, soil, y = covertype_like(seed)
    if bug == "target-in-features":
        cont = np.concatenate([cont, y[:, None].astype(np.float32)], axis=1)
    idx = np.arange(len(y))
    train, test = train_test_split(idx, random_state=42)
    train, val = train_test_split(train, random_state=42)
    scaler = StandardScaler().fit(cont[train])
    cont = scaler.transform(cont).astype(np.float32)
    X = torch.from_numpy(cont)
    C = torch.from_numpy(np.stack([wild, soil], axis=1)).long()
    Y = torch.from_numpy(y).long()
    tr, va = torch.from_numpy(train), torch.from_numpy(val)
    model = CategoryEmbeddingModel(X.shape[1], [4, 40], N_CLASSES)
    loss_fn = nn.CrossEntropyLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    with tracelab.Recorder(run_dir, model=model, optimizer=optimizer, loss_fn=loss_fn,
                           config={"lr": 1e-3, "batch_size": 512, "max_epochs": max_epochs,
                                   "layers": "128-64-32"}) as rec:
        for _ in range(max_epochs):
            model.train()
            for b in tr[torch.randperm(len(tr), generator=gen)].split(512):
                x, c, t = X[b], C[b], Y[b]
                out = model(x, c)
                loss = loss_fn(out, t)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                rec.step(loss=loss, inputs=x, targets=t, outputs=out)
            model.eval()
            with torch.no_grad():
                out = model(X[va], C[va])
                rec.log("val", metrics={"loss": loss_fn(out, Y[va]).item(),
                                        "acc": out.argmax(1).eq(Y[va]).float().mean().item()},
                        inputs=X[va], targets=Y[va], outputs=out)
