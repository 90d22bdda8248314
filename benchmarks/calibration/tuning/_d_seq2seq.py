"""bentrevett/pytorch-seq2seq "1 - Sequence to Sequence Learning with Neural Networks.ipynb",
shrunk: its Encoder (embedding, dropout, 2-layer LSTM), Decoder (embedding, dropout, 2-layer
LSTM, fc_out) and Seq2Seq with teacher forcing 0.5, init_weights uniform(-0.08, 0.08), Adam()
with its default lr, CrossEntropyLoss(ignore_index=pad_index), clip_grad_norm_(clip=1.0) before
optimizer.step(), train_fn under model.train() and evaluate_fn under model.eval() without
teacher forcing. Batches are padded sequence-first with pad_sequence, as the notebook's
collate_fn. The data is a synthetic "translation" for Multi30k: a source of 2-4 tokens from 10
words and its target, each word mapped through a fixed permutation, both wrapped in <sos> ...
<eos>; embedding 32, hidden 64 for 256/512; 1,000 pairs of distinct sentences split 800 / 200 (train / valid), 12 epochs of batch 32.

`bug` plants one fault (None: the script as published):
- "batch-first": the collate_fn pads with batch_first=True, the sequence-first model reads the
  batch axis as time;
- "lr-1e-5": optim.Adam(model.parameters(), lr=1e-5) instead of the default 1e-3;
- "accum": healthy, gradient accumulation: micro-batches of 8, loss / 4, one step per 4
  (7 epochs, the micro-batches cost more);
- "accum-zero-inside": the same accumulation with optimizer.zero_grad() before every
  micro-batch's backward, so each step sees only the last micro-batch.
"""
from __future__ import annotations

import random

import torch
import torch.nn as nn

import tracelab

SOURCE = ("https://github.com/bentrevett/pytorch-seq2seq/blob/"
          "b3cd54c72cd6e4e63f672d334c795b4fe744ef92/"
          "1%20-%20Sequence%20to%20Sequence%20Learning%20with%20Neural%20Networks.ipynb")
BUGS = (None, "batch-first", "lr-1e-5", "accum", "accum-zero-inside")
PAD, SOS, EOS, N_SPECIAL, N_WORDS = 0, 1, 2, 3, 10
ACCUM = 4


class Encoder(nn.Module):
    def __init__(self, input_dim, embedding_dim, hidden_dim, n_layers, dropout):
        super().__init__()
        self.hidden_dim = hidden_dim
        self.n_layers = n_layers
        self.embedding = nn.Embedding(input_dim, embedding_dim)
        self.rnn = nn.LSTM(embedding_dim, hidden_dim, n_layers, dropout=dropout)
        self.dropout = nn.Dropout(dropout)

    def forward(self, src):
        embedded = self.dropout(self.embedding(src))
        outputs, (hidden, cell) = self.rnn(embedded)
        return hidden, cell


class Decoder(nn.Module):
    def __init__(self, output_dim, embedding_dim, hidden_dim, n_layers, dropout):
        super().__init__()
        self.output_dim = output_dim
        self.hidden_dim = hidden_dim
        self.n_layers = n_layers
        self.embedding = nn.Embedding(output_dim, embedding_dim)
        self.rnn = nn.LSTM(embedding_dim, hidden_dim, n_layers, dropout=dropout)
        self.fc_out = nn.Linear(hidden_dim, output_dim)
        self.dropout = nn.Dropout(dropout)

    def forward(self, input, hidden, cell):
        input = input.unsqueeze(0)
        embedded = self.dropout(self.embedding(input))
        output, (hidden, cell) = self.rnn(embedded, (hidden, cell))
        prediction = self.fc_out(output.squeeze(0))
        return prediction, hidden, cell


class Seq2Seq(nn.Module):
    def __init__(self, encoder, decoder):
        super().__init__()
        self.encoder = encoder
        self.decoder = decoder

    def forward(self, src, trg, teacher_forcing_ratio):
        batch_size = trg.shape[1]
        trg_length = trg.shape[0]
        outputs = torch.zeros(trg_length, batch_size, self.decoder.output_dim)
        hidden, cell = self.encoder(src)
        input = trg[0, :]
        for t in range(1, trg_length):
            output, hidden, cell = self.decoder(input, hidden, cell)
            outputs[t] = output
            teacher_force = random.random() < teacher_forcing_ratio
            top1 = output.argmax(1)
            input = trg[t] if teacher_force else top1
        return outputs


