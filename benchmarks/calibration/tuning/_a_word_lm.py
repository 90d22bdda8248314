"""pytorch/examples word_language_model (main.py, model.py), shrunk: RNNModel('LSTM') (Embedding
encoder, 2-layer LSTM with dropout, Linear decoder, log_softmax), nn.NLLLoss, batchify into
20 columns, bptt 35, repackage_hidden between batches, model.zero_grad(), clip_grad_norm_ at
0.25 and the hand-written update p.data.add_(p.grad, alpha=-lr) with lr 20 (skipping a
parameter without a grad), divided by 4 after an epoch whose validation loss did not improve.
The corpus is synthetic: 30,000 words of a first-order Markov chain over 50 words (each word
followed by one of four), emsize 32 and nhid 64 instead of 200, 8 epochs of 42 batches.

`bug` plants one fault (None: the script as published):
- "no-clip": clip_grad_norm_ left out (lr 20 stays);
- "frozen-embedding": the encoder made with nn.Embedding.from_pretrained(weights), whose
  freeze=True default leaves it out of training;
- "adamw-lr20": --use-optimizer, i.e. torch.optim.AdamW(model.parameters(), lr=args.lr) with
  the script's default lr of 20 meant for its plain SGD update.
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

import tracelab

SOURCE = ("https://github.com/pytorch/examples/blob/77f55b912142e11fcfdf5b530231fb9c52f181e8/"
          "word_language_model/main.py (and model.py)")
BUGS = (None, "no-clip", "frozen-embedding", "adamw-lr20")
NTOKENS, BPTT, BATCH, EVAL_BATCH = 50, 35, 20, 10


class RNNModel(nn.Module):
    def __init__(self, ntoken, ninp, nhid, nlayers, dropout=0.2, frozen_encoder=False):
        super().__init__()
        self.ntoken = ntoken
        self.drop = nn.Dropout(dropout)
        if frozen_encoder:
            weights = torch.empty(ntoken, ninp).uniform_(-0.1, 0.1)
            self.encoder = nn.Embedding.from_pretrained(weights)
        else:
            self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = nn.LSTM(ninp, nhid, nlayers, dropout=dropout)
        self.decoder = nn.Linear(nhid, ntoken)
        self.init_weights(frozen_encoder)
        self.nhid, self.nlayers = nhid, nlayers

    def init_weights(self, frozen_encoder):
        initrange = 0.1
        if not frozen_encoder:
            nn.init.uniform_(self.encoder.weight, -initrange, initrange)
        nn.init.zeros_(self.decoder.bias)
        nn.init.uniform_(self.decoder.weight, -initrange, initrange)

    def forward(self, input, hidden):
        emb = self.drop(self.encoder(input))
        output, hidden = self.rnn(emb, hidden)
        decoded = self.decoder(self.drop(output)).view(-1, self.ntoken)
        return F.log_softmax(decoded, dim=1), hidden

    def init_hidden(self, bsz):
        weight = next(self.parameters())
        return (weight.new_zeros(self.nlayers, bsz, self.nhid),
                weight.new_zeros(self.nlayers, bsz, self.nhid))


def corpus(seed: int, n: int) -> torch.Tensor:
    """n word ids of a Markov chain in which each word is followed by one of four."""
    gen = torch.Generator().manual_seed(seed)
    successors = torch.randint(NTOKENS, (NTOKENS, 4), generator=gen)
    choice = torch.randint(4, (n,), generator=gen)
    ids = torch.empty(n, dtype=torch.long)
    ids[0] = 0
    for i in range(1, n):
        ids[i] = successors[ids[i - 1], choice[i]]
    return ids


def batchify(data, bsz):
    nbatch = data.size(0) // bsz
    return data.narrow(0, 0, nbatch * bsz).view(bsz, -1).t().contiguous()


def get_batch(source, i):
    seq_len = min(BPTT, len(source) - 1 - i)
    return source[i:i + seq_len], source[i + 1:i + 1 + seq_len].view(-1)


def repackage_hidden(h):
    if isinstance(h, torch.Tensor):
        return h.detach()
    return tuple(repackage_hidden(v) for v in h)


def run(run_dir: str, seed: int = 0, bug: str | None = None, epochs: int = 8) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    ids = corpus(seed, 33_000)
    train_data = batchify(ids[:30_000], BATCH)
    val_data = batchify(ids[30_000:], EVAL_BATCH)
    model = RNNModel(NTOKENS, 32, 64, 2, frozen_encoder=bug == "frozen-embedding")
    criterion = nn.NLLLoss()
    lr = 20.0
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr) if bug == "adamw-lr20" else None
    with tracelab.Recorder(run_dir, model=model, optimizer=optimizer, loss_fn=criterion,
                           config={"lr": lr, "clip": 0.25, "bptt": BPTT, "batch_size": BATCH}
                           ) as rec:
        best_val_loss = None
        for _ in range(epochs):
            model.train()
            hidden = model.init_hidden(BATCH)
            for i in range(0, train_data.size(0) - 1, BPTT):
                data, targets = get_batch(train_data, i)
                if optimizer is not None:
                    optimizer.zero_grad()
                else:
                    model.zero_grad()
                hidden = repackage_hidden(hidden)
                output, hidden = model(data, hidden)
                loss = criterion(output, targets)
                loss.backward()
                if bug != "no-clip":
                    torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
                if optimizer is not None:
                    optimizer.step()
                else:
                    for p in model.parameters():
                        if p.grad is not None:
                            p.data.add_(p.grad, alpha=-lr)
                rec.step(loss=loss, inputs=data, targets=targets, outputs=output,
                         metrics={"lr": lr})
            model.eval()
            total_loss, hidden = 0.0, model.init_hidden(EVAL_BATCH)
            with torch.no_grad():
                for i in range(0, val_data.size(0) - 1, BPTT):
                    data, targets = get_batch(val_data, i)
                    output, hidden = model(data, hidden)
                    hidden = repackage_hidden(hidden)
                    total_loss += len(data) * criterion(output, targets).item()
            val_loss = total_loss / (len(val_data) - 1)
            rec.log("val", metrics={"loss": val_loss}, inputs=data, targets=targets,
                    outputs=output)
            if not best_val_loss or val_loss < best_val_loss:
                best_val_loss = val_loss
            else:
                lr /= 4.0
