"""karpathy/makemore makemore.py, shrunk: its MLP (Bengio 2003: token embeddings of the previous
block_size characters, the <BLANK> token rolled in, concatenated, Linear-Tanh-Linear) and its Bigram
model (a logits lookup table), F.cross_entropy(ignore_index=-1) over the padded words, the
CharDataset encoding (x = <START> + word, y = word + <END>, -1 past the end), AdamW(lr=5e-4,
weight_decay=0.01, betas=(0.9, 0.99), eps=1e-8), batches of 32 drawn with replacement,
model.zero_grad(set_to_none=True), and evaluate() (model.eval(), test loss on at most 10 batches of
100, model.train()). names.txt is replaced by 2,000 synthetic names from a fixed random character
Markov chain (12 letters, 2 to 8 long, each name once as in names.txt); n_embd 16, n_embd2 64; 600 steps instead of unbounded,
evaluation every 100 steps instead of 500; lr 5e-3 (the short run; the default 5e-4 needs far more
steps than 600).

`bug` plants one fault (None: the MLP as published):
- "lr-low": learning rate 5e-8;
- "wd-high": AdamW weight_decay=200 instead of 0.01;
- "y-unpaired": each batch's targets Y drawn with indices of their own, so they belong to
  other words than the inputs X;
- "bigram": healthy, --type bigram.
"""
from __future__ import annotations

import torch
import torch.nn as nn
from torch.nn import functional as F

import tracelab

SOURCE = ("https://github.com/karpathy/makemore/blob/988aa59e4d8fefa526d06f3b453ad116258398d4/"
          "makemore.py")
BUGS = (None, "lr-low", "wd-high", "y-unpaired", "bigram")
CHARS = "abdeiklmnors"
MAX_LEN = 8


class MLP(nn.Module):
    def __init__(self, vocab_size, block_size, n_embd, n_embd2):
        super().__init__()
        self.block_size = block_size
        self.vocab_size = vocab_size
        self.wte = nn.Embedding(vocab_size + 1, n_embd)  # token embeddings table
        self.mlp = nn.Sequential(
            nn.Linear(self.block_size * n_embd, n_embd2),
            nn.Tanh(),
            nn.Linear(n_embd2, self.vocab_size)
        )

    def forward(self, idx, targets=None):
        embs = []
        for k in range(self.block_size):
            tok_emb = self.wte(idx)  # token embeddings of shape (b, t, n_embd)
            idx = torch.roll(idx, 1, 1)
            idx[:, 0] = self.vocab_size  # special <BLANK> token
            embs.append(tok_emb)
        x = torch.cat(embs, -1)  # (b, t, n_embd * block_size)
        logits = self.mlp(x)
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1),
                                   ignore_index=-1)
        return logits, loss


class Bigram(nn.Module):
    def __init__(self, vocab_size):
        super().__init__()
        self.logits = nn.Parameter(torch.zeros((vocab_size, vocab_size)))

    def forward(self, idx, targets=None):
        logits = self.logits[idx]
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1),
                                   ignore_index=-1)
        return logits, loss


def names(n: int, gen: torch.Generator) -> list[str]:
    """n distinct words (names.txt holds each name once) from a fixed random Markov chain over
    CHARS (the chain is the same for every seed; `gen` draws the words)."""
    chain_gen = torch.Generator().manual_seed(1234)
    v = len(CHARS)
    trans = torch.softmax(3.0 * torch.randn(v + 1, v, generator=chain_gen), dim=1)
    words, seen = [], set()
    while len(words) < n:
        length = int(torch.randint(2, MAX_LEN + 1, (1,), generator=gen))
        prev, w = v, ""
        for _ in range(length):
            prev = int(torch.multinomial(trans[prev], 1, generator=gen))
            w += CHARS[prev]
        if w not in seen:
            seen.add(w)
            words.append(w)
    return words


def encode(words: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
    """CharDataset.__getitem__ over all words: x, y of shape (n, MAX_LEN + 1)."""
    stoi = {ch: i + 1 for i, ch in enumerate(CHARS)}
    xs, ys = [], []
    for word in words:
        ix = torch.tensor([stoi[w] for w in word], dtype=torch.long)
        x = torch.zeros(MAX_LEN + 1, dtype=torch.long)
        y = torch.zeros(MAX_LEN + 1, dtype=torch.long)
        x[1:1 + len(ix)] = ix
        y[:len(ix)] = ix
        y[len(ix) + 1:] = -1  # index -1 will mask the loss at the inactive locations
        xs.append(x)
        ys.append(y)
    return torch.stack(xs), torch.stack(ys)


@torch.no_grad()
def evaluate(model, X, Y, gen, batch_size=100, max_batches=10):
    model.eval()
    losses, outs, xs, ys = [], [], [], []
    for i, idx in enumerate(torch.randperm(len(X), generator=gen).split(batch_size)):
        logits, loss = model(X[idx], Y[idx])
        losses.append(loss.item())
        outs.append(logits.view(-1, logits.size(-1)))
        xs.append(X[idx])
        ys.append(Y[idx])
        if max_batches is not None and i >= max_batches:
            break
    model.train()  # reset model back to training mode
    return (torch.tensor(losses).mean().item(), torch.cat(xs), torch.cat(ys), torch.cat(outs))


def run(run_dir: str, seed: int = 0, bug: str | None = None, max_steps: int = 600) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    words = names(2000, gen)
    test_set_size = min(1000, int(len(words) * 0.1))
    rp = torch.randperm(len(words), generator=gen).tolist()
    x_train, y_train = encode([words[i] for i in rp[:-test_set_size]])
    x_test, y_test = encode([words[i] for i in rp[-test_set_size:]])
    vocab_size, block_size = len(CHARS) + 1, MAX_LEN + 1
    model = Bigram(vocab_size) if bug == "bigram" else MLP(vocab_size, block_size, 16, 64)
    learning_rate = 5e-8 if bug == "lr-low" else 5e-3
    weight_decay = 200.0 if bug == "wd-high" else 0.01
    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate, weight_decay=weight_decay,
                                  betas=(0.9, 0.99), eps=1e-8)
    with tracelab.Recorder(run_dir, model=model, optimizer=optimizer,
                           loss_fn=nn.CrossEntropyLoss(ignore_index=-1),
                           config={"type": "bigram" if bug == "bigram" else "mlp",
                                   "batch_size": 32, "learning_rate": learning_rate,
                                   "weight_decay": weight_decay, "n_embd": 16,
                                   "n_embd2": 64}) as rec:
        model.train()
        for step in range(max_steps):
            idx = torch.randint(len(x_train), (32,), generator=gen)  # RandomSampler(replacement)
            X, Y = x_train[idx], y_train[idx]
            if bug == "y-unpaired":
                Y = y_train[torch.randint(len(x_train), (32,), generator=gen)]
            logits, loss = model(X, Y)
            model.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            rec.step(loss=loss, inputs=X, targets=Y, outputs=logits.view(-1, logits.size(-1)))
            if step > 0 and step % 100 == 0 or step == max_steps - 1:
                test_loss, xv, yv, out = evaluate(model, x_test, y_test, gen)
                rec.log("val", metrics={"loss": test_loss}, inputs=xv, targets=yv, outputs=out)
