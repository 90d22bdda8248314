"""d2l-en chapter_multilayer-perceptrons/kaggle-house-price.md (PyTorch tab), shrunk: the same
preprocess() (numeric columns standardized over all rows then NaN filled with 0, categorical
ones one-hot with dummy_na), log prices as (N, 1) targets, the first of its 5 folds held out,
d2l.LinearRegression (one Linear layer, MSE, SGD; lr 0.05 where d2l gives 0.01 for ten epochs
of the real table), batch size 64, validation loss at each epoch's end. A synthetic house
table (1,460 rows: areas, quality, years, garage, zoning, neighborhood, some values missing)
instead of the Kaggle download. Each batch is recorded as the DataFrame rows it came from.

Bugs (`bug=`): "log-label-in-features" (the log of SalePrice, added as a column while
exploring the data, left among the features), "fold-in-train" (the held-out fold not dropped
from the training rows), "no-fillna" (the NaN of numeric columns not replaced),
"target-shape" (log prices left as (N,), broadcast against (N, 1) predictions).
`chronological=True` holds out the houses sold in 2010 instead of a fold (ordinary practice)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import torch
from torch import nn

import tracelab

LABEL = "SalePrice"


def raw_houses(seed: int, n: int = 1460) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    qual = rng.integers(1, 11, n)
    area = rng.lognormal(7.2, 0.35, n).round()
    lot = rng.lognormal(9.1, 0.5, n).round()
    built = rng.integers(1900, 2010, n)
    bsmt = (area * rng.uniform(0.4, 1.0, n)).round()
    garage = rng.integers(0, 4, n).astype(float)
    hood = rng.choice(["NAmes", "CollgCr", "OldTown", "Edwards", "Somerst"], n)
    zoning = rng.choice(["RL", "RM", "FV"], n, p=[0.7, 0.2, 0.1])
    sold = rng.integers(2006, 2011, n)
    hood_effect = pd.Series(hood).map({"NAmes": 0.0, "CollgCr": 0.1, "OldTown": -0.15,
                                       "Edwards": -0.1, "Somerst": 0.2}).to_numpy()
    log_price = (10.4 + 0.09 * qual + 0.45 * np.log(area / 1500) + 0.1 * np.log(lot / 9000)
                 + 0.003 * (built - 1970) + 0.05 * garage + hood_effect
                 + rng.normal(0, 0.08, n))
    frame = pd.DataFrame({"Id": np.arange(1, n + 1), "MSZoning": zoning, "LotArea": lot,
                          "Neighborhood": hood, "OverallQual": qual, "YearBuilt": built,
                          "TotalBsmtSF": bsmt, "GrLivArea": area, "GarageCars": garage,
                          "YrSold": sold, LABEL: np.exp(log_price).round()})
    for column, share in (("TotalBsmtSF", 0.03), ("GarageCars", 0.05), ("MSZoning", 0.02)):
        frame.loc[rng.random(n) < share, column] = np.nan
    return frame


def preprocess(raw: pd.DataFrame, *, bug: str | None) -> pd.DataFrame:
    if bug == "log-label-in-features":  # the log target made during exploration, kept
        raw = raw.assign(LogSalePrice=np.log(raw[LABEL]))
    features = raw.drop(columns=["Id", LABEL])
    # d2l selects dtypes != "object"; pandas 3 reads text as "str", so select numbers
    numeric_features = features.select_dtypes(include="number").columns
    features[numeric_features] = features[numeric_features].apply(
        lambda x: (x - x.mean()) / (x.std()))
    if bug != "no-fillna":
        features[numeric_features] = features[numeric_features].fillna(0)
    features = pd.get_dummies(features, dummy_na=True).astype("float32")
    features[LABEL] = raw[LABEL]
    return features


def _tensors(data: pd.DataFrame, *, bug: str | None):
    x = torch.tensor(data.drop(columns=[LABEL]).values.astype(float), dtype=torch.float32)
    y = torch.log(torch.tensor(data[LABEL].values.astype(float), dtype=torch.float32))
    return x, (y if bug == "target-shape" else y.reshape(-1, 1))


def train(run_dir: str, seed: int = 0, *, bug: str | None = None, chronological: bool = False,
          max_epochs: int = 20, lr: float = 0.05, k: int = 5) -> None:
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    raw = raw_houses(seed)
    data = preprocess(raw, bug=bug)
    if chronological:
        held_out = raw.index[raw["YrSold"] == 2010]
    else:
        fold_size = len(data) // k
        held_out = pd.RangeIndex(0, fold_size)
    train_rows = data if bug == "fold-in-train" else data.drop(index=held_out)
    val_rows = data.loc[held_out]
    x_tr, y_tr = _tensors(train_rows, bug=bug)
    x_va, y_va = _tensors(val_rows, bug=bug)
    frame = train_rows.drop(columns=[LABEL]).reset_index(drop=True)
    val_frame = val_rows.drop(columns=[LABEL])

    model = nn.Sequential(nn.Linear(x_tr.shape[1], 1))
    loss_fn = nn.MSELoss()
    optimizer = torch.optim.SGD(model.parameters(), lr)
    config = {"lr": lr, "batch_size": 64, "max_epochs": max_epochs,
              "split": "YrSold 2010" if chronological else f"fold 1 of {k}"}
    with tracelab.Recorder(run_dir, model=model, optimizer=optimizer, loss_fn=loss_fn,
                           config=config) as rec:
        for _ in range(max_epochs):
            model.train()
            for idx in torch.randperm(len(x_tr), generator=gen).split(64):
                y_hat = model(x_tr[idx])
                loss = loss_fn(y_hat, y_tr[idx])
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                rec.step(loss=loss, inputs=frame.iloc[idx.numpy()], targets=y_tr[idx],
                         outputs=y_hat)
            model.eval()
            with torch.no_grad():
                out = model(x_va)
                val_loss = loss_fn(out, y_va)
            rec.log("val", metrics={"loss": val_loss}, inputs=val_frame, targets=y_va,
                    outputs=out)
