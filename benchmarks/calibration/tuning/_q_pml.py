"""KevinMusgrave/pytorch-metric-learning examples/notebooks/TripletMarginLossMNIST.ipynb,
shrunk: its Net (the pytorch/examples MNIST convolutions, Dropout2d(0.25), fc1 to a
128-dimensional embedding, no classifier), losses.TripletMarginLoss(margin=0.2,
distance=CosineSimilarity(), reducer=ThresholdReducer(low=0)) on the triplets of
miners.TripletMarginMiner(margin=0.2, type_of_triplets="semihard"), Adam(lr=0.01), train()
calling model.train(), and test() embedding the train and test sets (the library's tester
switches the model to eval mode) for AccuracyCalculator's precision_at_1 (1-nearest neighbour by
cosine similarity). The library is not installed here: the loss, the miner and the reducer are
written out as the library computes them (all anchor-positive-negative triplets of the batch,
semihard: 0 < sim(a, p) - sim(a, n) <= margin; loss relu(sim(a, n) - sim(a, p) + margin)
averaged over the triplets whose loss is above 0). Shrunk: MNIST replaced by scikit-learn's
8x8 digits (fc1 takes 64 * 2 * 2 features instead of 9216), batch 64 instead of 256 and 6
epochs instead of 1 (a smaller training set).

`bug` plants one fault (None: the notebook as published):
- "lr-1": Adam(lr=1.0) instead of 0.01.
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim

import tracelab
from _q_data import batches, digits, to_tensor

SOURCE = ("https://github.com/KevinMusgrave/pytorch-metric-learning/blob/"
          "216a792c22b0154d3d3bf008a7317edc7d677e71/examples/notebooks/"
          "TripletMarginLossMNIST.ipynb")
BUGS = (None, "lr-1")
MNIST_MEAN, MNIST_STD = 0.1307, 0.3081


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, 1)
        self.conv2 = nn.Conv2d(32, 64, 3, 1)
        self.dropout1 = nn.Dropout2d(0.25)
        self.dropout2 = nn.Dropout2d(0.5)
        self.fc1 = nn.Linear(64 * 2 * 2, 128)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        x = F.max_pool2d(x, 2)
        x = self.dropout1(x)
        x = torch.flatten(x, 1)
        return self.fc1(x)


def cosine_similarity(a, b):
    return F.normalize(a, dim=1) @ F.normalize(b, dim=1).t()


def all_triplets(labels):
    same = labels[:, None] == labels[None, :]
    eye = torch.eye(len(labels), dtype=torch.bool)
    pos = same & ~eye
    neg = ~same
    trip = pos[:, :, None] & neg[:, None, :]
    return torch.nonzero(trip, as_tuple=True)


class TripletMarginMiner:
    """miners.TripletMarginMiner(margin, distance=CosineSimilarity(), type_of_triplets="semihard")."""

    def __init__(self, margin=0.2):
        self.margin = margin
        self.num_triplets = 0

    def __call__(self, embeddings, labels):
        with torch.no_grad():
            a, p, n = all_triplets(labels)
            sim = cosine_similarity(embeddings, embeddings)
            triplet_margin = sim[a, p] - sim[a, n]
            keep = (triplet_margin > 0) & (triplet_margin <= self.margin)
        self.num_triplets = int(keep.sum())
        return a[keep], p[keep], n[keep]


class TripletMarginLoss(nn.Module):
    """losses.TripletMarginLoss(margin, distance=CosineSimilarity(),
    reducer=ThresholdReducer(low=0))."""

    def __init__(self, margin=0.2):
        super().__init__()
        self.margin = margin

    def forward(self, embeddings, labels, indices_tuple):
        a, p, n = indices_tuple
        if len(a) == 0:
            return embeddings.sum() * 0
        sim = cosine_similarity(embeddings, embeddings)
        losses = F.relu(sim[a, n] - sim[a, p] + self.margin)
        above = losses > 0
        if not above.any():
            return losses.sum() * 0
        return losses[above].mean()


def run(run_dir: str, seed: int = 0, bug: str | None = None, num_epochs: int = 6) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    x_train, y_train, x_test, y_test = digits(seed)
    x_train = (to_tensor(x_train) - MNIST_MEAN) / MNIST_STD
    x_test = (to_tensor(x_test) - MNIST_MEAN) / MNIST_STD
    batch_size, lr = 64, 1.0 if bug == "lr-1" else 0.01
    model = Net()
    optimizer = optim.Adam(model.parameters(), lr=lr)
    loss_func = TripletMarginLoss(margin=0.2)
    mining_func = TripletMarginMiner(margin=0.2)
    config = {"lr": lr, "batch_size": batch_size, "margin": 0.2, "num_epochs": num_epochs}
    with tracelab.Recorder(run_dir, model=model, optimizer=optimizer, loss_fn=loss_func,
                           config=config) as rec:
        for _ in range(num_epochs):
            model.train()
            for idx in batches(len(x_train), batch_size, gen):
                data, labels = x_train[idx], y_train[idx]
                optimizer.zero_grad()
                embeddings = model(data)
                indices_tuple = mining_func(embeddings, labels)
                loss = loss_func(embeddings, labels, indices_tuple)
                loss.backward()
                optimizer.step()
                rec.step(loss=loss, inputs=data, targets=labels, outputs=embeddings,
                         metrics={"mined_triplets": mining_func.num_triplets})
            model.eval()
            with torch.no_grad():
                train_emb, test_emb = model(x_train), model(x_test)
            nearest = cosine_similarity(test_emb, train_emb).argmax(dim=1)
            precision_at_1 = (y_train[nearest] == y_test).float().mean().item()
            rec.log("val", metrics={"precision_at_1": precision_at_1}, inputs=x_test,
                    targets=y_test, outputs=test_emb)
