"""gabrielloye/LSTM_Sentiment-Analysis main.ipynb, shrunk: its SentimentNet (nn.Embedding, a
2-layer nn.LSTM(batch_first=True, dropout=0.5), Dropout(0.2), fc to one output, sigmoid, the
last time step's output), nn.BCELoss on output.squeeze(), Adam(lr=0.005), clip_grad_norm_(5),
the hidden state initialized once per epoch and carried across batches detached, and a
validation pass (model.eval(), then model.train()) every print_every steps. The reviews
become synthetic ones: 20 word ids left-padded with zeros, labelled positive when they hold
more "positive" words (ids 1-10) than "negative" ones (ids 11-20; ids 21-59 neutral, ties
redrawn). Embedding 400 and hidden 512 become 16 and 32, batch 400 becomes 50, 2 epochs 6,
print_every 1000 becomes 10.

`bug` plants one fault (None: the notebook as published):
- "adam-lr-1": Adam(lr=1.0), the learning rate of a config written for SGD;
- "model-rebuilt": the model cell run again after the optimizer cell, so the model that trains
  is a new SentimentNet while the optimizer holds the first one's parameters.
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn as nn

import tracelab

SOURCE = ("https://github.com/gabrielloye/LSTM_Sentiment-Analysis/blob/"
          "e4db4385e9038ff98e0c23d5cb031820dad6c79c/main.ipynb")
BUGS = (None, "adam-lr-1", "model-rebuilt")
VOCAB, SEQ = 60, 20


class SentimentNet(nn.Module):
    def __init__(self, vocab_size, output_size, embedding_dim, hidden_dim, n_layers,
                 drop_prob=0.5):
        super().__init__()
        self.output_size, self.n_layers, self.hidden_dim = output_size, n_layers, hidden_dim
        self.embedding = nn.Embedding(vocab_size, embedding_dim)
        self.lstm = nn.LSTM(embedding_dim, hidden_dim, n_layers, dropout=drop_prob,
                            batch_first=True)
        self.dropout = nn.Dropout(0.2)
        self.fc = nn.Linear(hidden_dim, output_size)
        self.sigmoid = nn.Sigmoid()

    def forward(self, x, hidden):
        batch_size = x.size(0)
        embeds = self.embedding(x.long())
        lstm_out, hidden = self.lstm(embeds, hidden)
        lstm_out = lstm_out.contiguous().view(-1, self.hidden_dim)
        out = self.sigmoid(self.fc(self.dropout(lstm_out)))
        out = out.view(batch_size, -1)[:, -1]
        return out, hidden

    def init_hidden(self, batch_size):
        weight = next(self.parameters()).data
        return (weight.new(self.n_layers, batch_size, self.hidden_dim).zero_(),
                weight.new(self.n_layers, batch_size, self.hidden_dim).zero_())


def reviews(n: int, rng: np.random.Generator):
    lengths = rng.integers(8, SEQ + 1, n)
    x = np.zeros((n, SEQ), dtype=np.int64)
    y = np.zeros(n, dtype=np.int64)
    for i, length in enumerate(lengths):
        while True:
            words = rng.integers(1, VOCAB, length)
            pos, neg = ((words >= 1) & (words <= 10)).sum(), ((words >= 11) & (words <= 20)).sum()
            if pos != neg:
                break
        x[i, SEQ - length:] = words  # pad_input: zeros on the left
        y[i] = int(pos > neg)
    return torch.from_numpy(x), torch.from_numpy(y)


def run(run_dir: str, seed: int = 0, bug: str | None = None, epochs: int = 6) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    rng = np.random.default_rng(seed)
    x_train, y_train = reviews(1500, rng)
    x_val, y_val = reviews(300, rng)
    batch_size, clip, print_every = 50, 5, 10
    model = SentimentNet(VOCAB, 1, 16, 32, 2)
    lr = 1.0 if bug == "adam-lr-1" else 0.005
    criterion = nn.BCELoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    if bug == "model-rebuilt":
        model = SentimentNet(VOCAB, 1, 16, 32, 2)
    counter = 0
    with tracelab.Recorder(run_dir, model=model, optimizer=optimizer, loss_fn=criterion,
                           config={"lr": lr, "batch_size": batch_size, "clip": clip,
                                   "epochs": epochs}) as rec:
        model.train()
        for _ in range(epochs):
            h = model.init_hidden(batch_size)
            order = torch.randperm(len(x_train), generator=gen)
            for b in range(len(x_train) // batch_size):  # drop_last: the hidden state's batch
                idx = order[b * batch_size:(b + 1) * batch_size]
                inputs, labels = x_train[idx], y_train[idx]
                counter += 1
                h = tuple([e.data for e in h])
                model.zero_grad()
                output, h = model(inputs, h)
                loss = criterion(output.squeeze(), labels.float())
                loss.backward()
                nn.utils.clip_grad_norm_(model.parameters(), clip)
                optimizer.step()
                rec.step(loss=loss, inputs=inputs, targets=labels, outputs=output)
                if counter % print_every == 0:
                    val_h = model.init_hidden(batch_size)
                    val_losses, correct = [], 0
                    model.eval()
                    with torch.no_grad():
                        for v in range(len(x_val) // batch_size):
                            inp = x_val[v * batch_size:(v + 1) * batch_size]
                            lab = y_val[v * batch_size:(v + 1) * batch_size]
                            val_h = tuple([each.data for each in val_h])
                            out, val_h = model(inp, val_h)
                            val_losses.append(criterion(out.squeeze(), lab.float()).item())
                            correct += (torch.round(out.squeeze()) == lab).sum().item()
                    rec.log("val", metrics={"loss": float(np.mean(val_losses)),
                                            "accuracy": correct / len(x_val)},
                            inputs=inp, targets=lab, outputs=out)
                    model.train()
