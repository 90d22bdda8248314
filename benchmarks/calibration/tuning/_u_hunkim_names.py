"""hunkim/PyTorchZeroToAll 12_4_name_classify.py, shrunk: its RNNClassifier (Embedding(128 ASCII
codes, hidden), a 2-layer bidirectional GRU over packed sequences, fc on hidden[-1]), names
padded and sorted by length in pad_sequences with the targets sorted in the same order,
CrossEntropyLoss, Adam(lr=0.001), classifier.zero_grad() / backward / step, the test set scored
after each epoch. The names dataset (data/names_*.csv.gz) is replaced by synthetic names of 6
"countries", each drawn from its own letter distribution and endings (1,200 training names, 300
test names); hidden 32 instead of 100, batch 64 instead of 256, 12 epochs instead of 100.

`bug` plants one fault (None: the script as published):
- "targets-unsorted": pad_sequences sorts the names by length but returns the targets in their
  original order (the `target = target[perm_idx]` line left out).
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn as nn
from torch.nn.utils.rnn import pack_padded_sequence

import tracelab

SOURCE = ("https://github.com/hunkim/PyTorchZeroToAll/blob/"
          "5d081edab8082c8b382fb75cbc0261cb99cb4d69/12_4_name_classify.py")
BUGS = (None, "targets-unsorted")
N_CHARS, N_COUNTRIES = 128, 6
_ALPHABETS = ["aeiklmnost", "abdeghinrsu", "aeijknorvz", "cdehilnoprt", "aefgiklmnu", "behijkosuy"]
_ENDINGS = [["son", "sen", "er"], ["ini", "elli", "o"], ["ov", "ova", "ski"], ["ez", "es", "os"],
            ["mann", "berg", "er"], ["ko", "moto", "ta"]]


def _names(rng: np.random.Generator, n: int):
    names, countries = [], []
    for _ in range(n):
        c = int(rng.integers(N_COUNTRIES))
        stem = "".join(rng.choice(list(_ALPHABETS[c]), size=int(rng.integers(2, 7))))
        end = _ENDINGS[c][int(rng.integers(3))] if rng.random() < 0.7 else ""
        names.append((stem + end).capitalize())
        countries.append(c)
    return names, countries


class RNNClassifier(nn.Module):
    def __init__(self, input_size, hidden_size, output_size, n_layers=1, bidirectional=True):
        super().__init__()
        self.hidden_size = hidden_size
        self.n_layers = n_layers
        self.n_directions = int(bidirectional) + 1
        self.embedding = nn.Embedding(input_size, hidden_size)
        self.gru = nn.GRU(hidden_size, hidden_size, n_layers, bidirectional=bidirectional)
        self.fc = nn.Linear(hidden_size, output_size)

    def forward(self, input, seq_lengths):
        input = input.t()  # B x S -> S x B
        batch_size = input.size(1)
        hidden = torch.zeros(self.n_layers * self.n_directions, batch_size, self.hidden_size)
        embedded = self.embedding(input)
        gru_input = pack_padded_sequence(embedded, seq_lengths.cpu().numpy())
        output, hidden = self.gru(gru_input, hidden)
        return self.fc(hidden[-1])


def make_variables(names, countries, bug):
    seqs = [[ord(ch) for ch in name] for name in names]
    seq_lengths = torch.LongTensor([len(s) for s in seqs])
    seq_tensor = torch.zeros((len(seqs), int(seq_lengths.max()))).long()
    for idx, (seq, seq_len) in enumerate(zip(seqs, seq_lengths)):
        seq_tensor[idx, :seq_len] = torch.LongTensor(seq)
    seq_lengths, perm_idx = seq_lengths.sort(0, descending=True)
    seq_tensor = seq_tensor[perm_idx]
    target = torch.LongTensor(countries)
    if bug != "targets-unsorted":
        target = target[perm_idx]
    return seq_tensor, seq_lengths, target


def run(run_dir: str, seed: int = 0, bug: str | None = None, epochs: int = 12) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    train_names, train_countries = _names(rng, 1200)
    test_names, test_countries = _names(rng, 300)
    classifier = RNNClassifier(N_CHARS, 32, N_COUNTRIES, n_layers=2)
    optimizer = torch.optim.Adam(classifier.parameters(), lr=0.001)
    criterion = nn.CrossEntropyLoss()
    batch_size = 64
    with tracelab.Recorder(run_dir, model=classifier, optimizer=optimizer, loss_fn=criterion,
                           config={"lr": 0.001, "batch_size": batch_size, "hidden": 32,
                                   "n_layers": 2}) as rec:
        for _ in range(epochs):
            order = rng.permutation(len(train_names))
            for start in range(0, len(order), batch_size):
                idx = order[start:start + batch_size]
                input, seq_lengths, target = make_variables(
                    [train_names[i] for i in idx], [train_countries[i] for i in idx], bug)
                output = classifier(input, seq_lengths)
                loss = criterion(output, target)
                classifier.zero_grad()
                loss.backward()
                optimizer.step()
                rec.step(loss=loss, inputs=input, targets=target, outputs=output)
            with torch.no_grad():
                input, seq_lengths, target = make_variables(test_names, test_countries, bug)
                output = classifier(input, seq_lengths)
                test_loss = criterion(output, target).item()
                acc = (output.argmax(1) == target).float().mean().item()
            rec.log("val", metrics={"loss": test_loss, "acc": acc}, inputs=input,
                    targets=target, outputs=output)
