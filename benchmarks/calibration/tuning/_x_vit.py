"""lucidrains/vit-pytorch SimpleViT, shrunk: its patch embedding (LayerNorm, Linear, LayerNorm),
2-D sin-cos position embedding, pre-norm attention and GELU feed-forward blocks, mean pooling
and LayerNorm + Linear head, trained as the README shows (cross-entropy on the logits, Adam).
einops' Rearrange is written out with reshape/permute. Images: scikit-learn's 8x8 digits,
patch size 2 (16 patches), dim 32, depth 2, 4 heads of 8, mlp_dim 64, channels 1.

`bug` (None: as published):
- "softmax-ce": forward ends in a softmax and its output goes to cross_entropy;
- "no-zero-grad": optimizer.zero_grad() left out of the batch loop.
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

import tracelab
from _x_data import batches, digits

SOURCE = ("https://github.com/lucidrains/vit-pytorch/blob/"
          "2a2ba50f075fc58df96ab8aed9624ccdddf2558f/vit_pytorch/simple_vit.py")
BUGS = (None, "softmax-ce", "no-zero-grad")


def posemb_sincos_2d(h, w, dim, temperature: int = 10000):
    y, x = torch.meshgrid(torch.arange(h), torch.arange(w), indexing="ij")
    omega = torch.arange(dim // 4) / (dim // 4 - 1)
    omega = 1.0 / (temperature ** omega)
    y = y.flatten()[:, None] * omega[None, :]
    x = x.flatten()[:, None] * omega[None, :]
    return torch.cat((x.sin(), x.cos(), y.sin(), y.cos()), dim=1).float()


class FeedForward(nn.Module):
    def __init__(self, dim, hidden_dim):
        super().__init__()
        self.net = nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, hidden_dim), nn.GELU(),
                                 nn.Linear(hidden_dim, dim))

    def forward(self, x):
        return self.net(x)


class Attention(nn.Module):
    def __init__(self, dim, heads=8, dim_head=64):
        super().__init__()
        inner = dim_head * heads
        self.heads, self.scale = heads, dim_head ** -0.5
        self.norm = nn.LayerNorm(dim)
        self.attend = nn.Softmax(dim=-1)
        self.to_qkv = nn.Linear(dim, inner * 3, bias=False)
        self.to_out = nn.Linear(inner, dim, bias=False)

    def forward(self, x):
        x = self.norm(x)
        b, n, _ = x.shape
        q, k, v = (t.reshape(b, n, self.heads, -1).transpose(1, 2)
                   for t in self.to_qkv(x).chunk(3, dim=-1))
        attn = self.attend(torch.matmul(q, k.transpose(-1, -2)) * self.scale)
        out = torch.matmul(attn, v).transpose(1, 2).reshape(b, n, -1)
        return self.to_out(out)


class SimpleViT(nn.Module):
    def __init__(self, *, image_size, patch_size, num_classes, dim, depth, heads, mlp_dim,
                 channels=1, dim_head=8, softmax_out=False):
        super().__init__()
        self.p = patch_size
        patch_dim = channels * patch_size * patch_size
        self.to_patch_embedding = nn.Sequential(nn.LayerNorm(patch_dim),
                                                nn.Linear(patch_dim, dim), nn.LayerNorm(dim))
        g = image_size // patch_size
        self.register_buffer("pos_embedding", posemb_sincos_2d(g, g, dim), persistent=False)
        self.layers = nn.ModuleList([nn.ModuleList([Attention(dim, heads, dim_head),
                                                    FeedForward(dim, mlp_dim)])
                                     for _ in range(depth)])
        self.linear_head = nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, num_classes))
        self.softmax_out = softmax_out

    def forward(self, img):
        b, c, h, w = img.shape
        p = self.p
        # Rearrange("b c (h p1) (w p2) -> b (h w) (p1 p2 c)")
        x = img.reshape(b, c, h // p, p, w // p, p).permute(0, 2, 4, 3, 5, 1)
        x = self.to_patch_embedding(x.reshape(b, (h // p) * (w // p), p * p * c))
        x = x + self.pos_embedding
        for attn, ff in self.layers:
            x = attn(x) + x
            x = ff(x) + x
        out = self.linear_head(x.mean(dim=1))
        return out.softmax(dim=-1) if self.softmax_out else out


def run(run_dir: str, seed: int = 0, bug: str | None = None, epochs: int = 12) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    x_train, y_train, x_val, y_val = digits(seed)
    model = SimpleViT(image_size=8, patch_size=2, num_classes=10, dim=32, depth=2, heads=4,
                      mlp_dim=64, softmax_out=bug == "softmax-ce")
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    with tracelab.Recorder(run_dir, model=model, optimizer=optimizer, loss_fn=loss_fn,
                           config={"lr": 1e-3, "batch_size": 64, "dim": 32}) as rec:
        for _ in range(epochs):
            model.train()
            for idx in batches(len(x_train), 64, gen):
                data, target = x_train[idx], y_train[idx]
                if bug != "no-zero-grad":
                    optimizer.zero_grad()
                preds = model(data)
                loss = loss_fn(preds, target)
                loss.backward()
                optimizer.step()
                rec.step(loss=loss, inputs=data, targets=target, outputs=preds)
            model.eval()
            with torch.no_grad():
                preds = model(x_val)
                val_loss = loss_fn(preds, y_val).item()
                acc = (preds.argmax(1) == y_val).float().mean().item()
            rec.log("val", metrics={"loss": val_loss, "acc": acc}, inputs=x_val, targets=y_val,
                    outputs=preds)
