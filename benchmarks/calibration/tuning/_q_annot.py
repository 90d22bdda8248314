"""harvardnlp/annotated-transformer the_annotated_transformer.py, its first example
(example_simple_model: the copy task), shrunk: make_model's encoder-decoder (MultiHeadedAttention,
PositionwiseFeedForward, its LayerNorm, SublayerConnection with dropout 0.1, Embeddings scaled
by sqrt(d_model), sinusoidal PositionalEncoding, Generator = Linear + log_softmax), the
LabelSmoothing criterion (KLDivLoss(reduction="sum") against the smoothed target, smoothing 0.0
as in the example) divided by the batch's ntokens in SimpleLossCompute, Adam(lr=0.5,
betas=(0.9, 0.98), eps=1e-9) under LambdaLR(rate(step, d_model, factor=1.0, warmup=400))
stepped every batch, data_gen's random copy task (V=11, sequences of 10 starting with 1), 20
training batches and 5 evaluation batches an epoch. Shrunk: d_model 32 instead of 512, d_ff 64
instead of 2048, 4 heads instead of 8, N=2 as in the example; batch 32 instead of 80, 12 epochs
instead of 20 and warm-up 200 steps instead of 400 (a shorter run). The Recorder gets every
training batch and each epoch's evaluation loss per token, with the accuracy of the notebook's
greedy_decode on the last evaluation batch.

`bug` plants one fault (None: the script as published):
- "gen-logits": the Generator returns the projection's raw scores (its log_softmax left out), so
  KLDivLoss reads logits as log-probabilities;
- "no-noam": the LambdaLR schedule dropped, Adam runs at the lr=0.5 it was built with.
"""
from __future__ import annotations

import copy
import math

import torch
import torch.nn as nn
from torch.nn.functional import log_softmax
from torch.optim.lr_scheduler import LambdaLR

import tracelab

SOURCE = ("https://github.com/harvardnlp/annotated-transformer/blob/"
          "debc9fd747bb2123160a98046ad1c2d4da44a567/the_annotated_transformer.py")
BUGS = (None, "gen-logits", "no-noam")


class EncoderDecoder(nn.Module):
    def __init__(self, encoder, decoder, src_embed, tgt_embed, generator):
        super().__init__()
        self.encoder, self.decoder = encoder, decoder
        self.src_embed, self.tgt_embed = src_embed, tgt_embed
        self.generator = generator

    def forward(self, src, tgt, src_mask, tgt_mask):
        return self.decode(self.encode(src, src_mask), src_mask, tgt, tgt_mask)

    def encode(self, src, src_mask):
        return self.encoder(self.src_embed(src), src_mask)

    def decode(self, memory, src_mask, tgt, tgt_mask):
        return self.decoder(self.tgt_embed(tgt), memory, src_mask, tgt_mask)


class Generator(nn.Module):
    def __init__(self, d_model, vocab, log_probs=True):
        super().__init__()
        self.proj = nn.Linear(d_model, vocab)
        self.log_probs = log_probs

    def forward(self, x):
        return log_softmax(self.proj(x), dim=-1) if self.log_probs else self.proj(x)


def clones(module, n):
    return nn.ModuleList([copy.deepcopy(module) for _ in range(n)])


class LayerNorm(nn.Module):
    def __init__(self, features, eps=1e-6):
        super().__init__()
        self.a_2 = nn.Parameter(torch.ones(features))
        self.b_2 = nn.Parameter(torch.zeros(features))
        self.eps = eps

    def forward(self, x):
        mean = x.mean(-1, keepdim=True)
        std = x.std(-1, keepdim=True)
        return self.a_2 * (x - mean) / (std + self.eps) + self.b_2


class SublayerConnection(nn.Module):
    def __init__(self, size, dropout):
        super().__init__()
        self.norm = LayerNorm(size)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, sublayer):
        return x + self.dropout(sublayer(self.norm(x)))


class Encoder(nn.Module):
    def __init__(self, layer, n):
        super().__init__()
        self.layers = clones(layer, n)
        self.norm = LayerNorm(layer.size)

    def forward(self, x, mask):
        for layer in self.layers:
            x = layer(x, mask)
        return self.norm(x)


class EncoderLayer(nn.Module):
    def __init__(self, size, self_attn, feed_forward, dropout):
        super().__init__()
        self.self_attn, self.feed_forward = self_attn, feed_forward
        self.sublayer = clones(SublayerConnection(size, dropout), 2)
        self.size = size

    def forward(self, x, mask):
        x = self.sublayer[0](x, lambda x: self.self_attn(x, x, x, mask))
        return self.sublayer[1](x, self.feed_forward)


