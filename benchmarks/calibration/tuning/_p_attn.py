"""jadore801120/attention-is-all-you-need-pytorch train.py + transformer/, shrunk: the
Transformer (sinusoid PositionalEncoding, MultiHeadAttention with ScaledDotProductAttention,
post-norm residual sublayers, padding and subsequent masks, shared source/target embeddings and
shared projection scaled by d_model ** -0.5, xavier init), cal_loss with label smoothing
(eps 0.1) summed over the non-pad words, Adam(betas=(0.9, 0.98), eps=1e-09) inside
ScheduledOptim (lr = lr_mul * d_model ** -0.5 * min(n ** -0.5, n * warmup ** -1.5)), train_epoch
/ eval_epoch as published. Sizes: d_model 32, d_inner 64, 2 layers, 4 heads, d_k = d_v = 8
(instead of 512 / 2048 / 6 / 8 / 64), warm-up 100 steps, -lr_mul 0.5, batch 32, 10 epochs; the
data is a synthetic "translation" instead of Multi30k: the target is the reversed source
(tokens 4-19, length 5-9, BOS / EOS / PAD). The validation also decodes greedily (translate.py with beam 1) and logs the
exact-match rate.

`bug` (None: the script as published, run with -label_smoothing -embs_share_weight
-proj_share_weight):
- "no-subsequent-mask": the decoder's self-attention mask is only the padding mask, so every
  target position sees the words after it;
- "warmup-128000": -warmup 128000 as in the README's Multi30k command, so over the run's 250
  steps the schedule never warms up and the learning rate stays below 1e-6.
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim

import tracelab

SOURCE = ("https://github.com/jadore801120/attention-is-all-you-need-pytorch/blob/"
          "132907dd272e2cc92e3c10e6c4e783a87ff8893d/train.py")
BUGS = (None, "no-subsequent-mask", "warmup-128000")
PAD, UNK, BOS, EOS, VOCAB = 0, 1, 2, 3, 20


def get_pad_mask(seq, pad_idx):
    return (seq != pad_idx).unsqueeze(-2)


def get_subsequent_mask(seq):
    sz_b, len_s = seq.size()
    return (1 - torch.triu(torch.ones((1, len_s, len_s)), diagonal=1)).bool()


class PositionalEncoding(nn.Module):
    def __init__(self, d_hid, n_position=200):
        super().__init__()
        pos = np.arange(n_position)[:, None] / np.power(10000, 2 * (np.arange(d_hid) // 2) / d_hid)
        pos[:, 0::2], pos[:, 1::2] = np.sin(pos[:, 0::2]), np.cos(pos[:, 1::2])
        self.register_buffer("pos_table", torch.FloatTensor(pos).unsqueeze(0))

    def forward(self, x):
        return x + self.pos_table[:, :x.size(1)].clone().detach()


class ScaledDotProductAttention(nn.Module):
    def __init__(self, temperature, attn_dropout=0.1):
        super().__init__()
        self.temperature = temperature
        self.dropout = nn.Dropout(attn_dropout)

    def forward(self, q, k, v, mask=None):
        attn = torch.matmul(q / self.temperature, k.transpose(2, 3))
        if mask is not None:
            attn = attn.masked_fill(mask == 0, -1e9)
        attn = self.dropout(F.softmax(attn, dim=-1))
        return torch.matmul(attn, v), attn


class MultiHeadAttention(nn.Module):
    def __init__(self, n_head, d_model, d_k, d_v, dropout=0.1):
        super().__init__()
        self.n_head, self.d_k, self.d_v = n_head, d_k, d_v
        self.w_qs = nn.Linear(d_model, n_head * d_k, bias=False)
        self.w_ks = nn.Linear(d_model, n_head * d_k, bias=False)
        self.w_vs = nn.Linear(d_model, n_head * d_v, bias=False)
        self.fc = nn.Linear(n_head * d_v, d_model, bias=False)
        self.attention = ScaledDotProductAttention(temperature=d_k ** 0.5)
        self.dropout = nn.Dropout(dropout)
        self.layer_norm = nn.LayerNorm(d_model, eps=1e-6)

    def forward(self, q, k, v, mask=None):
        d_k, d_v, n_head = self.d_k, self.d_v, self.n_head
        sz_b, len_q, len_k, len_v = q.size(0), q.size(1), k.size(1), v.size(1)
        residual = q
        q = self.w_qs(q).view(sz_b, len_q, n_head, d_k).transpose(1, 2)
        k = self.w_ks(k).view(sz_b, len_k, n_head, d_k).transpose(1, 2)
        v = self.w_vs(v).view(sz_b, len_v, n_head, d_v).transpose(1, 2)
        if mask is not None:
            mask = mask.unsqueeze(1)
        q, attn = self.attention(q, k, v, mask=mask)
        q = q.transpose(1, 2).contiguous().view(sz_b, len_q, -1)
        q = self.dropout(self.fc(q))
        q += residual
        return self.layer_norm(q), attn


class PositionwiseFeedForward(nn.Module):
    def __init__(self, d_in, d_hid, dropout=0.1):
        super().__init__()
        self.w_1, self.w_2 = nn.Linear(d_in, d_hid), nn.Linear(d_hid, d_in)
        self.layer_norm = nn.LayerNorm(d_in, eps=1e-6)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        residual = x
        x = self.dropout(self.w_2(F.relu(self.w_1(x))))
        x += residual
        return self.layer_norm(x)


class EncoderLayer(nn.Module):
    def __init__(self, d_model, d_inner, n_head, d_k, d_v, dropout=0.1):
        super().__init__()
        self.slf_attn = MultiHeadAttention(n_head, d_model, d_k, d_v, dropout=dropout)
        self.pos_ffn = PositionwiseFeedForward(d_model, d_inner, dropout=dropout)

    def forward(self, enc_input, slf_attn_mask=None):
        enc_output, _ = self.slf_attn(enc_input, enc_input, enc_input, mask=slf_attn_mask)
        return self.pos_ffn(enc_output)


class DecoderLayer(nn.Module):
    def __init__(self, d_model, d_inner, n_head, d_k, d_v, dropout=0.1):
        super().__init__()
        self.slf_attn = MultiHeadAttention(n_head, d_model, d_k, d_v, dropout=dropout)
        self.enc_attn = MultiHeadAttention(n_head, d_model, d_k, d_v, dropout=dropout)
        self.pos_ffn = PositionwiseFeedForward(d_model, d_inner, dropout=dropout)

    def forward(self, dec_input, enc_output, slf_attn_mask=None, dec_enc_attn_mask=None):
        dec_output, _ = self.slf_attn(dec_input, dec_input, dec_input, mask=slf_attn_mask)
        dec_output, _ = self.enc_attn(dec_output, enc_output, enc_output, mask=dec_enc_attn_mask)
        return self.pos_ffn(dec_output)


class Stack(nn.Module):
    """Encoder / Decoder: embedding, positional encoding, dropout, LayerNorm, layers."""

    def __init__(self, layer, n_vocab, d_model, d_inner, n_layers, n_head, d_k, d_v, pad_idx,
                 dropout=0.1):
        super().__init__()
        self.word_emb = nn.Embedding(n_vocab, d_model, padding_idx=pad_idx)
        self.position_enc = PositionalEncoding(d_model)
        self.dropout = nn.Dropout(p=dropout)
        self.layer_stack = nn.ModuleList([layer(d_model, d_inner, n_head, d_k, d_v, dropout)
                                          for _ in range(n_layers)])
        self.layer_norm = nn.LayerNorm(d_model, eps=1e-6)

    def embed(self, seq):
        return self.layer_norm(self.dropout(self.position_enc(self.word_emb(seq))))


class Transformer(nn.Module):
    def __init__(self, n_vocab, pad_idx, d_model=32, d_inner=64, n_layers=2, n_head=4, d_k=8,
                 d_v=8, dropout=0.1, causal=True):
        super().__init__()
        self.pad_idx, self.d_model, self.causal = pad_idx, d_model, causal
        args = (n_vocab, d_model, d_inner, n_layers, n_head, d_k, d_v, pad_idx, dropout)
        self.encoder, self.decoder = Stack(EncoderLayer, *args), Stack(DecoderLayer, *args)
        self.trg_word_prj = nn.Linear(d_model, n_vocab, bias=False)
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)
        self.trg_word_prj.weight = self.decoder.word_emb.weight
        self.encoder.word_emb.weight = self.decoder.word_emb.weight

    def forward(self, src_seq, trg_seq):
        src_mask = get_pad_mask(src_seq, self.pad_idx)
        trg_mask = get_pad_mask(trg_seq, self.pad_idx)
        if self.causal:
            trg_mask = trg_mask & get_subsequent_mask(trg_seq)
        enc_output = self.encoder.embed(src_seq)
        for layer in self.encoder.layer_stack:
            enc_output = layer(enc_output, slf_attn_mask=src_mask)
        dec_output = self.decoder.embed(trg_seq)
        for layer in self.decoder.layer_stack:
            dec_output = layer(dec_output, enc_output, slf_attn_mask=trg_mask,
                               dec_enc_attn_mask=src_mask)
        seq_logit = self.trg_word_prj(dec_output) * self.d_model ** -0.5
        return seq_logit.view(-1, seq_logit.size(2))


class ScheduledOptim:
    def __init__(self, optimizer, lr_mul, d_model, n_warmup_steps):
        self._optimizer, self.lr_mul = optimizer, lr_mul
        self.d_model, self.n_warmup_steps, self.n_steps = d_model, n_warmup_steps, 0

    def step_and_update_lr(self):
        self.n_steps += 1
        lr = self.lr_mul * (self.d_model ** -0.5) * min(
            self.n_steps ** (-0.5), self.n_steps * self.n_warmup_steps ** (-1.5))
        for param_group in self._optimizer.param_groups:
            param_group["lr"] = lr
        self._optimizer.step()

    def zero_grad(self):
        self._optimizer.zero_grad()


def cal_loss(pred, gold, trg_pad_idx, smoothing=True):
    gold = gold.contiguous().view(-1)
    if smoothing:
        eps, n_class = 0.1, pred.size(1)
        one_hot = torch.zeros_like(pred).scatter(1, gold.view(-1, 1), 1)
        one_hot = one_hot * (1 - eps) + (1 - one_hot) * eps / (n_class - 1)
        log_prb = F.log_softmax(pred, dim=1)
        loss = -(one_hot * log_prb).sum(dim=1)
        return loss.masked_select(gold.ne(trg_pad_idx)).sum()
    return F.cross_entropy(pred, gold, ignore_index=trg_pad_idx, reduction="sum")


def make_pairs(rng, n):
    """(src (n, 9), trg (n, 11)) padded with PAD: trg = BOS + reversed(src) + EOS."""
    src, trg = np.full((n, 9), PAD), np.full((n, 11), PAD)
    for i in range(n):
        words = rng.integers(4, VOCAB, rng.integers(5, 10))
        src[i, :len(words)] = words
        trg[i, :len(words) + 2] = [BOS, *words[::-1], EOS]
    return torch.from_numpy(src), torch.from_numpy(trg)


@torch.no_grad()
def greedy_exact(model, src, trg):
    """translate.py with beam 1: decode up to 11 tokens, share of sequences right to EOS."""
    out = torch.full((len(src), 1), BOS)
    for _ in range(10):
        logits = model(src, out).view(len(src), out.size(1), -1)
        out = torch.cat([out, logits[:, -1].argmax(-1, keepdim=True)], 1)
    ok = [(o[:int((t != PAD).sum())] == t[:int((t != PAD).sum())]).all().item()
          for o, t in zip(out, trg)]
    return float(np.mean(ok))


def run(run_dir: str, seed: int = 0, bug: str | None = None, epochs: int = 10) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    src_tr, trg_tr = make_pairs(rng, 800)
    src_va, trg_va = make_pairs(rng, 200)
    d_model, n_warmup_steps, lr_mul, batch_size = 32, 100, 0.5, 32
    if bug == "warmup-128000":
        n_warmup_steps = 128000
    model = Transformer(VOCAB, PAD, d_model=d_model, causal=bug != "no-subsequent-mask")
    adam = optim.Adam(model.parameters(), betas=(0.9, 0.98), eps=1e-09)
    optimizer = ScheduledOptim(adam, lr_mul, d_model, n_warmup_steps)
    gen = torch.Generator().manual_seed(seed)
    with tracelab.Recorder(run_dir, model=model, optimizer=adam,
                           config={"d_model": d_model, "n_warmup_steps": n_warmup_steps,
                                   "lr_mul": lr_mul, "batch_size": batch_size,
                                   "label_smoothing": True}) as rec:
        for epoch in range(epochs):
            model.train()
            for idx in torch.randperm(len(src_tr), generator=gen).split(batch_size):
                src_seq = src_tr[idx]
                trg_seq, gold = trg_tr[idx][:, :-1], trg_tr[idx][:, 1:].contiguous().view(-1)
                optimizer.zero_grad()
                pred = model(src_seq, trg_seq)
                loss = cal_loss(pred, gold, PAD, smoothing=True)
                loss.backward()
                optimizer.step_and_update_lr()
                n_word = int(gold.ne(PAD).sum())
                n_correct = int(pred.argmax(1).eq(gold).masked_select(gold.ne(PAD)).sum())
                rec.step(loss=loss, inputs=src_seq, targets=gold, outputs=pred,
                         metrics={"loss_per_word": loss.item() / n_word,
                                  "accuracy": n_correct / n_word})
            model.eval()
            with torch.no_grad():
                trg_seq, gold = trg_va[:, :-1], trg_va[:, 1:].contiguous().view(-1)
                pred = model(src_va, trg_seq)
                vloss = F.cross_entropy(pred, gold, ignore_index=PAD, reduction="sum").item()
                n_word = int(gold.ne(PAD).sum())
                vacc = int(pred.argmax(1).eq(gold).masked_select(gold.ne(PAD)).sum()) / n_word
            exact = greedy_exact(model, src_va, trg_va)
            rec.log("val", metrics={"loss": vloss / n_word, "accuracy": vacc,
                                    "greedy_exact": exact},
                    inputs=src_va, targets=gold, outputs=pred)
    print(f"    attn bug={bug}: val word acc {vacc:.3f} greedy exact {exact:.3f}")
