"""pytorch/tutorials, beginner_source/transformer_tutorial.py: a TransformerEncoder language model
(embedding scaled by sqrt(d), sinusoidal positions, a square subsequent mask, sequence-first
tensors), cross-entropy, SGD lr 5.0, clip_grad_norm 0.5 before the step, StepLR 0.95 per epoch;
characters of the Zen of Python, d_model 32, 2 heads, 2 layers, bptt 16, batch 10."""
from __future__ import annotations

import math

import torch
from torch import nn

from _s_common import log, recorder, setup, step, text


class PositionalEncoding(nn.Module):
    def __init__(self, d_model: int, dropout: float = 0.1, max_len: int = 64):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        position = torch.arange(max_len).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
        pe = torch.zeros(max_len, 1, d_model)
        pe[:, 0, 0::2] = torch.sin(position * div_term)
        pe[:, 0, 1::2] = torch.cos(position * div_term)
        self.register_buffer("pe", pe)

    def forward(self, x):
        return self.dropout(x + self.pe[:x.size(0)])


class TransformerModel(nn.Module):
    def __init__(self, ntoken: int, d_model: int = 32, nhead: int = 2, d_hid: int = 64, nlayers: int = 2):
        super().__init__()
        self.pos_encoder = PositionalEncoding(d_model, 0.2)
        layer = nn.TransformerEncoderLayer(d_model, nhead, d_hid, 0.2)
        self.transformer_encoder = nn.TransformerEncoder(layer, nlayers, enable_nested_tensor=False)
        self.embedding = nn.Embedding(ntoken, d_model)
        self.linear = nn.Linear(d_model, ntoken)
        self.d_model = d_model
        nn.init.uniform_(self.embedding.weight, -0.1, 0.1)
        nn.init.zeros_(self.linear.bias)
        nn.init.uniform_(self.linear.weight, -0.1, 0.1)

    def forward(self, src, src_mask):
        src = self.pos_encoder(self.embedding(src) * math.sqrt(self.d_model))
        return self.linear(self.transformer_encoder(src, src_mask))


def batchify(data: torch.Tensor, bsz: int) -> torch.Tensor:
    seq_len = data.size(0) // bsz
    return data[:seq_len * bsz].view(bsz, seq_len).t().contiguous()


def train(run_dir: str, seed: int, *, batch_first_data: bool = False, clip_after_step: bool = False) -> None:
    setup(seed)
    chars = sorted(set(text()))
    data = torch.tensor([chars.index(c) for c in text()])
    n = int(0.9 * len(data))
    train_data, val_data = batchify(data[:n], 10), batchify(data[n:], 4)
    bptt = 16
    model = TransformerModel(len(chars))
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=5.0)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 1.0, gamma=0.95)

    def get_batch(source, i):
        seq_len = min(bptt, len(source) - 1 - i)
        src, tgt = source[i:i + seq_len], source[i + 1:i + 1 + seq_len]
        return (src.t(), tgt.t()) if batch_first_data else (src, tgt)

    with recorder(run_dir, model, optimizer, config={"lr": 5.0, "bptt": bptt, "batch_size": 10, "clip": 0.5},
                  loss_fn=criterion) as rec:
        for _ in range(12):
            model.train()
            for i in range(0, train_data.size(0) - 1, bptt):
                src, targets = get_batch(train_data, i)
                mask = nn.Transformer.generate_square_subsequent_mask(src.size(0))
                output = model(src, mask).view(-1, len(chars))
                loss = criterion(output, targets.reshape(-1))
                optimizer.zero_grad()
                loss.backward()
                if not clip_after_step:
                    torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
                optimizer.step()
                if clip_after_step:
                    torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
                step(rec, loss=loss, inputs=src, targets=targets, outputs=output)
            scheduler.step()
            model.eval()
            with torch.no_grad():
                src, targets = get_batch(val_data, 0)
                out = model(src, nn.Transformer.generate_square_subsequent_mask(src.size(0))).view(-1, len(chars))
                vloss = criterion(out, targets.reshape(-1))
            log(rec, "val", metrics={"loss": float(vloss)}, inputs=src, targets=targets, outputs=out)
