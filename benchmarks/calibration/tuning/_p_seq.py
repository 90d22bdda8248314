"""Atcold/NYU-DLSP20 08-seq_classification.ipynb, shrunk: its SimpleLSTM (LSTM(8, 4,
batch_first=True) + Linear(4, 4) read at the last time step) on the notebook's own
TemporalOrderExp6aSequence generator (res/sequential_tasks.py, EASY: length 7-8, one-hot symbols,
pre-padded, four classes from the order of X and Y), CrossEntropyLoss, RMSprop(lr=0.001),
batch 32, 31 batches an epoch; 12 epochs instead of 100. train() calls model.train(), test()
calls model.eval() under no_grad.

`bug` (None: the notebook as published):
- "seq-first": the LSTM built without batch_first=True while the batches stay (batch, time,
  symbol), so it runs over the batch axis and output[:, -1] reads the last sequence's states;
- "lstm-only-in-optimizer": the optimizer is built on model.lstm.parameters() only, so the
  Linear head keeps its initial weights.
"""
from __future__ import annotations

import numpy as np
import torch

import tracelab

SOURCE = ("https://github.com/Atcold/NYU-DLSP20/blob/3049c83260ba05700e2ab9b7ed13cdbe5ddba0fd/"
          "08-seq_classification.ipynb")
BUGS = (None, "seq-first", "lstm-only-in-optimizer")

CLASSES, RELEVANT, DISTRACT = ["Q", "R", "S", "U"], ["X", "Y"], ["a", "b", "c", "d"]
SYMBOLS = RELEVANT + DISTRACT + ["B", "E"]


class TemporalOrder:
    """res/sequential_tasks.py TemporalOrderExp6aSequence at DifficultyLevel.EASY."""

    def __init__(self, rng, batch_size=32, length_range=(7, 9), t1_range=(1, 3), t2_range=(4, 6)):
        self.rng, self.batch_size = rng, batch_size
        self.length_range, self.t1_range, self.t2_range = length_range, t1_range, t2_range

    def generate_pair(self):
        length = self.rng.integers(*self.length_range)
        t1, t2 = self.rng.integers(*self.t1_range), self.rng.integers(*self.t2_range)
        x = list(self.rng.choice(DISTRACT, length))
        x[0], x[-1] = "B", "E"
        y = CLASSES[self.rng.integers(4)]
        a, b = {"Q": (0, 0), "R": (0, 1), "S": (1, 0), "U": (1, 1)}[y]
        x[t1], x[t2] = RELEVANT[a], RELEVANT[b]
        return x, y

    def __len__(self):
        return int(1000.0 / self.batch_size)

    def __getitem__(self, index):
        maxlen = self.length_range[1]
        xs = np.zeros((self.batch_size, maxlen, len(SYMBOLS)), dtype=np.float32)
        ys = np.zeros((self.batch_size, len(CLASSES)), dtype=np.float32)
        for i in range(self.batch_size):
            x, y = self.generate_pair()
            for j, s in enumerate(x):  # pad_sequences(padding='pre')
                xs[i, maxlen - len(x) + j, SYMBOLS.index(s)] = 1.0
            ys[i, CLASSES.index(y)] = 1.0
        return xs, ys


class SimpleLSTM(torch.nn.Module):
    def __init__(self, input_size, hidden_size, output_size, batch_first=True):
        super().__init__()
        self.lstm = torch.nn.LSTM(input_size, hidden_size, batch_first=batch_first)
        self.linear = torch.nn.Linear(hidden_size, output_size)

    def forward(self, x):
        h = self.lstm(x)[0]
        x = self.linear(h)
        return x


def run(run_dir: str, seed: int = 0, bug: str | None = None, max_epochs: int = 12) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    train_data_gen, test_data_gen = TemporalOrder(rng), TemporalOrder(rng)
    model = SimpleLSTM(len(SYMBOLS), 4, len(CLASSES), batch_first=bug != "seq-first")
    criterion = torch.nn.CrossEntropyLoss()
    params = model.lstm.parameters() if bug == "lstm-only-in-optimizer" else model.parameters()
    optimizer = torch.optim.RMSprop(params, lr=0.001)
    with tracelab.Recorder(run_dir, model=model, optimizer=optimizer, loss_fn=criterion,
                           config={"lr": 0.001, "batch_size": 32, "hidden_size": 4}) as rec:
        for epoch in range(max_epochs):
            model.train()
            for batch_idx in range(len(train_data_gen)):
                data, target = train_data_gen[batch_idx]
                data, target = torch.from_numpy(data).float(), torch.from_numpy(target).long()
                output = model(data)
                output = output[:, -1, :]
                target = target.argmax(dim=1)
                loss = criterion(output, target)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                rec.step(loss=loss, inputs=data, targets=target, outputs=output)
            model.eval()
            correct, total, losses = 0, 0, []
            with torch.no_grad():
                for batch_idx in range(len(test_data_gen)):
                    data, target = test_data_gen[batch_idx]
                    data, target = torch.from_numpy(data).float(), torch.from_numpy(target).long()
                    output = model(data)[:, -1, :]
                    target = target.argmax(dim=1)
                    losses.append(criterion(output, target).item())
                    correct += (output.argmax(dim=1) == target).sum().item()
                    total += len(target)
            rec.log("val", metrics={"loss": float(np.mean(losses)), "acc": correct / total},
                    inputs=data, targets=target, outputs=output)
    print(f"    seq bug={bug}: test acc {correct / total:.3f}")
