"""graykode/nlp-tutorial 5-1.Transformer/Transformer.py (and the greedy decoder of
Transformer(Greedy_decoder).py), shrunk: its encoder-decoder Transformer (embedding plus frozen
sinusoid position table, multi-head attention with residual and LayerNorm, the position-wise
feed-forward as two kernel-1 Conv1d, a pad mask on every attention and the subsequent mask on the
decoder's self-attention, a bias-free projection), nn.CrossEntropyLoss and Adam(lr=1e-3). The
script's one German-English sentence pair is replaced by a synthetic translation: 5 source
tokens (vocabulary of 10 plus P) to their reversal in the target vocabulary, with the script's
S/E convention (decoder input `S y1..y5`, target `y1..y5 E`); 1,200 training pairs in batches of
32, 300 held-out pairs; d_model 32, d_ff 64, d_k = d_v = 8, 2 layers, 4 heads instead of 512,
2048, 64, 6 and 8; the positions are 1..len instead of the script's hard-coded [[1,2,3,4,0]];
5 epochs. After every epoch the held-out pairs are scored with teacher forcing (loss) and with
the greedy decoder (token and sequence accuracy).

`bug` plants one fault (None: the script as published):
- "no-subsequent-mask": the decoder's self-attention mask built from the pad mask only, so each
  target position attends to the decoder inputs after it, i.e. to the token it must predict.
"""
from __future__ import annotations

import numpy as np
import torch
from torch import nn, optim

import tracelab
from _v_data import batches

SOURCE = ("https://github.com/graykode/nlp-tutorial/blob/"
          "d05e31ec81d56d70c1db89b99ab07e948f7ebc11/5-1.Transformer/Transformer.py")
BUGS = (None, "no-subsequent-mask")

src_vocab_size, tgt_vocab_size = 11, 13  # P=0, tokens 1..10; target adds S=11, E=12
S_TOK, E_TOK = 11, 12
src_len = tgt_len = 6
d_model, d_ff, d_k, d_v, n_layers, n_heads = 32, 64, 8, 8, 2, 4


