"""pytorch/tutorials intermediate_source/char_rnn_classification_tutorial.py (the version with
the hand-written RNN), shrunk: the same RNN cell (i2h and i2o Linear layers on
cat(input, hidden), LogSoftmax), n_hidden 128, one-hot letters over all_letters
(ascii_letters + " .,;'", 57), NLLLoss, batch of one random name, a zeroed hidden state per name,
rnn.zero_grad() then the manual SGD update p.data.add_(p.grad.data, alpha=-learning_rate) with
learning_rate 0.005 (no torch.optim), every training example drawn by randomTrainingExample().

Shrunk: 4,000 iterations for 100,000; six synthetic "languages" for the 18 name files: each
builds names of 2-3 syllables from its own 8 syllables (two of them shared with another
language), 200 names each, 40 of them held out. Every 500 iterations the held-out names are
classified with evaluate() and recorded as validation (loss and accuracy; chance 1/6)."""
from __future__ import annotations

import random
import string

import torch
from torch import nn

import tracelab

SOURCE = ("https://github.com/pytorch/tutorials/blob/016d0cc077f60c82b8497d4c7f92051ce40cafee/"
          "intermediate_source/char_rnn_classification_tutorial.py")
all_letters = string.ascii_letters + " .,;'"
n_letters = len(all_letters)
CONSONANTS, VOWELS = "bcdfghklmnprstvz", "aeiouy"


def _names(rnd: random.Random, n_categories=6, per_category=200):
    syll = sorted({c + v for c in CONSONANTS for v in VOWELS}
                  | {v + c for c in "nlrs" for v in VOWELS})
    rnd.shuffle(syll)
    own = [syll[8 * k:8 * k + 6] for k in range(n_categories)]
    sets = [own[k] + own[(k + 1) % n_categories][:2] for k in range(n_categories)]
    out = {}
    for k, s in enumerate(sets):
        names = set()
        while len(names) < per_category:
            names.add("".join(rnd.choice(s) for _ in range(rnd.randint(2, 3))).capitalize())
        out[f"lang{k}"] = sorted(names)
    return out


def lineToTensor(line):
    tensor = torch.zeros(len(line), 1, n_letters)
    for li, letter in enumerate(line):
        tensor[li][0][all_letters.find(letter)] = 1
    return tensor


class RNN(nn.Module):
    def __init__(self, input_size, hidden_size, output_size):
        super().__init__()
        self.hidden_size = hidden_size
        self.i2h = nn.Linear(input_size + hidden_size, hidden_size)
        self.i2o = nn.Linear(input_size + hidden_size, output_size)
        self.softmax = nn.LogSoftmax(dim=1)

    def forward(self, input, hidden):
        combined = torch.cat((input, hidden), 1)
        hidden = self.i2h(combined)
        output = self.i2o(combined)
        return self.softmax(output), hidden

    def initHidden(self):
        return torch.zeros(1, self.hidden_size)


def run(run_dir: str, seed: int = 0, n_iters: int = 4000, learning_rate: float = 0.005,
        eval_every: int = 500) -> None:
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    rnd = random.Random(seed)
    lines = _names(rnd)
    all_categories = sorted(lines)
    train_lines = {c: v[:-40] for c, v in lines.items()}
    val = [(c, n) for c, v in lines.items() for n in v[-40:]]
    rnn = RNN(n_letters, 128, len(all_categories))
    criterion = nn.NLLLoss()

    def evaluate(line_tensor):
        hidden = rnn.initHidden()
        for i in range(line_tensor.size()[0]):
            output, hidden = rnn(line_tensor[i], hidden)
        return output

    config = {"learning_rate": learning_rate, "n_hidden": 128, "batch_size": 1,
              "n_categories": len(all_categories)}
    with tracelab.Recorder(run_dir, model=rnn, optimizer=None, loss_fn=criterion,
                           config=config) as rec:
        for it in range(1, n_iters + 1):
            category = all_categories[rnd.randint(0, len(all_categories) - 1)]
            line = train_lines[category][rnd.randint(0, len(train_lines[category]) - 1)]
            category_tensor = torch.LongTensor([all_categories.index(category)])
            line_tensor = lineToTensor(line)
            hidden = rnn.initHidden()
            rnn.zero_grad()
            for i in range(line_tensor.size()[0]):
                output, hidden = rnn(line_tensor[i], hidden)
            loss = criterion(output, category_tensor)
            loss.backward()
            for p in rnn.parameters():
                p.data.add_(p.grad.data, alpha=-learning_rate)
            rec.step(loss=loss, inputs=line_tensor, outputs=output, targets=category_tensor)
            if it % eval_every == 0:
                with torch.no_grad():
                    outs = torch.cat([evaluate(lineToTensor(n)) for _, n in val])
                    tgt = torch.LongTensor([all_categories.index(c) for c, _ in val])
                    vloss = criterion(outs, tgt)
                    acc = (outs.argmax(1) == tgt).float().mean()
                rec.log("val", metrics={"loss": float(vloss), "acc": float(acc)},
                        outputs=outs, targets=tgt)
