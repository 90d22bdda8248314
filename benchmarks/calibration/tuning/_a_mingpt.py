"""karpathy/minGPT, shrunk: mingpt/model.py's GPT (causal self-attention with its tril mask
buffer, NewGELU MLP blocks, weight tying left out as in the source, its init) and
configure_optimizers (AdamW, weight decay on Linear weights only, two param groups), and
mingpt/trainer.py's loop (model.zero_grad, backward, clip_grad_norm_ at 1.0, step), trained on
demo.ipynb's SortDataset (sort 6 digits of 3 values; the input half of each target ignored with
-1) as 'gpt-nano' (3 layers, 3 heads, 48 wide) at lr 5e-4 for 200 iterations instead of 2000.
The test split holds the sequences whose base-3 number is a multiple of 4 (the demo splits by
a hash of the sequence).

`bug` plants one fault (None: the code as published):
- "no-causal-mask": the attention's masked_fill(bias == 0, -inf) left out, so every position
  attends to the tokens after it, the very tokens it must predict;
- "clip-after-step": clip_grad_norm_ called after optimizer.step(), clipping grads that were
  already used;
- "embedding-not-grouped": configure_optimizers without its blacklist of Embedding weights
  and without the assert that every parameter is in a group: wte and wpe are in no group;
- "adam-l2": torch.optim.Adam given the groups (weight_decay 0.1 meant for AdamW), so the
  decay enters the gradient and is rescaled by Adam;
- "warmup-cosine": healthy, with a linear warm-up over 20 iterations and a cosine decay to 10 %
  (the learning-rate decay of minGPT's earlier trainer), stepped once per iteration.
"""
from __future__ import annotations

import math

import torch
import torch.nn as nn
from torch.nn import functional as F

import tracelab

SOURCE = ("https://github.com/karpathy/minGPT/blob/37baab71b9abea1b76ab957409a1cc2fbfba8a26/"
          "mingpt/model.py (and mingpt/trainer.py, demo.ipynb)")
BUGS = (None, "no-causal-mask", "clip-after-step", "embedding-not-grouped", "adam-l2",
        "warmup-cosine")
LENGTH, DIGITS = 6, 3
BLOCK = LENGTH * 2 - 1
N_LAYER, N_HEAD, N_EMBD = 3, 3, 48


class NewGELU(nn.Module):
    def forward(self, x):
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi)
                                           * (x + 0.044715 * torch.pow(x, 3.0))))


class CausalSelfAttention(nn.Module):
    def __init__(self, causal: bool = True):
        super().__init__()
        self.c_attn = nn.Linear(N_EMBD, 3 * N_EMBD)
        self.c_proj = nn.Linear(N_EMBD, N_EMBD)
        self.attn_dropout = nn.Dropout(0.1)
        self.resid_dropout = nn.Dropout(0.1)
        self.register_buffer("bias", torch.tril(torch.ones(BLOCK, BLOCK)).view(1, 1, BLOCK, BLOCK))
        self.causal = causal

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(N_EMBD, dim=2)
        k = k.view(B, T, N_HEAD, C // N_HEAD).transpose(1, 2)
        q = q.view(B, T, N_HEAD, C // N_HEAD).transpose(1, 2)
        v = v.view(B, T, N_HEAD, C // N_HEAD).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        if self.causal:
            att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = self.attn_dropout(F.softmax(att, dim=-1))
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))


class Block(nn.Module):
    def __init__(self, causal: bool = True):
        super().__init__()
        self.ln_1 = nn.LayerNorm(N_EMBD)
        self.attn = CausalSelfAttention(causal)
        self.ln_2 = nn.LayerNorm(N_EMBD)
        self.mlp = nn.ModuleDict(dict(c_fc=nn.Linear(N_EMBD, 4 * N_EMBD),
                                      c_proj=nn.Linear(4 * N_EMBD, N_EMBD),
                                      act=NewGELU(), dropout=nn.Dropout(0.1)))

    def forward(self, x):
        m = self.mlp
        x = x + self.attn(self.ln_1(x))
        return x + m.dropout(m.c_proj(m.act(m.c_fc(self.ln_2(x)))))


class GPT(nn.Module):
    def __init__(self, causal: bool = True):
        super().__init__()
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(DIGITS, N_EMBD), wpe=nn.Embedding(BLOCK, N_EMBD),
            drop=nn.Dropout(0.1), h=nn.ModuleList([Block(causal) for _ in range(N_LAYER)]),
            ln_f=nn.LayerNorm(N_EMBD)))
        self.lm_head = nn.Linear(N_EMBD, DIGITS, bias=False)
        self.apply(self._init_weights)
        for pn, p in self.named_parameters():
            if pn.endswith("c_proj.weight"):
                torch.nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * N_LAYER))

    def _init_weights(self, module):
        if isinstance(module, nn.Linear):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                torch.nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
        elif isinstance(module, nn.LayerNorm):
            torch.nn.init.zeros_(module.bias)
            torch.nn.init.ones_(module.weight)

    def configure_optimizers(self, lr, weight_decay, bug=None):
        decay, no_decay = set(), set()
        whitelist = (torch.nn.Linear,)
        blacklist = (torch.nn.LayerNorm,) if bug == "embedding-not-grouped" else \
            (torch.nn.LayerNorm, torch.nn.Embedding)
        for mn, m in self.named_modules():
            for pn, p in m.named_parameters():
                fpn = "%s.%s" % (mn, pn) if mn else pn
                if pn.endswith("bias"):
                    no_decay.add(fpn)
                elif pn.endswith("weight") and isinstance(m, whitelist):
                    decay.add(fpn)
                elif pn.endswith("weight") and isinstance(m, blacklist):
                    no_decay.add(fpn)
        param_dict = {pn: p for pn, p in self.named_parameters()}
        if bug != "embedding-not-grouped":
            assert not param_dict.keys() - (decay | no_decay)
        groups = [
            {"params": [param_dict[pn] for pn in sorted(decay)], "weight_decay": weight_decay},
            {"params": [param_dict[pn] for pn in sorted(no_decay)], "weight_decay": 0.0},
        ]
        kind = torch.optim.Adam if bug == "adam-l2" else torch.optim.AdamW
        return kind(groups, lr=lr, betas=(0.9, 0.95))

    def forward(self, idx, targets=None):
        b, t = idx.size()
        pos = torch.arange(0, t, dtype=torch.long).unsqueeze(0)
        x = self.transformer.drop(self.transformer.wte(idx) + self.transformer.wpe(pos))
        for block in self.transformer.h:
            x = block(x)
        logits = self.lm_head(self.transformer.ln_f(x))
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1),
                                   ignore_index=-1)
        return logits, loss