class Decoder(nn.Module):
    def __init__(self, layer, n):
        super().__init__()
        self.layers = clones(layer, n)
        self.norm = LayerNorm(layer.size)

    def forward(self, x, memory, src_mask, tgt_mask):
        for layer in self.layers:
            x = layer(x, memory, src_mask, tgt_mask)
        return self.norm(x)


class DecoderLayer(nn.Module):
    def __init__(self, size, self_attn, src_attn, feed_forward, dropout):
        super().__init__()
        self.size = size
        self.self_attn, self.src_attn, self.feed_forward = self_attn, src_attn, feed_forward
        self.sublayer = clones(SublayerConnection(size, dropout), 3)

    def forward(self, x, memory, src_mask, tgt_mask):
        m = memory
        x = self.sublayer[0](x, lambda x: self.self_attn(x, x, x, tgt_mask))
        x = self.sublayer[1](x, lambda x: self.src_attn(x, m, m, src_mask))
        return self.sublayer[2](x, self.feed_forward)


def subsequent_mask(size):
    attn_shape = (1, size, size)
    return torch.triu(torch.ones(attn_shape), diagonal=1).type(torch.uint8) == 0


def attention(query, key, value, mask=None, dropout=None):
    d_k = query.size(-1)
    scores = torch.matmul(query, key.transpose(-2, -1)) / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(mask == 0, -1e9)
    p_attn = scores.softmax(dim=-1)
    if dropout is not None:
        p_attn = dropout(p_attn)
    return torch.matmul(p_attn, value), p_attn


class MultiHeadedAttention(nn.Module):
    def __init__(self, h, d_model, dropout=0.1):
        super().__init__()
        assert d_model % h == 0
        self.d_k = d_model // h
        self.h = h
        self.linears = clones(nn.Linear(d_model, d_model), 4)
        self.attn = None
        self.dropout = nn.Dropout(p=dropout)

    def forward(self, query, key, value, mask=None):
        if mask is not None:
            mask = mask.unsqueeze(1)
        nbatches = query.size(0)
        query, key, value = [lin(x).view(nbatches, -1, self.h, self.d_k).transpose(1, 2)
                             for lin, x in zip(self.linears, (query, key, value))]
        x, self.attn = attention(query, key, value, mask=mask, dropout=self.dropout)
        x = x.transpose(1, 2).contiguous().view(nbatches, -1, self.h * self.d_k)
        del query, key, value
        return self.linears[-1](x)


class PositionwiseFeedForward(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.1):
        super().__init__()
        self.w_1 = nn.Linear(d_model, d_ff)
        self.w_2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.w_2(self.dropout(self.w_1(x).relu()))


class Embeddings(nn.Module):
    def __init__(self, d_model, vocab):
        super().__init__()
        self.lut = nn.Embedding(vocab, d_model)
        self.d_model = d_model

    def forward(self, x):
        return self.lut(x) * math.sqrt(self.d_model)


class PositionalEncoding(nn.Module):
    def __init__(self, d_model, dropout, max_len=5000):
        super().__init__()
        self.dropout = nn.Dropout(p=dropout)
        pe = torch.zeros(max_len, d_model)
        position = torch.arange(0, max_len).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2) * -(math.log(10000.0) / d_model))
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)
        self.register_buffer("pe", pe.unsqueeze(0))

    def forward(self, x):
        x = x + self.pe[:, : x.size(1)].requires_grad_(False)
        return self.dropout(x)


def make_model(src_vocab, tgt_vocab, n=6, d_model=512, d_ff=2048, h=8, dropout=0.1,
               log_probs=True):
    c = copy.deepcopy
    attn = MultiHeadedAttention(h, d_model)
    ff = PositionwiseFeedForward(d_model, d_ff, dropout)
    position = PositionalEncoding(d_model, dropout)
    model = EncoderDecoder(
        Encoder(EncoderLayer(d_model, c(attn), c(ff), dropout), n),
        Decoder(DecoderLayer(d_model, c(attn), c(attn), c(ff), dropout), n),
        nn.Sequential(Embeddings(d_model, src_vocab), c(position)),
        nn.Sequential(Embeddings(d_model, tgt_vocab), c(position)),
        Generator(d_model, tgt_vocab, log_probs))
    for p in model.parameters():
        if p.dim() > 1:
            nn.init.xavier_uniform_(p)
    return model


class Batch:
    def __init__(self, src, tgt=None, pad=2):
        self.src = src
        self.src_mask = (src != pad).unsqueeze(-2)
        if tgt is not None:
            self.tgt = tgt[:, :-1]
            self.tgt_y = tgt[:, 1:]
            self.tgt_mask = self.make_std_mask(self.tgt, pad)
            self.ntokens = (self.tgt_y != pad).data.sum()

    @staticmethod
    def make_std_mask(tgt, pad):
        tgt_mask = (tgt != pad).unsqueeze(-2)
        return tgt_mask & subsequent_mask(tgt.size(-1)).type_as(tgt_mask.data)


