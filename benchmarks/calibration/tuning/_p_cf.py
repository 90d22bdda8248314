"""dataflowr/notebooks Module8/sol/08_collaborative_filtering_sol.ipynb, shrunk: its DotModel
(ScaledEmbedding user / item factors, ZeroEmbedding biases, dot + biases), regression_loss (mean
squared error), FactorizationModel.fit (shuffle, minibatches of 1024, Adam(lr, weight_decay=l2))
and test() with embedding_dim 50, lr 1e-3, l2 1e-9 as the notebook runs it; 25 epochs instead
of 10. Data: a synthetic MovieLens-100k stand-in (400 users, 600 items, 24000 ratings 1-5 from
a rank-8 user / item model with biases), train_test_split(test_size=0.2, random_state=42).

`bug` (None: the notebook as published):
- "shuffle-apart": fit()'s shuffle draws one order for the user and item ids and another for the
  ratings, so every epoch pairs each (user, item) with some other row's rating;
- "nan-ratings": 1 % of the ratings are missing and read as NaN (kept in both splits).
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim
from sklearn.model_selection import train_test_split

import tracelab

SOURCE = ("https://github.com/dataflowr/notebooks/blob/043dff0f792a5ae67005ba147f7b9dd5fc66e2a1/"
          "Module8/sol/08_collaborative_filtering_sol.ipynb")
BUGS = (None, "shuffle-apart", "nan-ratings")


class ScaledEmbedding(nn.Embedding):
    def reset_parameters(self):
        self.weight.data.normal_(0, 1.0 / self.embedding_dim)


class ZeroEmbedding(nn.Embedding):
    def reset_parameters(self):
        self.weight.data.zero_()


class DotModel(nn.Module):
    def __init__(self, num_users, num_items, embedding_dim=32):
        super().__init__()
        self.user_embeddings = ScaledEmbedding(num_users, embedding_dim)
        self.item_embeddings = ScaledEmbedding(num_items, embedding_dim)
        self.user_biases = ZeroEmbedding(num_users, 1)
        self.item_biases = ZeroEmbedding(num_items, 1)

    def forward(self, user_ids, item_ids):
        user_embedding = self.user_embeddings(user_ids)
        item_embedding = self.item_embeddings(item_ids)
        user_bias = self.user_biases(user_ids).squeeze()
        item_bias = self.item_biases(item_ids).squeeze()
        dot = (user_embedding * item_embedding).sum(1)
        return dot + user_bias + item_bias


def regression_loss(predicted_ratings, observed_ratings):
    return ((observed_ratings - predicted_ratings) ** 2).mean()


def ratings(seed, n_users=400, n_items=600, n=24000, rank=8):
    rng = np.random.default_rng(seed)
    u, v = rng.normal(0, 0.6, (n_users, rank)), rng.normal(0, 0.6, (n_items, rank))
    bu, bi = rng.normal(0, 0.5, n_users), rng.normal(0, 0.7, n_items)
    users, items = rng.integers(0, n_users, n), rng.integers(0, n_items, n)
    r = 3.5 + bu[users] + bi[items] + (u[users] * v[items]).sum(1) + rng.normal(0, 0.5, n)
    return users, items, np.clip(np.round(r), 1, 5).astype(np.float32), n_users, n_items


def run(run_dir: str, seed: int = 0, bug: str | None = None, n_iter: int = 25) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    users, items, r, n_users, n_items = ratings(seed)
    if bug == "nan-ratings":
        r = r.copy()
        r[np.random.default_rng(seed + 7).random(len(r)) < 0.01] = np.nan
    u_tr, u_te, i_tr, i_te, r_tr, r_te = train_test_split(users, items, r, test_size=0.2,
                                                          random_state=42)
    embedding_dim, batch_size, learning_rate = 50, 1024, 1e-3
    l2 = 1e-9
    net = DotModel(n_users, n_items, embedding_dim)
    optimizer = optim.Adam(net.parameters(), lr=learning_rate, weight_decay=l2)
    random_state = np.random.RandomState(seed)
    u_te_t, i_te_t, r_te_t = torch.from_numpy(u_te), torch.from_numpy(i_te), torch.from_numpy(r_te)
    with tracelab.Recorder(run_dir, model=net, optimizer=optimizer,
                           config={"embedding_dim": embedding_dim, "n_iter": n_iter,
                                   "batch_size": batch_size, "learning_rate": learning_rate,
                                   "l2": l2}) as rec:
        for epoch_num in range(n_iter):
            net.train()
            order = np.arange(len(u_tr))
            random_state.shuffle(order)
            users_t = torch.from_numpy(u_tr[order].astype(np.int64))
            items_t = torch.from_numpy(i_tr[order].astype(np.int64))
            if bug == "shuffle-apart":
                order = np.arange(len(u_tr))
                random_state.shuffle(order)
            ratings_t = torch.from_numpy(r_tr[order])
            for i in range(0, len(users_t), batch_size):
                batch_user, batch_item = users_t[i:i + batch_size], items_t[i:i + batch_size]
                batch_rating = ratings_t[i:i + batch_size]
                predictions = net(batch_user, batch_item)
                optimizer.zero_grad()
                loss = regression_loss(predictions, batch_rating)
                loss.backward()
                optimizer.step()
                rec.step(loss=loss, inputs=torch.stack([batch_user, batch_item], 1),
                         targets=batch_rating, outputs=predictions)
            net.train(False)
            with torch.no_grad():
                predictions = net(u_te_t, i_te_t)
                test_loss = regression_loss(r_te_t, predictions).item()
            rec.log("val", metrics={"loss": test_loss}, targets=r_te_t, outputs=predictions)
    print(f"    cf bug={bug}: test mse {test_loss:.3f}")
