"""pbloem/former experiments/classify.py (the commit with the LambdaLR warm-up), shrunk: its
CTransformer (token and position embeddings, TransformerBlocks of multi-head self-attention
with keys and queries scaled by e^(1/4), LayerNorm, a 4x feed-forward, no dropout; mean or max
pooling over time, log_softmax), F.nll_loss, SGD(momentum=0.9) or the Adam line left in the
script, LambdaLR(lambda i: min(i / (lr_warmup / batch_size), 1.0)) stepped after every
optimizer step, clip_grad_norm_(1.0), model.train(False) for the validation pass. The data is a
synthetic two-class "review" corpus of token ids (500 words, 40 tokens); embedding 32, 4 heads,
depth 2, batch 32, a warm-up of 640 instances and the learning rate set on the command line
(-l) to 0.2 for SGD and 1e-3 for Adam.

`bug` plants one fault (None: the script as published):
- "no-sch-step": sch.step() never called, so the LR stays at lambda(0) = 0;
- "clip-after-step": clip_grad_norm_ called after opt.step(), so it clips nothing used.
`adam=True` (healthy): the script's commented-out Adam line instead of SGD, with --max-pool.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

import tracelab
from _w_data import sentiment

SOURCE = ("https://github.com/pbloem/former/blob/03a8bf2d47d5fe32210e21949d8214b95ba95360/"
          "experiments/classify.py")
BUGS = (None, "no-sch-step", "clip-after-step")


class SelfAttention(nn.Module):
    def __init__(self, emb, heads=8):
        super().__init__()
        self.emb, self.heads = emb, heads
        self.tokeys = nn.Linear(emb, emb, bias=False)
        self.toqueries = nn.Linear(emb, emb, bias=False)
        self.tovalues = nn.Linear(emb, emb, bias=False)
        self.unifyheads = nn.Linear(emb, emb)

    def forward(self, x):
        b, t, e = x.size()
        h = self.heads
        s = e // h
        keys = self.tokeys(x).view(b, t, h, s).transpose(1, 2).contiguous().view(b * h, t, s)
        queries = self.toqueries(x).view(b, t, h, s).transpose(1, 2).contiguous().view(b * h, t, s)
        values = self.tovalues(x).view(b, t, h, s).transpose(1, 2).contiguous().view(b * h, t, s)
        queries = queries / (e ** (1 / 4))
        keys = keys / (e ** (1 / 4))
        dot = F.softmax(torch.bmm(queries, keys.transpose(1, 2)), dim=2)
        out = torch.bmm(dot, values).view(b, h, t, s)
        out = out.transpose(1, 2).contiguous().view(b, t, s * h)
        return self.unifyheads(out)


class TransformerBlock(nn.Module):
    def __init__(self, emb, heads, ff_hidden_mult=4, dropout=0.0):
        super().__init__()
        self.attention = SelfAttention(emb, heads=heads)
        self.norm1 = nn.LayerNorm(emb)
        self.norm2 = nn.LayerNorm(emb)
        self.ff = nn.Sequential(nn.Linear(emb, ff_hidden_mult * emb), nn.ReLU(),
                                nn.Linear(ff_hidden_mult * emb, emb))
        self.do = nn.Dropout(dropout)

    def forward(self, x):
        x = self.norm1(self.attention(x) + x)
        x = self.do(x)
        x = self.norm2(self.ff(x) + x)
        return self.do(x)


class CTransformer(nn.Module):
    def __init__(self, emb, heads, depth, seq_length, num_tokens, num_classes, max_pool=True,
                 dropout=0.0):
        super().__init__()
        self.num_tokens, self.max_pool = num_tokens, max_pool
        self.token_embedding = nn.Embedding(embedding_dim=emb, num_embeddings=num_tokens)
        self.pos_embedding = nn.Embedding(embedding_dim=emb, num_embeddings=seq_length)
        self.tblocks = nn.Sequential(*[TransformerBlock(emb, heads, dropout=dropout)
                                       for _ in range(depth)])
        self.toprobs = nn.Linear(emb, num_classes)
        self.do = nn.Dropout(dropout)

    def forward(self, x):
        tokens = self.token_embedding(x)
        b, t, e = tokens.size()
        positions = self.pos_embedding(torch.arange(t))[None, :, :].expand(b, t, e)
        x = self.do(tokens + positions)
        x = self.tblocks(x)
        x = x.max(dim=1)[0] if self.max_pool else x.mean(dim=1)
        return F.log_softmax(self.toprobs(x), dim=1)


def run(run_dir: str, seed: int = 0, bug: str | None = None, adam: bool = False,
        num_epochs: int = 6, batch_size: int = 32, lr_warmup: int = 640,
        gradient_clipping: float = 1.0) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    x_train, y_train, x_val, y_val = sentiment(seed)
    mx, vocab = x_train.size(1), 500
    model = CTransformer(emb=32, heads=4, depth=2, seq_length=mx, num_tokens=vocab,
                         num_classes=2, max_pool=adam)
    lr = 1e-3 if adam else 0.2
    if adam:
        opt = torch.optim.Adam(lr=lr, params=model.parameters())
    else:
        opt = torch.optim.SGD(lr=lr, params=model.parameters(), momentum=0.9)
    sch = torch.optim.lr_scheduler.LambdaLR(opt, lambda i: min(i / (lr_warmup / batch_size), 1.0))
    with tracelab.Recorder(run_dir, model=model, optimizer=opt, scheduler=sch,
                           loss_fn=nn.NLLLoss(),
                           config={"lr": lr, "batch_size": batch_size, "lr_warmup": lr_warmup,
                                   "gradient_clipping": gradient_clipping}) as rec:
        for _ in range(num_epochs):
            model.train(True)
            for idx in torch.randperm(len(x_train), generator=gen).split(batch_size):
                opt.zero_grad()
                input, label = x_train[idx], y_train[idx]
                out = model(input)
                loss = F.nll_loss(out, label)
                loss.backward()
                if gradient_clipping > 0.0 and bug != "clip-after-step":
                    nn.utils.clip_grad_norm_(model.parameters(), gradient_clipping)
                opt.step()
                if gradient_clipping > 0.0 and bug == "clip-after-step":
                    nn.utils.clip_grad_norm_(model.parameters(), gradient_clipping)
                if bug != "no-sch-step":
                    sch.step()
                rec.step(loss=loss, inputs=input, targets=label, outputs=out)
            with torch.no_grad():
                model.train(False)
                out = model(x_val)
                acc = (out.argmax(dim=1) == y_val).float().mean().item()
                rec.log("val", metrics={"loss": F.nll_loss(out, y_val).item(), "acc": acc},
                        inputs=x_val, targets=y_val, outputs=out)
