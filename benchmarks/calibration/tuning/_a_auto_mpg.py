"""rasbt/machine-learning-book ch13/ch13_part2.py, its Auto MPG regression, shrunk: the pandas
preparation (dropna, an 80/20 train_test_split, the five numeric columns standardized with the
training split's describe() statistics, Model Year bucketized at 73/76/79, Origin one-hot),
the MLP of hidden units [8, 4] with ReLU, nn.MSELoss, SGD(lr=0.001), batch 8, and the loop's
order (backward, step, zero_grad). The UCI download is replaced by 398 synthetic cars with the
same columns, ranges and missing horsepowers; 12 epochs instead of 200. Each batch is
recorded as the DataFrame of the features the model reads.

`bug` plants one fault (None: the script as published):
- "test-unnormalized": the standardization loop applied to the training frame only;
- "mpg-feature": 'MPG' left in the numeric feature columns (the target as an input);
- "keep-nan": df.dropna() left out, six cars without horsepower go in as NaN;
- "raw-units": no standardization (Weight in pounds, Displacement in cubic inches);
- "year-four-digits": the data's Model Year written 1970-1982 while the boundaries stay
  73/76/79, so every car falls in the last bucket;
- "shuffled-frame": the feature frame shuffled (df.sample(frac=1)) after the targets were
  taken, so rows and targets no longer match;
- "chronological": healthy, with the split by Model Year (train up to 1979, test 1980-82)
  instead of at random;
- "accumulate": healthy, with gradient accumulation: 4 micro-batches of 8 per optimizer step,
  each loss divided by 4 before backward, zero_grad after each step (40 epochs, 400 steps);
- "accum-no-divide": the same accumulation with the micro-batch losses not divided by 4;
- "negative-bias": the hidden layers' biases initialized to -2 (a custom bias init drawing
  large negative values), so most ReLU units start, and stay, off.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import sklearn.model_selection
import torch
import torch.nn as nn
from torch.nn.functional import one_hot

import tracelab

SOURCE = ("https://github.com/rasbt/machine-learning-book/blob/"
          "35ab3774e8e249c43a98209d8efd94c060102003/ch13/ch13_part2.py")
BUGS = (None, "test-unnormalized", "mpg-feature", "keep-nan", "raw-units", "year-four-digits",
        "shuffled-frame", "chronological", "accumulate", "accum-no-divide",
        "negative-bias")
ACCUMULATE = 4
COLUMNS = ["MPG", "Cylinders", "Displacement", "Horsepower", "Weight", "Acceleration",
           "Model Year", "Origin"]


def auto_mpg(seed: int, four_digit_years: bool = False) -> pd.DataFrame:
    """398 cars like UCI's auto-mpg.data, six of them without a horsepower."""
    rng = np.random.default_rng(seed)
    n = 398
    origin = rng.choice([1, 2, 3], n, p=[0.62, 0.18, 0.20])
    cylinders = np.where(origin == 1, rng.choice([4, 6, 8], n, p=[0.35, 0.3, 0.35]),
                         rng.choice([4, 6], n, p=[0.9, 0.1]))
    displacement = np.round(cylinders * rng.normal(40, 6, n) + rng.normal(0, 10, n))
    horsepower = np.round(0.42 * displacement + rng.normal(30, 10, n))
    weight = np.round(1200 + 7.5 * displacement + rng.normal(0, 250, n))
    acceleration = np.round(22 - 0.045 * horsepower + rng.normal(0, 1.5, n), 1)
    year = rng.integers(70, 83, n)
    mpg = 47 - 0.0065 * weight - 0.05 * horsepower + 0.75 * (year - 76) \
        + 1.5 * (origin > 1) + rng.normal(0, 2.5, n)
    df = pd.DataFrame({"MPG": np.round(np.clip(mpg, 9, 47), 1), "Cylinders": cylinders,
                       "Displacement": displacement, "Horsepower": horsepower,
                       "Weight": weight, "Acceleration": acceleration,
                       "Model Year": year + (1900 if four_digit_years else 0),
                       "Origin": origin})
    df.loc[rng.choice(n, 6, replace=False), "Horsepower"] = np.nan
    numeric = ["Cylinders", "Displacement", "Horsepower", "Weight", "Acceleration"]
    df[numeric] = df[numeric].astype("float64")  # read_csv gives floats; pandas 3 will not upcast
    return df[COLUMNS]


def features(df_norm: pd.DataFrame, numeric: list[str], total_origin: int) -> pd.DataFrame:
    """The model's inputs: the numeric columns, then Origin one-hot (as the script builds
    x_train with torch.cat), as a frame with named columns. torch.tensor copies the column
    where the script's torch.from_numpy would warn about pandas' read-only arrays."""
    origin = one_hot(torch.tensor(df_norm["Origin"].values) % total_origin).numpy()
    out = df_norm[numeric].astype("float32").reset_index(drop=True)
    for k in range(total_origin):
        out[f"Origin_{k}"] = origin[:, k].astype("float32")
    return out


