"""karpathy/nanoGPT, model.py and train.py with config/train_shakespeare_char.py: a GPT of
pre-norm blocks with causal self-attention, AdamW (betas 0.9/0.99, weight decay 0.1 on the
matrices), linear warmup then cosine decay, clipping at 1.0, cross-entropy; characters of the
Zen of Python, 2 layers, 2 heads, 32 wide, a 32-character block."""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from _s_common import log, recorder, setup, step, text


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd: int, n_head: int, causal: bool):
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.n_head, self.causal = n_head, causal

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))


class Block(nn.Module):
    def __init__(self, n_embd: int, n_head: int, causal: bool):
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(n_embd), nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd, n_head, causal)
        self.mlp = nn.Sequential(nn.Linear(n_embd, 4 * n_embd), nn.GELU(), nn.Linear(4 * n_embd, n_embd))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, vocab: int, block: int, n_layer: int, n_embd: int, n_head: int, causal: bool):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, n_embd), nn.Embedding(block, n_embd)
        self.h = nn.ModuleList(Block(n_embd, n_head, causal) for _ in range(n_layer))
        self.ln_f = nn.LayerNorm(n_embd)
        self.lm_head = nn.Linear(n_embd, vocab, bias=False)
        self.wte.weight = self.lm_head.weight
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, mean=0.0, std=0.02)

    def forward(self, idx):
        x = self.wte(idx) + self.wpe(torch.arange(idx.size(1)))
        for blk in self.h:
            x = blk(x)
        return self.lm_head(self.ln_f(x))


def train(run_dir: str, seed: int, *, causal: bool = True, warmup_iters: int = 20,
          max_iters: int = 200, lr: float = 1e-3, micro_steps: int = 1,
          step_each_micro: bool = False) -> None:
    g = setup(seed)
    chars = sorted(set(text()))
    data = torch.tensor([chars.index(c) for c in text()])
    n = int(0.9 * len(data))
    train_data, val_data = data[:n], data[n:]
    block, batch, min_lr = 32, 16, lr / 10
    model = GPT(len(chars), block, 2, 32, 2, causal)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                                   {"params": no_decay, "weight_decay": 0.0}], lr=lr, betas=(0.9, 0.99))

    def get_batch(split):
        d = train_data if split == "train" else val_data
        ix = torch.randint(len(d) - block - 1, (batch,), generator=g)
        return torch.stack([d[i:i + block] for i in ix]), torch.stack([d[i + 1:i + 1 + block] for i in ix])

    def get_lr(it):
        if it < warmup_iters:
            return lr * (it + 1) / (warmup_iters + 1)
        ratio = (it - warmup_iters) / max(1, max_iters - warmup_iters)
        return min_lr + 0.5 * (1.0 + math.cos(math.pi * min(ratio, 1.0))) * (lr - min_lr)

    config = {"lr": lr, "min_lr": min_lr, "warmup_iters": warmup_iters, "max_iters": max_iters,
              "block_size": block, "batch_size": batch, "grad_clip": 1.0,
              "gradient_accumulation_steps": micro_steps}
    with recorder(run_dir, model, optimizer, config=config) as rec:
        for it in range(max_iters):
            for group in optimizer.param_groups:
                group["lr"] = get_lr(it)
            for _ in range(micro_steps):
                x, y = get_batch("train")
                logits = model(x)
                loss = F.cross_entropy(logits.view(-1, logits.size(-1)), y.view(-1)) / micro_steps
                loss.backward()
                rec.accumulate_loss(loss, scale=micro_steps)
                if step_each_micro:
                    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                    optimizer.step()
            if not step_each_micro:
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            step(rec, inputs=x, targets=y, outputs=logits)
            if (it + 1) % 50 == 0:
                model.eval()
                with torch.no_grad():
                    xv, yv = get_batch("val")
                    out = model(xv)
                    vloss = F.cross_entropy(out.view(-1, out.size(-1)), yv.view(-1))
                log(rec, "val", metrics={"loss": float(vloss)}, inputs=xv, targets=yv, outputs=out)
                model.train()