def sort_batch(split: str, n: int, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """n examples of demo.ipynb's SortDataset from `split`, as (x, y) of shape (n, 11): its
    rejection sampling drawn for many candidates at once."""
    weights = DIGITS ** torch.arange(LENGTH - 1, -1, -1)
    kept = []
    while sum(len(k) for k in kept) < n:
        inp = torch.randint(DIGITS, size=(8 * n, LENGTH), generator=gen)
        boost = torch.rand(8 * n, generator=gen) < 0.5  # the demo favours many repeats
        n_unique = torch.stack([(inp == d).any(dim=1) for d in range(DIGITS)]).sum(dim=0)
        in_test = (inp * weights).sum(dim=1) % 4 == 0
        keep = ~(boost & (n_unique > LENGTH // 2)) & (in_test == (split == "test"))
        kept.append(inp[keep])
    inp = torch.cat(kept)[:n]
    cat = torch.cat((inp, torch.sort(inp, dim=1)[0]), dim=1)
    x, y = cat[:, :-1].clone(), cat[:, 1:].clone()
    y[:, :LENGTH - 1] = -1
    return x, y


def run(run_dir: str, seed: int = 0, bug: str | None = None, iters: int = 200) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    model = GPT(causal=bug != "no-causal-mask")
    lr = 5e-4
    optimizer = model.configure_optimizers(lr, 0.1, bug)
    scheduler = None
    if bug == "warmup-cosine":
        def lr_mult(it):
            if it < 20:
                return (it + 1) / 20
            progress = (it - 20) / max(1, iters - 20)
            return max(0.1, 0.5 * (1.0 + math.cos(math.pi * progress)))
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_mult)
    x_val, y_val = sort_batch("test", 500, gen)
    with tracelab.Recorder(run_dir, model=model, optimizer=optimizer, scheduler=scheduler,
                           loss_fn=nn.CrossEntropyLoss(ignore_index=-1),
                           config={"model_type": "gpt-nano", "lr": lr, "batch_size": 64,
                                   "weight_decay": 0.1, "grad_norm_clip": 1.0}) as rec:
        model.train()
        for it in range(iters):
            x, y = sort_batch("train", 64, gen)
            logits, loss = model(x, y)
            model.zero_grad(set_to_none=True)
            loss.backward()
            if bug != "clip-after-step":
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            if bug == "clip-after-step":
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            if scheduler is not None:
                scheduler.step()
            rec.step(loss=loss, inputs=x, targets=y,
                     outputs=logits.view(-1, logits.size(-1)))
            if it % 50 == 49 or it == iters - 1:
                model.eval()
                with torch.no_grad():
                    logits, val_loss = model(x_val, y_val)
                    pred = logits.argmax(-1)[:, LENGTH - 1:]
                    acc = (pred == y_val[:, LENGTH - 1:]).all(dim=1).float().mean()
                rec.log("val", metrics={"loss": val_loss, "acc": acc}, inputs=x_val,
                        targets=y_val, outputs=logits.view(-1, logits.size(-1)))
                model.train()
