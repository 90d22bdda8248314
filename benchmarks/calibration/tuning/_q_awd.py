"""salesforce/awd-lstm-lm main.py with model.py, locked_dropout.py, embed_regularize.py and
utils.py, shrunk: RNNModel's stacked single-layer LSTMs (sequence-first), embedding dropout
(dropoute 0.1), LockedDropout on the embedding, between layers and on the output (dropout 0.4),
the decoder Linear; batchify / get_batch with the random
sequence length around bptt and the learning rate scaled by seq_len / bptt for each batch;
repackage_hidden between batches; cross-entropy over the full vocabulary (SplitCrossEntropyLoss
with no splits), plus AR (alpha 2) and TAR (beta 1) activation regularization;
clip_grad_norm_(params, 0.25) before SGD(lr=30, weight_decay=1.2e-6); evaluate() in eval mode
on the validation stream after each epoch. Shrunk: Penn Treebank replaced by a synthetic
40-word corpus (_q_data.corpus), 2 layers of 64 units with 32-dimensional embeddings instead of
3 x 1150 / 400 (so dropouti 0.4 and dropouth 0.25 instead of 0.65 and 0.3), batch 20 and bptt
20 instead of 80 and 70, 12 epochs; the WeightDrop on
weight_hh (wdrop) left out (its parameter re-registration does not run on current PyTorch) and
no switch to ASGD (it waits for 5 non-improving epochs).

`bug` plants one fault (None: the script as published):
- "clip-after-step": clip_grad_norm_ called after optimizer.step() instead of before it.
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn as nn

import tracelab
from _q_data import corpus

SOURCE = ("https://github.com/salesforce/awd-lstm-lm/blob/"
          "1d466ec5875675ca6b6f0caacbb741240a29da9e/main.py")
BUGS = (None, "clip-after-step")


class LockedDropout(nn.Module):
    def forward(self, x, dropout=0.5):
        if not self.training or not dropout:
            return x
        m = x.data.new(1, x.size(1), x.size(2)).bernoulli_(1 - dropout)
        mask = m / (1 - dropout)
        return mask.expand_as(x) * x


def embedded_dropout(embed, words, dropout=0.1):
    if dropout:
        mask = embed.weight.data.new().resize_((embed.weight.size(0), 1)).bernoulli_(
            1 - dropout).expand_as(embed.weight) / (1 - dropout)
        masked_embed_weight = mask * embed.weight
    else:
        masked_embed_weight = embed.weight
    return torch.nn.functional.embedding(words, masked_embed_weight)


class RNNModel(nn.Module):
    def __init__(self, ntoken, ninp, nhid, nlayers, dropout=0.5, dropouth=0.5, dropouti=0.5,
                 dropoute=0.1):
        super().__init__()
        self.lockdrop = LockedDropout()
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnns = nn.ModuleList([nn.LSTM(ninp if l == 0 else nhid,
                                           nhid if l != nlayers - 1 else ninp, 1, dropout=0)
                                   for l in range(nlayers)])
        self.decoder = nn.Linear(ninp, ntoken)
        self.init_weights()
        self.ninp, self.nhid, self.nlayers = ninp, nhid, nlayers
        self.dropout, self.dropouti, self.dropouth, self.dropoute = (dropout, dropouti,
                                                                     dropouth, dropoute)

    def init_weights(self):
        initrange = 0.1
        self.encoder.weight.data.uniform_(-initrange, initrange)
        self.decoder.bias.data.fill_(0)
        self.decoder.weight.data.uniform_(-initrange, initrange)

    def forward(self, input, hidden, return_h=False):
        emb = embedded_dropout(self.encoder, input,
                               dropout=self.dropoute if self.training else 0)
        emb = self.lockdrop(emb, self.dropouti)
        raw_output = emb
        new_hidden, raw_outputs, outputs = [], [], []
        for l, rnn in enumerate(self.rnns):
            raw_output, new_h = rnn(raw_output, hidden[l])
            new_hidden.append(new_h)
            raw_outputs.append(raw_output)
            if l != self.nlayers - 1:
                raw_output = self.lockdrop(raw_output, self.dropouth)
                outputs.append(raw_output)
        hidden = new_hidden
        output = self.lockdrop(raw_output, self.dropout)
        outputs.append(output)
        result = output.view(output.size(0) * output.size(1), output.size(2))
        if return_h:
            return result, hidden, raw_outputs, outputs
        return result, hidden

    def init_hidden(self, bsz):
        weight = next(self.parameters()).data
        return [(weight.new(1, bsz, self.nhid if l != self.nlayers - 1 else self.ninp).zero_(),
                 weight.new(1, bsz, self.nhid if l != self.nlayers - 1 else self.ninp).zero_())
                for l in range(self.nlayers)]


def repackage_hidden(h):
    if isinstance(h, torch.Tensor):
        return h.detach()
    return tuple(repackage_hidden(v) for v in h)


def batchify(data, bsz):
    nbatch = data.size(0) // bsz
    data = data.narrow(0, 0, nbatch * bsz)
    return data.view(bsz, -1).t().contiguous()


def get_batch(source, i, bptt, seq_len=None):
    seq_len = min(seq_len if seq_len else bptt, len(source) - 1 - i)
    data = source[i:i + seq_len]
    target = source[i + 1:i + 1 + seq_len].reshape(-1)
    return data, target


def run(run_dir: str, seed: int = 0, bug: str | None = None, epochs: int = 12) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    np.random.seed(seed)
    ntokens, batch_size, eval_batch_size, bptt = 40, 20, 10, 20
    lr, clip, wdecay, alpha, beta = 30.0, 0.25, 1.2e-6, 2.0, 1.0
    train_data = batchify(corpus(seed, 8000, ntokens), batch_size)
    val_data = batchify(corpus(seed + 100, 1500, ntokens), eval_batch_size)
    model = RNNModel(ntokens, 32, 64, 2, dropout=0.4, dropouth=0.25, dropouti=0.4,
                     dropoute=0.1)
    criterion = nn.CrossEntropyLoss()
    params = list(model.parameters())
    optimizer = torch.optim.SGD(params, lr=lr, weight_decay=wdecay)
    config = {"lr": lr, "clip": clip, "wdecay": wdecay, "bptt": bptt, "batch_size": batch_size,
              "alpha": alpha, "beta": beta}

    def evaluate(data_source):
        model.eval()
        total_loss = 0.0
        hidden = model.init_hidden(eval_batch_size)
        with torch.no_grad():
            for i in range(0, data_source.size(0) - 1, bptt):
                data, targets = get_batch(data_source, i, bptt)
                output, hidden = model(data, hidden)
                logits = model.decoder(output)
                total_loss += len(data) * criterion(logits, targets).item()
                hidden = repackage_hidden(hidden)
        return total_loss / len(data_source), data, targets, logits

    with tracelab.Recorder(run_dir, model=model, optimizer=optimizer, loss_fn=criterion,
                           config=config) as rec:
        for _ in range(epochs):
            hidden = model.init_hidden(batch_size)
            i = 0
            while i < train_data.size(0) - 1 - 1:
                seq_bptt = bptt if np.random.random() < 0.95 else bptt / 2.0
                seq_len = max(5, int(np.random.normal(seq_bptt, 5)))
                lr2 = optimizer.param_groups[0]["lr"]
                optimizer.param_groups[0]["lr"] = lr2 * seq_len / bptt
                model.train()
                data, targets = get_batch(train_data, i, bptt, seq_len=seq_len)
                hidden = repackage_hidden(hidden)
                optimizer.zero_grad()
                output, hidden, rnn_hs, dropped_rnn_hs = model(data, hidden, return_h=True)
                logits = model.decoder(output)
                raw_loss = criterion(logits, targets)
                loss = raw_loss
                loss = loss + sum(alpha * h.pow(2).mean() for h in dropped_rnn_hs[-1:])
                loss = loss + sum(beta * (h[1:] - h[:-1]).pow(2).mean() for h in rnn_hs[-1:])
                loss.backward()
                if bug != "clip-after-step":
                    torch.nn.utils.clip_grad_norm_(params, clip)
                optimizer.step()
                if bug == "clip-after-step":
                    torch.nn.utils.clip_grad_norm_(params, clip)
                rec.step(loss=raw_loss, inputs=data, targets=targets, outputs=logits,
                         metrics={"total_loss": loss})
                optimizer.param_groups[0]["lr"] = lr2
                i += seq_len
            val_loss, data, targets, logits = evaluate(val_data)
            rec.log("val", metrics={"loss": val_loss}, inputs=data, targets=targets,
                    outputs=logits)
