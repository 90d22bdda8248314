"""princeton-nlp/SimCSE unsupervised training (simcse/models.py cl_forward, train.py with the
HuggingFace Trainer, run_unsup_example.sh), shrunk: each sentence is encoded twice by a
BERT-style encoder in train mode so that dropout makes the two views, pooler "cls" with the
MLPLayer (dense + tanh) on top, Similarity = cosine / temp with temp 0.05, and
nn.CrossEntropyLoss over the in-batch similarity matrix with labels arange(batch); AdamW with
the Trainer's linear decay to zero (no warm-up), batch 64 -> 32. The encoder is a 2-layer, 32-wide
nn.TransformerEncoder (dropout 0.1) with learned position embeddings in place of
bert-base-uncased, lr 3e-5 -> 1e-3; the sentences are synthetic: 8 topics, each a distribution
over its own 12 of 100 tokens, length 12, a leading [CLS]. Every 15 steps the model is evaluated
in eval mode (as the Trainer's evaluate() does) on held-out pairs of different sentences of one
topic: the contrastive loss of those pairs and the top-1 retrieval accuracy.

`bug` plants one fault (None: the script as published):
- "stays-eval": the evaluation sets model.eval() and the loop never sets model.train() again,
  so after the first evaluation both views are the same and dropout no longer makes positives;
- "short-schedule": the linear schedule sized for an eighth of the real number of steps (the
  step count of one of eight processes), so the learning rate reaches zero after the first
  eighth of training.
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn as nn

import tracelab

SOURCE = ("https://github.com/princeton-nlp/SimCSE/blob/206d7aef05aeadc8e6d354dfc8656c9e9521cc64/"
          "simcse/models.py")
BUGS = (None, "stays-eval", "short-schedule")
VOCAB, CLS, LENGTH, TOPICS = 101, 100, 12, 8


class MLPLayer(nn.Module):
    def __init__(self, hidden_size):
        super().__init__()
        self.dense = nn.Linear(hidden_size, hidden_size)
        self.activation = nn.Tanh()

    def forward(self, features):
        return self.activation(self.dense(features))


class Similarity(nn.Module):
    def __init__(self, temp):
        super().__init__()
        self.temp = temp
        self.cos = nn.CosineSimilarity(dim=-1)

    def forward(self, x, y):
        return self.cos(x, y) / self.temp


class BertForCL(nn.Module):
    def __init__(self, hidden=32, layers=2, temp=0.05):
        super().__init__()
        self.embeddings = nn.Embedding(VOCAB, hidden)
        self.position = nn.Embedding(LENGTH + 1, hidden)
        self.emb_dropout = nn.Dropout(0.1)
        layer = nn.TransformerEncoderLayer(hidden, 4, 4 * hidden, dropout=0.1, batch_first=True,
                                           activation="gelu")
        self.bert = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.mlp = MLPLayer(hidden)
        self.sim = Similarity(temp)

    def encode(self, input_ids):
        pos = torch.arange(input_ids.size(1))
        h = self.emb_dropout(self.embeddings(input_ids) + self.position(pos))
        return self.bert(h)[:, 0]  # cls

    def forward(self, input_ids):
        """input_ids (bs, num_sent=2, len) -> (loss, cos_sim)."""
        batch_size, num_sent = input_ids.size(0), input_ids.size(1)
        pooler_output = self.encode(input_ids.view(-1, input_ids.size(-1)))
        pooler_output = pooler_output.view(batch_size, num_sent, -1)
        pooler_output = self.mlp(pooler_output)
        z1, z2 = pooler_output[:, 0], pooler_output[:, 1]
        cos_sim = self.sim(z1.unsqueeze(1), z2.unsqueeze(0))
        labels = torch.arange(cos_sim.size(0)).long()
        loss = nn.CrossEntropyLoss()(cos_sim, labels)
        return loss, cos_sim


def sentences(rng: np.random.Generator, topics: np.ndarray) -> torch.Tensor:
    words = np.random.default_rng(77).permutation(CLS)[:TOPICS * 12].reshape(TOPICS, 12)
    out = np.empty((len(topics), LENGTH + 1), dtype=np.int64)
    out[:, 0] = CLS
    for i, t in enumerate(topics):
        own = rng.choice(words[t], size=LENGTH)
        noise = rng.integers(0, CLS, size=LENGTH)
        out[i, 1:] = np.where(rng.random(LENGTH) < 0.7, own, noise)
    return torch.from_numpy(out)


def get_linear_schedule(optimizer, num_training_steps):
    return torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: max(0.0, float(num_training_steps - step) / float(max(1, num_training_steps))))


def run(run_dir: str, seed: int = 0, bug: str | None = None, steps: int = 150) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    train = sentences(rng, rng.integers(0, TOPICS, size=steps * 32))
    val_topics = rng.permutation(np.repeat(np.arange(TOPICS), 16))
    val_pairs = torch.stack([sentences(rng, val_topics), sentences(rng, val_topics)], dim=1)
    model = BertForCL()
    lr = 1e-3
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    scheduler = get_linear_schedule(optimizer, steps // 8 if bug == "short-schedule" else steps)
    with tracelab.Recorder(run_dir, model=model, optimizer=optimizer, scheduler=scheduler,
                           loss_fn=nn.CrossEntropyLoss(),
                           config={"lr": lr, "temp": 0.05, "batch_size": 32, "pooler": "cls",
                                   "max_steps": steps}) as rec:
        model.train()
        for step in range(steps):
            batch = train[step * 32:(step + 1) * 32]
            input_ids = torch.stack([batch, batch], dim=1)  # the same sentence twice
            loss, cos_sim = model(input_ids)
            loss.backward()
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()
            rec.step(loss=loss, inputs=input_ids, targets=torch.arange(32), outputs=cos_sim)
            if (step + 1) % 15 == 0:
                model.eval()
                with torch.no_grad():
                    val_loss, sim = model(val_pairs)
                    same = torch.from_numpy(val_topics)
                    acc = (same[sim.argmax(1)] == same).float().mean().item()
                rec.log("val", metrics={"loss": val_loss.item(), "acc": acc},
                        inputs=val_pairs, targets=torch.arange(len(val_pairs)), outputs=sim)
                if bug != "stays-eval":
                    model.train()
