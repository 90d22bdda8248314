"""chenyuntc/pytorch-book Chapter11 (Transformer poetry generation), shrunk: its PoetryModel
(scaled token embedding, sinusoidal PositionalEncoding with dropout, a sequence-first
nn.TransformerEncoder, a linear generator, xavier init), the train() loop (batches transposed to
(seq, batch), a square subsequent mask, a padding mask, targets left-padded with '</s>' removed),
nn.CrossEntropyLoss(ignore_index=pad) and Adam(betas=(0.9, 0.98), eps=1e-9). Emb 512 -> 64,
4 layers -> 2, 8 heads -> 4, feed-forward 1024 -> 128, lr 1e-4 -> 1e-3 for the tiny model.
The poems are synthetic: '<START>', lines drawn from a fixed random Markov chain over 40
characters, '<EOP>', left-padded to 24 tokens with '</s>' as tang.npz is. A held-out set of poems
is scored after each epoch with the same forward pass.

`bug` plants one fault (None: the script as published):
- "no-transpose": the batch is fed as (batch, seq) without `.transpose(1, 0)`, so the
  sequence-first encoder attends across poems and the mask and the next-token shift run along
  the batch;
- "no-eval": the held-out poems scored without model.eval(), dropout active.
"""
from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn
from torch.nn import TransformerEncoder, TransformerEncoderLayer

import tracelab

SOURCE = ("https://github.com/chenyuntc/pytorch-book/blob/403ba44c9a1ebfb7f5cfcfa84fda1c40b157f6e0/"
          "Chapter11/main.py")
BUGS = (None, "no-transpose", "no-eval")
N_CHARS, MAXLEN = 40, 24
START, EOP, SPACE, PAD = N_CHARS, N_CHARS + 1, N_CHARS + 2, N_CHARS + 3
VOCAB = N_CHARS + 4  # PAD = len(word2ix) - 1, SPACE plays '</s>'


class PositionalEncoding(nn.Module):
    def __init__(self, emb_size, dropout, maxlen=200):
        super().__init__()
        den = torch.exp(- torch.arange(0, emb_size, 2).float() * math.log(100) / emb_size)
        pos = torch.arange(0, maxlen).float().reshape(maxlen, 1)
        pos_embedding = torch.zeros((maxlen, emb_size))
        pos_embedding[:, 0::2] = torch.sin(pos * den)
        pos_embedding[:, 1::2] = torch.cos(pos * den)
        pos_embedding = pos_embedding.unsqueeze(-2)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer('pos_embedding', pos_embedding)

    def forward(self, token_embedding):
        return self.dropout(token_embedding + self.pos_embedding[:token_embedding.size(0), :])


class TokenEmbedding(nn.Module):
    def __init__(self, vocab_size, emb_size):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, emb_size)
        self.emb_size = emb_size

    def forward(self, tokens):
        return self.embedding(tokens.long()) * math.sqrt(self.emb_size)


class PoetryModel(nn.Module):
    def __init__(self, vocab_size, num_encoder_layers=2, emb_size=64, dim_feedforward=128,
                 dropout=0.1):
        super().__init__()
        self.src_tok_emb = TokenEmbedding(vocab_size, emb_size)
        self.positional_encoding = PositionalEncoding(emb_size, dropout=dropout)
        encoder_layer = TransformerEncoderLayer(d_model=emb_size, nhead=4,
                                                dim_feedforward=dim_feedforward)
        self.transformer_encoder = TransformerEncoder(encoder_layer, num_layers=num_encoder_layers,
                                                      enable_nested_tensor=False)
        self.generator = nn.Linear(emb_size, vocab_size)
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)

    def forward(self, src, src_mask, src_padding_mask):
        src_emb = self.positional_encoding(self.src_tok_emb(src))
        memory = self.transformer_encoder(src_emb, src_mask, src_padding_mask)
        logit = self.generator(memory)
        return memory, logit


def generate_square_subsequent_mask(sz):
    mask = (torch.triu(torch.ones(sz, sz)) == 1).transpose(0, 1)
    return mask.float().masked_fill(mask == 0, float('-inf')).masked_fill(mask == 1, float(0.0))


def poems(seed: int, n: int) -> torch.Tensor:
    """n poems as (n, MAXLEN) int64: left-padded with SPACE, '<START>' ... '<EOP>'."""
    chain = np.random.default_rng(1234)
    nxt = chain.integers(0, N_CHARS, size=(N_CHARS, 3))  # each character has 3 likely successors
    rng = np.random.default_rng(seed)
    out = np.full((n, MAXLEN), SPACE, dtype=np.int64)
    for i in range(n):
        length = int(rng.integers(10, MAXLEN - 2))
        c = int(rng.integers(0, N_CHARS))
        body = []
        for _ in range(length):
            body.append(c)
            c = int(nxt[c, rng.integers(0, 3)]) if rng.random() < 0.9 else int(rng.integers(0, N_CHARS))
        seq = [START] + body + [EOP]
        out[i, MAXLEN - len(seq):] = seq
    return torch.from_numpy(out)


def forward_loss(model, criterion, data_, bug):
    if bug != "no-transpose":
        data_ = data_.long().transpose(1, 0).contiguous()
    input_, target = data_[:-1, :], data_[1:, :]
    src_mask = generate_square_subsequent_mask(input_.shape[0])
    src_pad_mask = input_ == PAD
    src_pad_mask = src_pad_mask.permute(1, 0).contiguous()
    memory, logit = model(input_, src_mask, src_pad_mask)
    mask = target != SPACE
    target = target[mask]
    logit = logit.flatten(0, 1)[mask.view(-1)]
    return criterion(logit, target), input_, target, logit


def run(run_dir: str, seed: int = 0, bug: str | None = None, epochs: int = 6) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    data, held_out = poems(seed, 1024), poems(seed + 100, 128)
    model = PoetryModel(VOCAB)
    lr = 1e-3
    optimizer = torch.optim.Adam(model.parameters(), lr=lr, betas=(0.9, 0.98), eps=1e-9)
    criterion = nn.CrossEntropyLoss(ignore_index=PAD)
    with tracelab.Recorder(run_dir, model=model, optimizer=optimizer, loss_fn=criterion,
                           config={"lr": lr, "batch_size": 64, "maxlen": MAXLEN}) as rec:
        for _ in range(epochs):
            model.train()
            for idx in torch.randperm(len(data), generator=gen).split(64):
                optimizer.zero_grad()
                loss, input_, target, logit = forward_loss(model, criterion, data[idx], bug)
                loss.backward()
                optimizer.step()
                rec.step(loss=loss, inputs=input_, targets=target, outputs=logit)
            if bug != "no-eval":
                model.eval()
            with torch.no_grad():
                val_loss, input_, target, logit = forward_loss(model, criterion, held_out, bug)
                acc = (logit.argmax(-1) == target).float().mean().item()
            rec.log("val", metrics={"loss": val_loss.item(), "acc": acc}, inputs=input_,
                    targets=target, outputs=logit)
