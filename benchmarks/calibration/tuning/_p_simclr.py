"""phlippe/uvadlc_notebooks tutorial17 SimCLR.ipynb, shrunk: the SimCLR module (a ResNet-18
whose fc becomes Linear(512, 4 * hidden_dim), ReLU, Linear(4 * hidden_dim, hidden_dim)),
info_nce_loss as published (cosine similarities of the two views' features, self-mask filled
with -9e15, positives the rolled self-mask, temperature 0.07, mean NLL, top-1 / top-5 / mean
position of the positive), AdamW(lr=5e-4, weight_decay=1e-4) with CosineAnnealingLR(T_max =
max_epochs, eta_min = lr / 50) stepped once an epoch as Lightning does, the Trainer's loop
written out (model.train() for training steps, model.eval() and no_grad for validation).
Sizes: the ResNet-18 (torchvision's layout: 7x7 stem, max-pool, four stages of two BasicBlocks)
at a quarter width (16 ... 128 channels, fc from 128), hidden_dim 32, batch 64, 6 epochs; the data is
scikit-learn's 8x8 digits upsampled to 16x16 with the notebook's view augmentations reduced to
what fits grey digits (random resized crop, random brightness / contrast, Gaussian noise),
Normalize((0.5,), (0.5,)); the validation views come from 300 held-out digits.

`bug` (None: the notebook as published):
- "no-optimizer-step": the written-out loop calls loss.backward() and the scheduler but never
  optimizer.step().
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim

import tracelab
from _p_data import digits

SOURCE = ("https://github.com/phlippe/uvadlc_notebooks/blob/"
          "0da8037c7abc32f478ff6142acceb72dbcf088ee/docs/tutorial_notebooks/tutorial17/"
          "SimCLR.ipynb")
BUGS = (None, "no-optimizer-step")


class BasicBlock(nn.Module):
    def __init__(self, inplanes, planes, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = None
        if stride != 1 or inplanes != planes:
            self.downsample = nn.Sequential(nn.Conv2d(inplanes, planes, 1, stride, bias=False),
                                            nn.BatchNorm2d(planes))

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + identity)


class ResNet18(nn.Module):
    def __init__(self, num_classes, in_ch=1, w=16):
        super().__init__()
        self.conv1 = nn.Conv2d(in_ch, w, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(w)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        self.layer1 = nn.Sequential(BasicBlock(w, w), BasicBlock(w, w))
        self.layer2 = nn.Sequential(BasicBlock(w, 2 * w, 2), BasicBlock(2 * w, 2 * w))
        self.layer3 = nn.Sequential(BasicBlock(2 * w, 4 * w, 2), BasicBlock(4 * w, 4 * w))
        self.layer4 = nn.Sequential(BasicBlock(4 * w, 8 * w, 2), BasicBlock(8 * w, 8 * w))
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(8 * w, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


class SimCLR(nn.Module):
    def __init__(self, hidden_dim, temperature):
        super().__init__()
        self.temperature = temperature
        self.convnet = ResNet18(num_classes=4 * hidden_dim)
        self.convnet.fc = nn.Sequential(self.convnet.fc, nn.ReLU(inplace=True),
                                        nn.Linear(4 * hidden_dim, hidden_dim))

    def info_nce_loss(self, imgs):
        imgs = torch.cat(imgs, dim=0)
        feats = self.convnet(imgs)
        cos_sim = F.cosine_similarity(feats[:, None, :], feats[None, :, :], dim=-1)
        self_mask = torch.eye(cos_sim.shape[0], dtype=torch.bool)
        cos_sim.masked_fill_(self_mask, -9e15)
        pos_mask = self_mask.roll(shifts=cos_sim.shape[0] // 2, dims=0)
        cos_sim = cos_sim / self.temperature
        nll = -cos_sim[pos_mask] + torch.logsumexp(cos_sim, dim=-1)
        nll = nll.mean()
        comb_sim = torch.cat([cos_sim[pos_mask][:, None], cos_sim.masked_fill(pos_mask, -9e15)],
                             dim=-1)
        sim_argsort = comb_sim.argsort(dim=-1, descending=True).argmin(dim=-1)
        metrics = {"acc_top1": (sim_argsort == 0).float().mean().item(),
                   "acc_top5": (sim_argsort < 5).float().mean().item(),
                   "acc_mean_pos": 1 + sim_argsort.float().mean().item()}
        return nll, feats, metrics


def _augment(x, g):
    """One random view of a batch (N, 1, 16, 16) in 0-1: resized crop, brightness / contrast,
    noise; then Normalize((0.5,), (0.5,))."""
    n = len(x)
    scale = 0.7 + 0.3 * torch.rand(n, generator=g)
    shift = (torch.rand(n, 2, generator=g) - 0.5) * 2 * (1 - scale[:, None])
    theta = torch.zeros(n, 2, 3)
    theta[:, 0, 0], theta[:, 1, 1], theta[:, :, 2] = scale, scale, shift
    grid = F.affine_grid(theta, list(x.shape), align_corners=False)
    v = F.grid_sample(x, grid, align_corners=False)
    v = v * (0.5 + torch.rand(n, 1, 1, 1, generator=g)) + 0.3 * (torch.rand(n, 1, 1, 1, generator=g) - 0.5)
    v = v + 0.05 * torch.randn(v.shape, generator=g)
    return (v.clamp(0, 1) - 0.5) / 0.5


def run(run_dir: str, seed: int = 0, bug: str | None = None, max_epochs: int = 6) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    x_tr, _, x_va, _ = digits(seed)
    up = lambda x: F.interpolate(x.float() / 255.0, size=(16, 16), mode="bilinear",
                                 align_corners=False)
    x_tr, x_va = up(x_tr), up(x_va)
    lr, temperature, weight_decay, hidden_dim, batch_size = 5e-4, 0.07, 1e-4, 32, 64
    model = SimCLR(hidden_dim, temperature)
    optimizer = optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    lr_scheduler = optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=max_epochs,
                                                        eta_min=lr / 50)
    g = torch.Generator().manual_seed(seed)
    with tracelab.Recorder(run_dir, model=model, optimizer=optimizer, scheduler=lr_scheduler,
                           config={"lr": lr, "temperature": temperature, "hidden_dim": hidden_dim,
                                   "weight_decay": weight_decay, "batch_size": batch_size,
                                   "max_epochs": max_epochs}) as rec:
        for epoch in range(max_epochs):
            model.train()
            for idx in torch.randperm(len(x_tr), generator=g).split(batch_size):
                if len(idx) < batch_size:
                    continue  # drop_last=True
                views = [_augment(x_tr[idx], g), _augment(x_tr[idx], g)]
                loss, feats, metrics = model.info_nce_loss(views)
                optimizer.zero_grad()
                loss.backward()
                if bug != "no-optimizer-step":
                    optimizer.step()
                rec.step(loss=loss, inputs=views[0], outputs=feats, metrics=metrics)
            lr_scheduler.step()
            model.eval()
            with torch.no_grad():
                gv = torch.Generator().manual_seed(1000 + seed)
                views = [_augment(x_va[:256], gv), _augment(x_va[:256], gv)]
                vloss, feats, vmetrics = model.info_nce_loss(views)
            rec.log("val", metrics={"loss": vloss.item(), **vmetrics}, inputs=views[0])
    print(f"    simclr bug={bug}: val loss {vloss.item():.3f} top1 {vmetrics['acc_top1']:.3f}")