def greedy_decode(model, src, src_mask, max_len, start_symbol):
    """The notebook's greedy_decode, for a batch of sources."""
    memory = model.encode(src, src_mask)
    ys = torch.zeros(src.size(0), 1).fill_(start_symbol).type_as(src.data)
    for _ in range(max_len - 1):
        out = model.decode(memory, src_mask, ys, subsequent_mask(ys.size(1)).type_as(src.data))
        prob = model.generator(out[:, -1])
        _, next_word = torch.max(prob, dim=1)
        ys = torch.cat([ys, next_word[:, None].type_as(src.data)], dim=1)
    return ys


def rate(step, model_size, factor, warmup):
    if step == 0:
        step = 1
    return factor * (model_size ** (-0.5) * min(step ** (-0.5), step * warmup ** (-1.5)))


class LabelSmoothing(nn.Module):
    def __init__(self, size, padding_idx, smoothing=0.0):
        super().__init__()
        self.criterion = nn.KLDivLoss(reduction="sum")
        self.padding_idx = padding_idx
        self.confidence = 1.0 - smoothing
        self.smoothing = smoothing
        self.size = size
        self.true_dist = None

    def forward(self, x, target):
        assert x.size(1) == self.size
        true_dist = x.data.clone()
        true_dist.fill_(self.smoothing / (self.size - 2))
        true_dist.scatter_(1, target.data.unsqueeze(1), self.confidence)
        true_dist[:, self.padding_idx] = 0
        mask = torch.nonzero(target.data == self.padding_idx)
        if mask.dim() > 0:
            true_dist.index_fill_(0, mask.squeeze(), 0.0)
        self.true_dist = true_dist
        return self.criterion(x, true_dist.clone().detach())


def data_gen(v, batch_size, nbatches, generator):
    for _ in range(nbatches):
        data = torch.randint(1, v, size=(batch_size, 10), generator=generator)
        data[:, 0] = 1
        yield Batch(data.clone(), data.clone(), 0)


def run(run_dir: str, seed: int = 0, bug: str | None = None, epochs: int = 12) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    v, d_model, batch_size, warmup = 11, 32, 32, 200
    criterion = LabelSmoothing(size=v, padding_idx=0, smoothing=0.0)
    model = make_model(v, v, n=2, d_model=d_model, d_ff=2 * d_model, h=4,
                       log_probs=bug != "gen-logits")
    optimizer = torch.optim.Adam(model.parameters(), lr=0.5, betas=(0.9, 0.98), eps=1e-9)
    lr_scheduler = LambdaLR(optimizer=optimizer, lr_lambda=lambda step: rate(
        step, model_size=model.src_embed[0].d_model, factor=1.0, warmup=warmup))
    config = {"lr": 0.5, "betas": (0.9, 0.98), "warmup": warmup, "d_model": d_model,
              "batch_size": batch_size, "smoothing": 0.0}
    with tracelab.Recorder(run_dir, model=model, optimizer=optimizer,
                           scheduler=None if bug == "no-noam" else lr_scheduler,
                           loss_fn=criterion, config=config) as rec:
        for _ in range(epochs):
            model.train()
            for batch in data_gen(v, batch_size, 20, gen):
                out = model.forward(batch.src, batch.tgt, batch.src_mask, batch.tgt_mask)
                x = model.generator(out)
                flat_x = x.contiguous().view(-1, x.size(-1))
                flat_y = batch.tgt_y.contiguous().view(-1)
                loss_node = criterion(flat_x, flat_y) / batch.ntokens
                loss_node.backward()
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
                if bug != "no-noam":
                    lr_scheduler.step()
                rec.step(loss=loss_node, inputs=batch.src, targets=flat_y, outputs=flat_x)
            model.eval()
            total_loss, total_tokens, correct = 0.0, 0, 0
            with torch.no_grad():
                for batch in data_gen(v, batch_size, 5, gen):
                    out = model.forward(batch.src, batch.tgt, batch.src_mask, batch.tgt_mask)
                    x = model.generator(out)
                    flat_x = x.contiguous().view(-1, x.size(-1))
                    flat_y = batch.tgt_y.contiguous().view(-1)
                    total_loss += float(criterion(flat_x, flat_y))
                    total_tokens += int(batch.ntokens)
                    correct += int((flat_x.argmax(-1) == flat_y).sum())
                decoded = greedy_decode(model, batch.src, batch.src_mask, 10, 1)
                greedy_acc = (decoded[:, 1:] == batch.src[:, 1:]).float().mean().item()
            rec.log("val", metrics={"loss": total_loss / total_tokens,
                                    "acc": correct / total_tokens, "greedy_acc": greedy_acc},
                    inputs=batch.src, targets=flat_y, outputs=flat_x)
