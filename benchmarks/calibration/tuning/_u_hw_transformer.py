"""hyunwoongko/transformer (train.py, conf.py, models/), shrunk: its encoder-decoder Transformer
(TransformerEmbedding = token embedding with padding_idx 1 + sinusoidal positional encoding +
dropout; encoder and decoder layers of MultiHeadAttention, its own LayerNorm and a
PositionwiseFeedForward with residuals; ScaleDotProductAttention with the mask filled by -10000
as fixed after issue #10; a final Linear to the target vocabulary), src/trg pad masks and the
target's lower-triangular mask, xavier_uniform_ init, Adam(weight_decay=5e-4),
CrossEntropyLoss(ignore_index=pad), clip_grad_norm_(clip=1), ReduceLROnPlateau(factor=0.8)
stepped on the validation loss after `warmup` epochs, train()/evaluate() with model.train() /
model.eval(). Multi30k is replaced by a synthetic task (translate a token sequence of length 4
to 9 into the same sequence with each token shifted by one); d_model 32, 2 layers, 4 heads, ffn 64
instead of 512/6/8/256, init_lr 2e-3 instead of 1e-4, batch 64, 12 epochs, warmup 2,
patience 3. After each epoch the validation loss (teacher forced, as evaluate() does) is logged, every
fourth epoch also the greedy-decoding exact-match rate on 100 validation sequences.

`bug` plants one fault (None: the code as published, after the fix of issue #10):
- "mask-eps": the attention mask filled with -e (e = 1e-12), the code before that fix: masked
  positions keep their scores, so the decoder attends to the token it must predict.
"""
from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn, optim

import tracelab

SOURCE = ("https://github.com/hyunwoongko/transformer/blob/"
          "0aead7310df14b23a923b88cbb8388cfdf203848/train.py")
BUGS = (None, "mask-eps")
PAD, SOS, EOS, VOCAB = 1, 2, 3, 24


