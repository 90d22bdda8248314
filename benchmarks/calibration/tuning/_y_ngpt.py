"""karpathy/ng-video-lecture gpt.py, shrunk: its GPTLanguageModel (token and position
embeddings, Blocks of MultiHeadAttention of Heads with a causal tril mask, FeedFoward, pre-norm
LayerNorms, dropout 0.2, ln_f, lm_head, normal(0, 0.02) init), F.cross_entropy over the flattened
(B*T, C) logits, torch.optim.AdamW(lr=3e-4), random get_batch windows, a 90/10 train/val split and
estimate_loss() under @torch.no_grad() with model.eval() ... model.train() every eval_interval.
tinyshakespeare is replaced by English text bundled with Python (the docstrings of a few
standard-library modules, about 60k characters); the sizes shrink to block_size 32, n_embd 64,
n_head 4, n_layer 2, batch 16, 300 iterations, eval every 50 with 10 eval batches.

`bug` plants one fault (None: the script as published):
- "lr-1e-1": torch.optim.AdamW(lr=1e-1).
"""
from __future__ import annotations

import argparse
import collections
import inspect
import json
import textwrap
import functools

import torch
import torch.nn as nn
from torch.nn import functional as F

import tracelab

SOURCE = ("https://github.com/karpathy/ng-video-lecture/blob/"
          "52201428ed7b46804849dea0b3ccf0de9df1a5c3/gpt.py")
BUGS = (None, "lr-1e-1")

batch_size, block_size, max_iters, eval_interval = 16, 32, 300, 50
learning_rate, eval_iters = 3e-4, 10
n_embd, n_head, n_layer, dropout = 64, 4, 2, 0.2


def corpus() -> str:
    parts = []
    for mod in (argparse, collections, functools, inspect, json, textwrap):
        for _, obj in sorted(vars(mod).items()):
            doc = inspect.getdoc(obj) if callable(obj) else None
            if doc and obj.__module__ == mod.__name__:
                parts.append(doc)
    text = "\n\n".join(parts)
    return "".join(c for c in text if c.isascii())[:60000]


class Head(nn.Module):
    def __init__(self, head_size):
        super().__init__()
        self.key = nn.Linear(n_embd, head_size, bias=False)
        self.query = nn.Linear(n_embd, head_size, bias=False)
        self.value = nn.Linear(n_embd, head_size, bias=False)
        self.register_buffer('tril', torch.tril(torch.ones(block_size, block_size)))
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        B, T, C = x.shape
        k = self.key(x)
        q = self.query(x)
        wei = q @ k.transpose(-2, -1) * k.shape[-1] ** -0.5
        wei = wei.masked_fill(self.tril[:T, :T] == 0, float('-inf'))
        wei = F.softmax(wei, dim=-1)
        wei = self.dropout(wei)
        v = self.value(x)
        return wei @ v


class MultiHeadAttention(nn.Module):
    def __init__(self, num_heads, head_size):
        super().__init__()
        self.heads = nn.ModuleList([Head(head_size) for _ in range(num_heads)])
        self.proj = nn.Linear(head_size * num_heads, n_embd)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        out = torch.cat([h(x) for h in self.heads], dim=-1)
        return self.dropout(self.proj(out))


class FeedFoward(nn.Module):
    def __init__(self, n_embd):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(n_embd, 4 * n_embd), nn.ReLU(),
                                 nn.Linear(4 * n_embd, n_embd), nn.Dropout(dropout))

    def forward(self, x):
        return self.net(x)


class Block(nn.Module):
    def __init__(self, n_embd, n_head):
        super().__init__()
        head_size = n_embd // n_head
        self.sa = MultiHeadAttention(n_head, head_size)
        self.ffwd = FeedFoward(n_embd)
        self.ln1 = nn.LayerNorm(n_embd)
        self.ln2 = nn.LayerNorm(n_embd)

    def forward(self, x):
        x = x + self.sa(self.ln1(x))
        return x + self.ffwd(self.ln2(x))


class GPTLanguageModel(nn.Module):
    def __init__(self, vocab_size):
        super().__init__()
        self.token_embedding_table = nn.Embedding(vocab_size, n_embd)
        self.position_embedding_table = nn.Embedding(block_size, n_embd)
        self.blocks = nn.Sequential(*[Block(n_embd, n_head=n_head) for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(n_embd)
        self.lm_head = nn.Linear(n_embd, vocab_size)
        self.apply(self._init_weights)

    def _init_weights(self, module):
        if isinstance(module, nn.Linear):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                torch.nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def forward(self, idx, targets=None):
        B, T = idx.shape
        tok_emb = self.token_embedding_table(idx)
        pos_emb = self.position_embedding_table(torch.arange(T))
        x = self.blocks(tok_emb + pos_emb)
        logits = self.lm_head(self.ln_f(x))
        if targets is None:
            return logits, None
        B, T, C = logits.shape
        logits = logits.view(B * T, C)
        targets = targets.view(B * T)
        return logits, F.cross_entropy(logits, targets)


def run(run_dir: str, seed: int = 0, bug: str | None = None) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(1337 + seed)
    text = corpus()
    chars = sorted(list(set(text)))
    vocab_size = len(chars)
    stoi = {ch: i for i, ch in enumerate(chars)}
    data = torch.tensor([stoi[c] for c in text], dtype=torch.long)
    n = int(0.9 * len(data))
    train_data, val_data = data[:n], data[n:]

    def get_batch(split):
        d = train_data if split == 'train' else val_data
        ix = torch.randint(len(d) - block_size, (batch_size,))
        x = torch.stack([d[i:i + block_size] for i in ix])
        y = torch.stack([d[i + 1:i + block_size + 1] for i in ix])
        return x, y

    model = GPTLanguageModel(vocab_size)

    @torch.no_grad()
    def estimate_loss():
        out = {}
        model.eval()
        for split in ['train', 'val']:
            losses = torch.zeros(eval_iters)
            for k in range(eval_iters):
                X, Y = get_batch(split)
                logits, loss = model(X, Y)
                losses[k] = loss.item()
            out[split] = losses.mean()
        model.train()
        return out, (X, Y.view(-1), logits)

    lr = 1e-1 if bug == "lr-1e-1" else learning_rate
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    with tracelab.Recorder(run_dir, model=model, optimizer=optimizer,
                           loss_fn=nn.CrossEntropyLoss(),
                           config={"lr": lr, "batch_size": batch_size,
                                   "block_size": block_size, "dropout": dropout}) as rec:
        for iter in range(max_iters):
            if iter % eval_interval == 0 or iter == max_iters - 1:
                losses, (xv, yv, lv) = estimate_loss()
                rec.log("val", metrics={"loss": losses['val'].item(),
                                        "train_loss": losses['train'].item()},
                        inputs=xv, targets=yv, outputs=lv)
            xb, yb = get_batch('train')
            logits, loss = model(xb, yb)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            rec.step(loss=loss, inputs=xb, targets=yb.view(-1), outputs=logits)
