"""bentrevett/pytorch-seq2seq, notebook 1 (Sequence to Sequence Learning with Neural Networks):
a 2-layer LSTM encoder and decoder with dropout 0.5, teacher forcing 0.5, Adam, cross-entropy
ignoring the padding, clipping at 1, train() and evaluate() per epoch; sequence-first tensors.
The task: reverse a sequence of 4 to 7 tokens (vocabulary 12); embeddings 16, hidden 32."""
from __future__ import annotations

import torch
from torch import nn

from _s_common import log, recorder, setup, step

PAD, SOS, EOS, VOCAB = 0, 1, 2, 12


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding = nn.Embedding(VOCAB, 16)
        self.rnn = nn.LSTM(16, 32, 2, dropout=0.5)
        self.dropout = nn.Dropout(0.5)

    def forward(self, src):
        _, (hidden, cell) = self.rnn(self.dropout(self.embedding(src)))
        return hidden, cell


class Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding = nn.Embedding(VOCAB, 16)
        self.rnn = nn.LSTM(16, 32, 2, dropout=0.5)
        self.fc_out = nn.Linear(32, VOCAB)
        self.dropout = nn.Dropout(0.5)

    def forward(self, token, hidden, cell):
        out, (hidden, cell) = self.rnn(self.dropout(self.embedding(token.unsqueeze(0))), (hidden, cell))
        return self.fc_out(out.squeeze(0)), hidden, cell


class Seq2Seq(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder, self.decoder = Encoder(), Decoder()

    def forward(self, src, trg, teacher_forcing: torch.Tensor):
        hidden, cell = self.encoder(src)
        outputs = [torch.zeros(trg.size(1), VOCAB)]
        token = trg[0]
        for t in range(1, trg.size(0)):
            out, hidden, cell = self.decoder(token, hidden, cell)
            outputs.append(out)
            token = trg[t] if teacher_forcing[t] else out.argmax(1)
        return torch.stack(outputs)


def pairs(n: int, g: torch.Generator):
    """Source and reversed target, padded, sequence-first: (len, n)."""
    src = torch.full((7, n), PAD)
    trg = torch.full((9, n), PAD)
    for i in range(n):
        k = int(torch.randint(4, 8, (1,), generator=g))
        s = torch.randint(3, VOCAB, (k,), generator=g)
        src[:k, i] = s
        trg[:k + 2, i] = torch.cat([torch.tensor([SOS]), s.flip(0), torch.tensor([EOS])])
    return src, trg


def train(run_dir: str, seed: int, *, train_mode: bool = True) -> None:
    g = setup(seed)
    src_tr, trg_tr = pairs(1280, g)
    src_va, trg_va = pairs(256, g)
    model = Seq2Seq()
    for p in model.parameters():
        nn.init.uniform_(p, -0.08, 0.08)
    optimizer = torch.optim.Adam(model.parameters())
    criterion = nn.CrossEntropyLoss(ignore_index=PAD)

    def flat(out, trg):
        return out[1:].reshape(-1, VOCAB), trg[1:].reshape(-1)

    with recorder(run_dir, model, optimizer, config={"batch_size": 64, "clip": 1.0, "teacher_forcing": 0.5},
                  loss_fn=criterion) as rec:
        for _ in range(10):
            if train_mode:
                model.train()
            for i in range(0, 1280, 64):
                src, trg = src_tr[:, i:i + 64], trg_tr[:, i:i + 64]
                optimizer.zero_grad()
                output = model(src, trg, torch.rand(trg.size(0), generator=g) < 0.5)
                out, tgt = flat(output, trg)
                loss = criterion(out, tgt)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
                step(rec, loss=loss, inputs=src, targets=tgt, outputs=out)
            model.eval()
            with torch.no_grad():
                out, tgt = flat(model(src_va, trg_va, torch.zeros(trg_va.size(0), dtype=torch.bool)), trg_va)
                vloss = criterion(out, tgt)
            log(rec, "val", metrics={"loss": float(vloss)}, inputs=src_va, targets=tgt, outputs=out)