def init_weights(m):
    for name, param in m.named_parameters():
        nn.init.uniform_(param.data, -0.08, 0.08)


def _pairs(n: int, gen: torch.Generator, perm: torch.Tensor) -> list[tuple[torch.Tensor, ...]]:
    """n pairs with distinct source sentences (a sentence drawn twice is drawn again)."""
    pairs, seen = [], set()
    while len(pairs) < n:
        length = int(torch.randint(2, 5, (1,), generator=gen))
        words = torch.randint(0, N_WORDS, (length,), generator=gen)
        if tuple(words.tolist()) in seen:
            continue
        seen.add(tuple(words.tolist()))
        src = torch.cat([torch.tensor([SOS]), words + N_SPECIAL, torch.tensor([EOS])])
        trg = torch.cat([torch.tensor([SOS]), perm[words] + N_SPECIAL, torch.tensor([EOS])])
        pairs.append((src, trg))
    return pairs


def _collate(pairs, batch_first: bool):
    src = nn.utils.rnn.pad_sequence([p[0] for p in pairs], padding_value=PAD,
                                    batch_first=batch_first)
    trg = nn.utils.rnn.pad_sequence([p[1] for p in pairs], padding_value=PAD,
                                    batch_first=batch_first)
    return src, trg


def _loss(model, criterion, src, trg, tf_ratio):
    output = model(src, trg, tf_ratio)
    output_dim = output.shape[-1]
    output = output[1:].view(-1, output_dim)
    trg = trg[1:].reshape(-1)
    return criterion(output, trg), output, trg


def evaluate_fn(model, rec, valid, criterion, bug):
    model.eval()
    src, trg = _collate(valid, batch_first=bug == "batch-first")
    with torch.no_grad():
        loss, output, flat = _loss(model, criterion, src, trg, 0)
    rec.log("val", metrics={"loss": float(loss)}, inputs=src, targets=flat, outputs=output)


def run(run_dir: str, seed: int = 0, bug: str | None = None, epochs: int = 12) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    random.seed(seed)
    gen = torch.Generator().manual_seed(seed)
    perm = torch.randperm(N_WORDS, generator=gen)
    pairs = _pairs(1000, gen, perm)
    train, valid = pairs[:800], pairs[800:]
    dim = N_SPECIAL + N_WORDS
    model = Seq2Seq(Encoder(dim, 32, 64, 2, 0.5), Decoder(dim, 32, 64, 2, 0.5))
    model.apply(init_weights)
    optimizer = (torch.optim.Adam(model.parameters(), lr=1e-5) if bug == "lr-1e-5"
                 else torch.optim.Adam(model.parameters()))
    criterion = nn.CrossEntropyLoss(ignore_index=PAD)
    clip, batch_first = 1.0, bug == "batch-first"
    accum = bug in ("accum", "accum-zero-inside")
    config = {"batch_size": 32, "clip": clip, "teacher_forcing_ratio": 0.5}
    if accum:
        config["accumulation_steps"] = ACCUM
    with tracelab.Recorder(run_dir, model=model, optimizer=optimizer, loss_fn=criterion,
                           config=config) as rec:
        for _ in range(7 if accum else epochs):
            model.train()
            order = torch.randperm(len(train), generator=gen).tolist()
            for start in range(0, len(order), 32):
                batch = [train[i] for i in order[start:start + 32]]
                if not accum:
                    src, trg = _collate(batch, batch_first)
                    optimizer.zero_grad()
                    loss, output, flat = _loss(model, criterion, src, trg, 0.5)
                    loss.backward()
                    torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
                    optimizer.step()
                    rec.step(loss=loss, inputs=src, targets=flat, outputs=output)
                    continue
                for m in range(0, len(batch), 8):
                    src, trg = _collate(batch[m:m + 8], batch_first)
                    if bug == "accum-zero-inside":
                        optimizer.zero_grad()
                    loss, output, flat = _loss(model, criterion, src, trg, 0.5)
                    loss = loss / ACCUM
                    loss.backward()
                    rec.accumulate_loss(loss)
                torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
                optimizer.step()
                optimizer.zero_grad()
                rec.step(inputs=src, targets=flat, outputs=output)
            evaluate_fn(model, rec, valid, criterion, bug)