def run(run_dir: str, seed: int = 0, bug: str | None = None, epochs: int = 12) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    df = auto_mpg(seed, four_digit_years=bug == "year-four-digits")
    if bug != "keep-nan":
        df = df.dropna()
    df = df.reset_index(drop=True)
    if bug == "chronological":
        df_train, df_test = df[df["Model Year"] <= 79], df[df["Model Year"] >= 80]
    else:
        df_train, df_test = sklearn.model_selection.train_test_split(df, train_size=0.8,
                                                                     random_state=1)
    train_stats = df_train.describe().transpose()
    numeric = ["Cylinders", "Displacement", "Horsepower", "Weight", "Acceleration"]
    if bug == "mpg-feature":
        numeric = ["MPG", *numeric]
    df_train_norm, df_test_norm = df_train.copy(), df_test.copy()
    if bug != "raw-units":
        for col_name in numeric:
            mean = train_stats.loc[col_name, "mean"]
            std = train_stats.loc[col_name, "std"]
            df_train_norm.loc[:, col_name] = (df_train_norm.loc[:, col_name] - mean) / std
            if bug != "test-unnormalized":
                df_test_norm.loc[:, col_name] = (df_test_norm.loc[:, col_name] - mean) / std
    boundaries = torch.tensor([73, 76, 79])
    for frame in (df_train_norm, df_test_norm):
        frame["Model Year Bucketed"] = torch.bucketize(
            torch.tensor(frame["Model Year"].values), boundaries, right=True).numpy()
    numeric.append("Model Year Bucketed")
    total_origin = len(set(df_train_norm["Origin"]))
    y_train = torch.tensor(df_train_norm["MPG"].values).float()
    y_test = torch.tensor(df_test_norm["MPG"].values).float()
    if bug == "shuffled-frame":
        df_train_norm = df_train_norm.sample(frac=1, random_state=seed)
    x_train_df = features(df_train_norm, numeric, total_origin)
    x_test_df = features(df_test_norm, numeric, total_origin)
    x_train = torch.tensor(x_train_df.values)
    x_test = torch.tensor(x_test_df.values)

    torch.manual_seed(1 + seed)
    hidden_units = [8, 4]
    input_size = x_train.shape[1]
    all_layers = []
    for hidden_unit in hidden_units:
        all_layers.append(nn.Linear(input_size, hidden_unit))
        all_layers.append(nn.ReLU())
        input_size = hidden_unit
    all_layers.append(nn.Linear(hidden_units[-1], 1))
    model = nn.Sequential(*all_layers)
    if bug == "negative-bias":
        for layer in all_layers[:-1]:
            if isinstance(layer, nn.Linear):
                nn.init.constant_(layer.bias, -2.0)
    loss_fn = nn.MSELoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.001)
    gen = torch.Generator().manual_seed(seed)
    with tracelab.Recorder(run_dir, model=model, optimizer=optimizer, loss_fn=loss_fn,
                           feature_names=list(x_train_df.columns),
                           config={"lr": 0.001, "batch_size": 8, "hidden_units": hidden_units}
                           ) as rec:
        accumulate = bug in ("accumulate", "accum-no-divide")
        for _ in range(40 if accumulate else epochs):
            model.train()
            batches = torch.randperm(len(x_train), generator=gen).split(8)
            if accumulate:
                for start in range(0, len(batches) - ACCUMULATE + 1, ACCUMULATE):
                    for idx in batches[start:start + ACCUMULATE]:
                        pred = model(x_train[idx])[:, 0]
                        loss = loss_fn(pred, y_train[idx])
                        if bug == "accumulate":
                            loss = loss / ACCUMULATE
                        loss.backward()
                        rec.accumulate_loss(loss)
                    optimizer.step()
                    optimizer.zero_grad()
                    rec.step(inputs=x_train_df.iloc[idx.numpy()], targets=y_train[idx],
                             outputs=pred)
            else:
                for idx in batches:
                    pred = model(x_train[idx])[:, 0]
                    loss = loss_fn(pred, y_train[idx])
                    loss.backward()
                    optimizer.step()
                    optimizer.zero_grad()
                    rec.step(loss=loss, inputs=x_train_df.iloc[idx.numpy()],
                             targets=y_train[idx], outputs=pred)
            model.eval()
            with torch.no_grad():
                pred = model(x_test)[:, 0]
                mse = loss_fn(pred, y_test)
                mae = nn.L1Loss()(pred, y_test)
            rec.log("val", metrics={"loss": mse, "mae": mae}, inputs=x_test_df, targets=y_test,
                    outputs=pred)