class ScaleDotProductAttention(nn.Module):
    def __init__(self, mask_eps: bool):
        super().__init__()
        self.softmax = nn.Softmax(dim=-1)
        self.mask_eps = mask_eps

    def forward(self, q, k, v, mask=None, e=1e-12):
        batch_size, head, length, d_tensor = k.size()
        k_t = k.transpose(2, 3)
        score = (q @ k_t) / math.sqrt(d_tensor)
        if mask is not None:
            score = score.masked_fill(mask == 0, -e if self.mask_eps else -10000)
        score = self.softmax(score)
        return score @ v, score


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_head, mask_eps):
        super().__init__()
        self.n_head = n_head
        self.attention = ScaleDotProductAttention(mask_eps)
        self.w_q = nn.Linear(d_model, d_model)
        self.w_k = nn.Linear(d_model, d_model)
        self.w_v = nn.Linear(d_model, d_model)
        self.w_concat = nn.Linear(d_model, d_model)

    def split(self, tensor):
        batch_size, length, d_model = tensor.size()
        return tensor.view(batch_size, length, self.n_head, d_model // self.n_head).transpose(1, 2)

    def forward(self, q, k, v, mask=None):
        q, k, v = self.split(self.w_q(q)), self.split(self.w_k(k)), self.split(self.w_v(v))
        out, _ = self.attention(q, k, v, mask=mask)
        batch_size, head, length, d_tensor = out.size()
        out = out.transpose(1, 2).contiguous().view(batch_size, length, head * d_tensor)
        return self.w_concat(out)


class LayerNorm(nn.Module):
    def __init__(self, d_model, eps=1e-12):
        super().__init__()
        self.gamma = nn.Parameter(torch.ones(d_model))
        self.beta = nn.Parameter(torch.zeros(d_model))
        self.eps = eps

    def forward(self, x):
        mean = x.mean(-1, keepdim=True)
        var = x.var(-1, unbiased=False, keepdim=True)
        return self.gamma * ((x - mean) / torch.sqrt(var + self.eps)) + self.beta


class PositionwiseFeedForward(nn.Module):
    def __init__(self, d_model, hidden, drop_prob=0.1):
        super().__init__()
        self.linear1 = nn.Linear(d_model, hidden)
        self.linear2 = nn.Linear(hidden, d_model)
        self.relu = nn.ReLU()
        self.dropout = nn.Dropout(p=drop_prob)

    def forward(self, x):
        return self.linear2(self.dropout(self.relu(self.linear1(x))))


class TransformerEmbedding(nn.Module):
    def __init__(self, vocab_size, d_model, max_len, drop_prob):
        super().__init__()
        self.tok_emb = nn.Embedding(vocab_size, d_model, padding_idx=PAD)
        enc = torch.zeros(max_len, d_model)
        pos = torch.arange(0, max_len).float().unsqueeze(1)
        _2i = torch.arange(0, d_model, step=2).float()
        enc[:, 0::2] = torch.sin(pos / (10000 ** (_2i / d_model)))
        enc[:, 1::2] = torch.cos(pos / (10000 ** (_2i / d_model)))
        self.register_buffer("encoding", enc)
        self.drop_out = nn.Dropout(p=drop_prob)

    def forward(self, x):
        return self.drop_out(self.tok_emb(x) + self.encoding[:x.size(1)])


class EncoderLayer(nn.Module):
    def __init__(self, d_model, ffn_hidden, n_head, drop_prob, mask_eps):
        super().__init__()
        self.attention = MultiHeadAttention(d_model, n_head, mask_eps)
        self.norm1, self.dropout1 = LayerNorm(d_model), nn.Dropout(drop_prob)
        self.ffn = PositionwiseFeedForward(d_model, ffn_hidden, drop_prob)
        self.norm2, self.dropout2 = LayerNorm(d_model), nn.Dropout(drop_prob)

    def forward(self, x, src_mask):
        x = self.norm1(self.dropout1(self.attention(x, x, x, mask=src_mask)) + x)
        return self.norm2(self.dropout2(self.ffn(x)) + x)


class DecoderLayer(nn.Module):
    def __init__(self, d_model, ffn_hidden, n_head, drop_prob, mask_eps):
        super().__init__()
        self.self_attention = MultiHeadAttention(d_model, n_head, mask_eps)
        self.norm1, self.dropout1 = LayerNorm(d_model), nn.Dropout(drop_prob)
        self.enc_dec_attention = MultiHeadAttention(d_model, n_head, mask_eps)
        self.norm2, self.dropout2 = LayerNorm(d_model), nn.Dropout(drop_prob)
        self.ffn = PositionwiseFeedForward(d_model, ffn_hidden, drop_prob)
        self.norm3, self.dropout3 = LayerNorm(d_model), nn.Dropout(drop_prob)

    def forward(self, dec, enc, trg_mask, src_mask):
        x = self.norm1(self.dropout1(self.self_attention(dec, dec, dec, mask=trg_mask)) + dec)
        x = self.norm2(self.dropout2(self.enc_dec_attention(x, enc, enc, mask=src_mask)) + x)
        return self.norm3(self.dropout3(self.ffn(x)) + x)


class Transformer(nn.Module):
    def __init__(self, voc, d_model, n_head, max_len, ffn_hidden, n_layers, drop_prob, mask_eps):
        super().__init__()
        self.enc_emb = TransformerEmbedding(voc, d_model, max_len, drop_prob)
        self.enc_layers = nn.ModuleList([EncoderLayer(d_model, ffn_hidden, n_head, drop_prob,
                                                      mask_eps) for _ in range(n_layers)])
        self.dec_emb = TransformerEmbedding(voc, d_model, max_len, drop_prob)
        self.dec_layers = nn.ModuleList([DecoderLayer(d_model, ffn_hidden, n_head, drop_prob,
                                                      mask_eps) for _ in range(n_layers)])
        self.linear = nn.Linear(d_model, voc)

    def forward(self, src, trg):
        src_mask = (src != PAD).unsqueeze(1).unsqueeze(2)
        trg_pad_mask = (trg != PAD).unsqueeze(1).unsqueeze(3)
        trg_len = trg.shape[1]
        trg_mask = trg_pad_mask & torch.tril(torch.ones(trg_len, trg_len)).bool()
        enc = self.enc_emb(src)
        for layer in self.enc_layers:
            enc = layer(enc, src_mask)
        dec = self.dec_emb(trg)
        for layer in self.dec_layers:
            dec = layer(dec, enc, trg_mask, src_mask)
        return self.linear(dec)


def _batch(rng, n):
    """Source sequences of tokens 4..VOCAB-2 and their translations (each token shifted)."""
    lengths = rng.integers(4, 10, n)
    src = torch.full((n, 11), PAD, dtype=torch.long)
    trg = torch.full((n, 12), PAD, dtype=torch.long)
    for i, m in enumerate(lengths):
        seq = rng.integers(4, VOCAB - 1, m)
        src[i, 0], src[i, 1:m + 1], src[i, m + 1] = SOS, torch.from_numpy(seq), EOS
        out = seq + 1
        trg[i, 0], trg[i, 1:m + 1], trg[i, m + 1] = SOS, torch.from_numpy(out.copy()), EOS
    return src, trg


def _greedy_exact(model, src, trg):
    ys = torch.full((len(src), 1), SOS, dtype=torch.long)
    for _ in range(trg.size(1) - 1):
        nxt = model(src, ys)[:, -1].argmax(-1, keepdim=True)
        ys = torch.cat([ys, nxt], 1)
    keep = trg[:, 1:] != PAD
    return ((ys[:, 1:] == trg[:, 1:]) | ~keep).all(1).float().mean().item()


def run(run_dir: str, seed: int = 0, bug: str | None = None, epoch: int = 12) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    train_src, train_trg = _batch(rng, 1280)
    valid_src, valid_trg = _batch(rng, 200)
    model = Transformer(VOCAB, d_model=32, n_head=4, max_len=16, ffn_hidden=64, n_layers=2,
                        drop_prob=0.1, mask_eps=bug == "mask-eps")

    def initialize_weights(m):
        if hasattr(m, "weight") and m.weight.dim() > 1:
            nn.init.xavier_uniform_(m.weight.data)

    model.apply(initialize_weights)
    init_lr, weight_decay, clip, warmup, batch_size = 2e-3, 5e-4, 1.0, 2, 64
    optimizer = optim.Adam(model.parameters(), lr=init_lr, weight_decay=weight_decay)
    scheduler = optim.lr_scheduler.ReduceLROnPlateau(optimizer, factor=0.8, patience=3)
    criterion = nn.CrossEntropyLoss(ignore_index=PAD)
    config = {"init_lr": init_lr, "weight_decay": weight_decay, "clip": clip,
              "batch_size": batch_size, "d_model": 32, "n_layers": 2, "n_heads": 4}
    with tracelab.Recorder(run_dir, model=model, optimizer=optimizer, scheduler=scheduler,
                           loss_fn=criterion, config=config) as rec:
        for step in range(epoch):
            model.train()
            for idx in torch.from_numpy(rng.permutation(len(train_src))).split(batch_size):
                src, trg = train_src[idx], train_trg[idx]
                optimizer.zero_grad()
                output = model(src, trg[:, :-1])
                output = output.contiguous().view(-1, output.shape[-1])
                target = trg[:, 1:].contiguous().view(-1)
                loss = criterion(output, target)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
                optimizer.step()
                rec.step(loss=loss, inputs=src, targets=target, outputs=output)
            model.eval()
            with torch.no_grad():
                output = model(valid_src, valid_trg[:, :-1])
                output = output.contiguous().view(-1, output.shape[-1])
                target = valid_trg[:, 1:].contiguous().view(-1)
                valid_loss = criterion(output, target).item()
                metrics = {"loss": valid_loss}
                if (step + 1) % 4 == 0:
                    metrics["greedy_exact"] = _greedy_exact(model, valid_src[:100],
                                                            valid_trg[:100])
            rec.log("val", metrics=metrics, inputs=valid_src, targets=target, outputs=output)
            if step > warmup:
                scheduler.step(valid_loss)
