"""spro/practical-pytorch char-rnn-generation (train.py, model.py), shrunk: its RNN (nn.Embedding
into a 2-layer nn.GRU of hidden size 50, a linear decoder), fed one character at a time with
the hidden state carried through a chunk, nn.CrossEntropyLoss summed over the chunk's
characters, decoder.zero_grad() at the start of each chunk, Adam(lr=0.01); each "epoch" of the
script is one random chunk. The text is a small generated English-like corpus instead of a
file given on the command line; chunks of 40 characters instead of 200, 120 epochs instead of
2000. The recorded loss is the summed chunk loss the script backpropagates.

`bug` plants one fault (None: the script as published):
- "no-zero-grad": decoder.zero_grad() left out, so gradients add up over the chunks;
- "stale-optimizer": the model instantiated a second time after the optimizer was built on the
  first instance, so opt.step() updates a model that is not trained.
"""
from __future__ import annotations

import random
import string

import torch
import torch.nn as nn

import tracelab
from _w_data import text

SOURCE = ("https://github.com/spro/practical-pytorch/blob/"
          "05766973290ef637517f1a62b2bc8be129727ed8/char-rnn-generation/train.py")
BUGS = (None, "no-zero-grad", "stale-optimizer")
all_characters = string.printable
n_characters = len(all_characters)


class RNN(nn.Module):
    def __init__(self, input_size, hidden_size, output_size, n_layers=1):
        super().__init__()
        self.input_size, self.hidden_size = input_size, hidden_size
        self.output_size, self.n_layers = output_size, n_layers
        self.encoder = nn.Embedding(input_size, hidden_size)
        self.gru = nn.GRU(hidden_size, hidden_size, n_layers)
        self.decoder = nn.Linear(hidden_size, output_size)

    def forward(self, input, hidden):
        input = self.encoder(input.view(1, -1))
        output, hidden = self.gru(input.view(1, 1, -1), hidden)
        output = self.decoder(output.view(1, -1))
        return output, hidden

    def init_hidden(self):
        return torch.zeros(self.n_layers, 1, self.hidden_size)


def char_tensor(s):
    return torch.tensor([all_characters.index(c) for c in s], dtype=torch.long)


def run(run_dir: str, seed: int = 0, bug: str | None = None, n_epochs: int = 120,
        hidden_size: int = 50, n_layers: int = 2, learning_rate: float = 0.01,
        chunk_len: int = 40) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    rnd = random.Random(seed)
    file = text(seed)
    file_len = len(file)

    def random_training_set():
        start_index = rnd.randint(0, file_len - chunk_len - 1)
        chunk = file[start_index:start_index + chunk_len + 1]
        return char_tensor(chunk[:-1]), char_tensor(chunk[1:])

    decoder = RNN(n_characters, hidden_size, n_characters, n_layers)
    decoder_optimizer = torch.optim.Adam(decoder.parameters(), lr=learning_rate)
    if bug == "stale-optimizer":
        decoder = RNN(n_characters, hidden_size, n_characters, n_layers)
    criterion = nn.CrossEntropyLoss()
    with tracelab.Recorder(run_dir, model=decoder, optimizer=decoder_optimizer,
                           loss_fn=criterion,
                           config={"lr": learning_rate, "chunk_len": chunk_len,
                                   "hidden_size": hidden_size, "n_layers": n_layers}) as rec:
        for _ in range(n_epochs):
            inp, target = random_training_set()
            hidden = decoder.init_hidden()
            if bug != "no-zero-grad":
                decoder.zero_grad()
            loss = 0
            outputs = []
            for c in range(chunk_len):
                output, hidden = decoder(inp[c], hidden)
                outputs.append(output)
                loss += criterion(output, target[c].view(1))
            loss.backward()
            decoder_optimizer.step()
            rec.step(loss=loss, inputs=inp, targets=target, outputs=torch.cat(outputs))
