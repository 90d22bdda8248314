"""yandex-research/rtdl (Revisiting Deep Learning Models for Tabular Data), its MLP baseline:
standardized numeric features, Linear-ReLU-Dropout blocks, AdamW, MSE for regression and
BCEWithLogits for binary classification; sklearn's diabetes and breast-cancer tables (shipped
with scikit-learn) as pandas DataFrames, 2 blocks of 64."""
from __future__ import annotations

import numpy as np
import pandas as pd
import torch
from torch import nn

from _s_common import fit, setup
from _s_t08 import binary_accuracy


def table(name: str) -> tuple[pd.DataFrame, pd.Series]:
    from sklearn import datasets

    bunch = getattr(datasets, f"load_{name}")(as_frame=True)
    return bunch.data, bunch.target.astype("float32")


class Regressor(nn.Module):
    """The MLP and its one output, squeezed to (N,) as the targets are, or left (N, 1)."""

    def __init__(self, d_in: int, squeeze: bool):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(d_in, 64), nn.ReLU(), nn.Dropout(0.1),
                                 nn.Linear(64, 64), nn.ReLU(), nn.Dropout(0.1), nn.Linear(64, 1))
        self.squeeze = squeeze

    def forward(self, x):
        out = self.mlp(x)
        return out.squeeze(1) if self.squeeze else out


def train(run_dir: str, seed: int, *, name: str = "diabetes", leak: bool = False, overlap: bool = False,
          val_columns_sorted: bool = False, squeeze: bool = True, shuffle_labels: bool = False,
          standardize: bool = True) -> None:
    g = setup(seed)
    X, y = table(name)
    if name == "diabetes":
        y = (y - y.mean()) / y.std()
    if leak:
        # a column computed from the outcome, kept by mistake among the features
        X = X.assign(progression_band=np.round(y * 2) / 2)
    rng = np.random.default_rng(0)
    order = rng.permutation(len(X))
    n_val = len(X) // 5
    va, tr = order[:n_val], order[n_val:]
    if overlap:
        tr = order  # the final fit on all rows, validated on rows it has seen
    X_tr, y_tr, X_va, y_va = X.iloc[tr], y.iloc[tr], X.iloc[va], y.iloc[va]
    if shuffle_labels:
        # rows shuffled on the features' side only: each label now sits beside another row's features
        X_tr = X_tr.sample(frac=1.0, random_state=0).reset_index(drop=True)
        y_tr = y_tr.reset_index(drop=True)
    mean, std = X_tr.mean(), X_tr.std()
    if standardize:
        X_tr, X_va = (X_tr - mean) / std, (X_va - mean) / std
    if val_columns_sorted:
        X_va = X_va[sorted(X_va.columns)]
    xtr = torch.tensor(X_tr.to_numpy(np.float32))
    xva = torch.tensor(X_va.to_numpy(np.float32))
    ytr, yva = torch.tensor(y_tr.to_numpy()), torch.tensor(y_va.to_numpy())
    model = Regressor(xtr.size(1), squeeze)
    criterion = nn.MSELoss() if name == "diabetes" else nn.BCEWithLogitsLoss()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=1e-5)
    fit(run_dir, model, optimizer, criterion, (xtr, ytr, xva, yva), g=g, epochs=25, batch=32,
        config={"lr": 1e-3, "weight_decay": 1e-5, "batch_size": 32},
        metrics=(lambda out, y: {}) if name == "diabetes" else binary_accuracy, shown=(X_tr, X_va))