def get_sinusoid_encoding_table(n_position, d_model):
    def cal_angle(position, hid_idx):
        return position / np.power(10000, 2 * (hid_idx // 2) / d_model)

    table = np.array([[cal_angle(pos, j) for j in range(d_model)] for pos in range(n_position)])
    table[:, 0::2] = np.sin(table[:, 0::2])
    table[:, 1::2] = np.cos(table[:, 1::2])
    return torch.FloatTensor(table)


def get_attn_pad_mask(seq_q, seq_k):
    batch_size, len_q = seq_q.size()
    batch_size, len_k = seq_k.size()
    pad_attn_mask = seq_k.data.eq(0).unsqueeze(1)
    return pad_attn_mask.expand(batch_size, len_q, len_k)


def get_attn_subsequent_mask(seq):
    attn_shape = [seq.size(0), seq.size(1), seq.size(1)]
    subsequent_mask = np.triu(np.ones(attn_shape), k=1)
    return torch.from_numpy(subsequent_mask).byte()


class ScaledDotProductAttention(nn.Module):
    def forward(self, Q, K, V, attn_mask):
        scores = torch.matmul(Q, K.transpose(-1, -2)) / np.sqrt(d_k)
        scores.masked_fill_(attn_mask, -1e9)
        attn = nn.Softmax(dim=-1)(scores)
        return torch.matmul(attn, V), attn


class MultiHeadAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.W_Q = nn.Linear(d_model, d_k * n_heads)
        self.W_K = nn.Linear(d_model, d_k * n_heads)
        self.W_V = nn.Linear(d_model, d_v * n_heads)
        self.linear = nn.Linear(n_heads * d_v, d_model)
        self.layer_norm = nn.LayerNorm(d_model)

    def forward(self, Q, K, V, attn_mask):
        residual, batch_size = Q, Q.size(0)
        q_s = self.W_Q(Q).view(batch_size, -1, n_heads, d_k).transpose(1, 2)
        k_s = self.W_K(K).view(batch_size, -1, n_heads, d_k).transpose(1, 2)
        v_s = self.W_V(V).view(batch_size, -1, n_heads, d_v).transpose(1, 2)
        attn_mask = attn_mask.unsqueeze(1).repeat(1, n_heads, 1, 1)
        context, attn = ScaledDotProductAttention()(q_s, k_s, v_s, attn_mask)
        context = context.transpose(1, 2).contiguous().view(batch_size, -1, n_heads * d_v)
        output = self.linear(context)
        return self.layer_norm(output + residual), attn


class PoswiseFeedForwardNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv1d(in_channels=d_model, out_channels=d_ff, kernel_size=1)
        self.conv2 = nn.Conv1d(in_channels=d_ff, out_channels=d_model, kernel_size=1)
        self.layer_norm = nn.LayerNorm(d_model)

    def forward(self, inputs):
        residual = inputs
        output = nn.ReLU()(self.conv1(inputs.transpose(1, 2)))
        output = self.conv2(output).transpose(1, 2)
        return self.layer_norm(output + residual)


class EncoderLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc_self_attn = MultiHeadAttention()
        self.pos_ffn = PoswiseFeedForwardNet()

    def forward(self, enc_inputs, enc_self_attn_mask):
        enc_outputs, attn = self.enc_self_attn(enc_inputs, enc_inputs, enc_inputs,
                                               enc_self_attn_mask)
        return self.pos_ffn(enc_outputs), attn


class DecoderLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.dec_self_attn = MultiHeadAttention()
        self.dec_enc_attn = MultiHeadAttention()
        self.pos_ffn = PoswiseFeedForwardNet()

    def forward(self, dec_inputs, enc_outputs, dec_self_attn_mask, dec_enc_attn_mask):
        dec_outputs, a1 = self.dec_self_attn(dec_inputs, dec_inputs, dec_inputs,
                                             dec_self_attn_mask)
        dec_outputs, a2 = self.dec_enc_attn(dec_outputs, enc_outputs, enc_outputs,
                                            dec_enc_attn_mask)
        return self.pos_ffn(dec_outputs), a1, a2


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.src_emb = nn.Embedding(src_vocab_size, d_model)
        self.pos_emb = nn.Embedding.from_pretrained(
            get_sinusoid_encoding_table(src_len + 1, d_model), freeze=True)
        self.layers = nn.ModuleList([EncoderLayer() for _ in range(n_layers)])

    def forward(self, enc_inputs):
        pos = torch.arange(1, enc_inputs.size(1) + 1).unsqueeze(0)
        enc_outputs = self.src_emb(enc_inputs) + self.pos_emb(pos)
        enc_self_attn_mask = get_attn_pad_mask(enc_inputs, enc_inputs)
        for layer in self.layers:
            enc_outputs, _ = layer(enc_outputs, enc_self_attn_mask)
        return enc_outputs


class Decoder(nn.Module):
    def __init__(self, subsequent_mask=True):
        super().__init__()
        self.tgt_emb = nn.Embedding(tgt_vocab_size, d_model)
        self.pos_emb = nn.Embedding.from_pretrained(
            get_sinusoid_encoding_table(tgt_len + 1, d_model), freeze=True)
        self.layers = nn.ModuleList([DecoderLayer() for _ in range(n_layers)])
        self.subsequent_mask = subsequent_mask

    def forward(self, dec_inputs, enc_inputs, enc_outputs):
        pos = torch.arange(1, dec_inputs.size(1) + 1).unsqueeze(0)
        dec_outputs = self.tgt_emb(dec_inputs) + self.pos_emb(pos)
        dec_self_attn_pad_mask = get_attn_pad_mask(dec_inputs, dec_inputs)
        if self.subsequent_mask:
            dec_self_attn_subsequent_mask = get_attn_subsequent_mask(dec_inputs)
            dec_self_attn_mask = torch.gt(
                (dec_self_attn_pad_mask.byte() + dec_self_attn_subsequent_mask), 0)
        else:
            dec_self_attn_mask = dec_self_attn_pad_mask
        dec_enc_attn_mask = get_attn_pad_mask(dec_inputs, enc_inputs)
        for layer in self.layers:
            dec_outputs, _, _ = layer(dec_outputs, enc_outputs, dec_self_attn_mask,
                                      dec_enc_attn_mask)
        return dec_outputs


class Transformer(nn.Module):
    def __init__(self, subsequent_mask=True):
        super().__init__()
        self.encoder = Encoder()
        self.decoder = Decoder(subsequent_mask)
        self.projection = nn.Linear(d_model, tgt_vocab_size, bias=False)

    def forward(self, enc_inputs, dec_inputs):
        enc_outputs = self.encoder(enc_inputs)
        dec_outputs = self.decoder(dec_inputs, enc_inputs, enc_outputs)
        dec_logits = self.projection(dec_outputs)
        return dec_logits.view(-1, dec_logits.size(-1))


def make_pairs(n, rng):
    src = rng.integers(1, 11, size=(n, 5))
    tgt = src[:, ::-1]
    enc = np.concatenate([src, np.zeros((n, 1), dtype=src.dtype)], 1)  # a trailing P, as in
    dec = np.concatenate([np.full((n, 1), S_TOK), tgt], 1)              # 'ich mochte ein bier P'
    out = np.concatenate([tgt, np.full((n, 1), E_TOK)], 1)
    return (torch.LongTensor(enc.copy()), torch.LongTensor(dec.copy()),
            torch.LongTensor(out.copy()))


def greedy_decoder(model, enc_input):
    """Transformer(Greedy_decoder).py: feed back the argmax one position at a time."""
    enc_outputs = model.encoder(enc_input)
    dec_input = torch.full((enc_input.size(0), 1), S_TOK, dtype=torch.long)
    for _ in range(tgt_len):
        dec_outputs = model.decoder(dec_input, enc_input, enc_outputs)
        nxt = model.projection(dec_outputs)[:, -1].argmax(-1, keepdim=True)
        dec_input = torch.cat([dec_input, nxt], 1)
    return dec_input[:, 1:]


def run(run_dir: str, seed: int = 0, bug: str | None = None, epochs: int = 5) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    rng = np.random.default_rng(seed)
    enc_tr, dec_tr, out_tr = make_pairs(1200, rng)
    enc_va, dec_va, out_va = make_pairs(300, rng)
    model = Transformer(subsequent_mask=bug != "no-subsequent-mask")
    criterion = nn.CrossEntropyLoss()
    lr = 0.001
    optimizer = optim.Adam(model.parameters(), lr=lr)
    with tracelab.Recorder(run_dir, model=model, optimizer=optimizer, loss_fn=criterion,
                           config={"lr": lr, "batch_size": 32, "epochs": epochs,
                                   "d_model": d_model, "n_layers": n_layers}) as rec:
        for _epoch in range(epochs):
            model.train()
            for idx in batches(len(enc_tr), 32, gen):
                enc_inputs, dec_inputs, target_batch = enc_tr[idx], dec_tr[idx], out_tr[idx]
                optimizer.zero_grad()
                outputs = model(enc_inputs, dec_inputs)
                loss = criterion(outputs, target_batch.contiguous().view(-1))
                loss.backward()
                optimizer.step()
                rec.step(loss=loss, inputs=(enc_inputs, dec_inputs),
                         targets=target_batch.contiguous().view(-1), outputs=outputs)
            model.eval()
            with torch.no_grad():
                outputs = model(enc_va, dec_va)
                val_loss = criterion(outputs, out_va.view(-1)).item()
                greedy = greedy_decoder(model, enc_va)
                acc = (greedy == out_va).float().mean().item()
                seq_acc = (greedy == out_va).all(1).float().mean().item()
            rec.log("val", metrics={"loss": val_loss, "greedy_token_accuracy": acc,
                                    "greedy_sequence_accuracy": seq_acc},
                    inputs=(enc_va, dec_va), targets=out_va.view(-1), outputs=outputs)
