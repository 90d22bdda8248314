"""sthalles/SimCLR simclr.py (+ run.py, models/resnet_simclr.py, data_aug/), shrunk: the
info_nce_loss as published (two views of each image, L2-normalized features, the diagonal
masked out, the positive put in column 0 of the logits and every target 0, logits / temperature
0.07, CrossEntropyLoss), Adam(lr=3e-4, weight_decay=1e-4), CosineAnnealingLR(T_max=
len(train_loader)) stepped once per epoch only after the first 10 warm-up epochs, a DataLoader
with shuffle=True and drop_last=True, and ResNetSimCLR's projection head (the backbone's fc
replaced by Linear(dim_mlp, dim_mlp), ReLU, Linear(dim_mlp, out_dim)).

Shrunk: scikit-learn's 8x8 digits (one channel, 0-1) for STL10; a two-conv encoder with
BatchNorm and global average pooling (dim_mlp 64) for resnet18; out_dim 32 for 128; batch 128
for 256; 20 epochs; no fp16 (the CPU default). The view pipeline written with tensor ops
(torchvision is absent): RandomResizedCrop(8) with scale (0.3, 1) for the default (0.08, 1) --
an 8x8 crop of 8 % keeps no digit -- RandomHorizontalFlip, brightness/contrast jitter 0.8 applied
with p=0.8; the Gaussian blur is left out (its kernel int(0.1 * 8) = 0 is a no-op). Each epoch
ends with a check on the 297 held-out digits recorded as validation: the contrastive loss and
top-1 on two views of them, and the accuracy of a 1-nearest-neighbour classifier on the
backbone features against the training images (chance 0.1)."""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

import tracelab
from _e_data import batches, digits01

SOURCE = ("https://github.com/sthalles/SimCLR/blob/1848fc934ad844ae630e6c452300433fe99acfd9/"
          "simclr.py")


class TinyBackbone(nn.Module):
    def __init__(self, out_dim):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 32, 3, padding=1, bias=False), nn.BatchNorm2d(32), nn.ReLU(),
            nn.Conv2d(32, 64, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(64), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.fc = nn.Linear(64, out_dim)

    def forward(self, x):
        return self.fc(self.features(x))


class ResNetSimCLR(nn.Module):
    def __init__(self, out_dim):
        super().__init__()
        self.backbone = TinyBackbone(out_dim)
        dim_mlp = self.backbone.fc.in_features
        self.backbone.fc = nn.Sequential(nn.Linear(dim_mlp, dim_mlp), nn.ReLU(), self.backbone.fc)

    def forward(self, x):
        return self.backbone(x)


def _views(x, gen):
    """One random view per image: RandomResizedCrop, RandomHorizontalFlip, jitter (p=0.8)."""
    n = x.size(0)
    area = torch.empty(n).uniform_(0.3, 1.0, generator=gen)
    logr = torch.empty(n).uniform_(math.log(3 / 4), math.log(4 / 3), generator=gen)
    ratio = logr.exp()
    w = (area * ratio).sqrt().clamp(max=1.0)
    h = (area / ratio).sqrt().clamp(max=1.0)
    cx = (torch.rand(n, generator=gen) * 2 - 1) * (1 - w)
    cy = (torch.rand(n, generator=gen) * 2 - 1) * (1 - h)
    flip = torch.where(torch.rand(n, generator=gen) < 0.5, -1.0, 1.0)
    theta = torch.zeros(n, 2, 3)
    theta[:, 0, 0], theta[:, 0, 2] = w * flip, cx
    theta[:, 1, 1], theta[:, 1, 2] = h, cy
    grid = F.affine_grid(theta, list(x.shape), align_corners=False)
    v = F.grid_sample(x, grid, align_corners=False)
    jit = (torch.rand(n, 1, 1, 1, generator=gen) < 0.8).float()
    b = 1 + jit * torch.empty(n, 1, 1, 1).uniform_(-0.8, 0.8, generator=gen)
    c = 1 + jit * torch.empty(n, 1, 1, 1).uniform_(-0.8, 0.8, generator=gen)
    mean = v.mean(dim=(1, 2, 3), keepdim=True)
    return ((v * b - mean * b) * c + mean * b).clamp(0, 1)


def info_nce_loss(features, batch_size, n_views=2, temperature=0.07):
    labels = torch.cat([torch.arange(batch_size) for _ in range(n_views)], dim=0)
    labels = (labels.unsqueeze(0) == labels.unsqueeze(1)).float()
    features = F.normalize(features, dim=1)
    similarity_matrix = torch.matmul(features, features.T)
    mask = torch.eye(labels.shape[0], dtype=torch.bool)
    labels = labels[~mask].view(labels.shape[0], -1)
    similarity_matrix = similarity_matrix[~mask].view(similarity_matrix.shape[0], -1)
    positives = similarity_matrix[labels.bool()].view(labels.shape[0], -1)
    negatives = similarity_matrix[~labels.bool()].view(similarity_matrix.shape[0], -1)
    logits = torch.cat([positives, negatives], dim=1)
    labels = torch.zeros(logits.shape[0], dtype=torch.long)
    return logits / temperature, labels


def run(run_dir: str, seed: int = 0, epochs: int = 20, batch_size: int = 128,
        lr: float = 3e-4) -> None:
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    x_train, y_train, x_val, y_val = digits01(seed)
    model = ResNetSimCLR(out_dim=32)
    optimizer = torch.optim.Adam(model.parameters(), lr, weight_decay=1e-4)
    n_batches = len(batches(len(x_train), batch_size, None, shuffle=False, drop_last=True))
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=n_batches,
                                                           eta_min=0, last_epoch=-1)
    criterion = nn.CrossEntropyLoss()
    config = {"lr": lr, "weight_decay": 1e-4, "batch_size": batch_size, "temperature": 0.07,
              "n_views": 2, "out_dim": 32, "epochs": epochs}
    with tracelab.Recorder(run_dir, model=model, optimizer=optimizer, scheduler=scheduler,
                           loss_fn=criterion, config=config) as rec:
        for epoch_counter in range(epochs):
            model.train()
            for idx in batches(len(x_train), batch_size, gen, drop_last=True):
                x = x_train[idx]
                images = torch.cat([_views(x, gen), _views(x, gen)], dim=0)
                features = model(images)
                logits, labels = info_nce_loss(features, batch_size)
                loss = criterion(logits, labels)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                top1 = (logits.argmax(1) == labels).float().mean()
                rec.step(loss=loss, inputs=images, outputs=logits, targets=labels,
                         metrics={"acc_top1": top1})
            if epoch_counter >= 10:
                scheduler.step()
            _validate(model, rec, criterion, x_train, y_train, x_val, y_val, gen)


def _validate(model, rec, criterion, x_train, y_train, x_val, y_val, gen):
    model.eval()
    with torch.no_grad():
        images = torch.cat([_views(x_val, gen), _views(x_val, gen)], dim=0)
        logits, labels = info_nce_loss(model(images), len(x_val))
        loss = criterion(logits, labels)
        top1 = (logits.argmax(1) == labels).float().mean()
        f_train = F.normalize(model.backbone.features(x_train), dim=1)
        f_val = F.normalize(model.backbone.features(x_val), dim=1)
        nn_acc = (y_train[(f_val @ f_train.T).argmax(1)] == y_val).float().mean()
    rec.log("val", metrics={"loss": float(loss), "acc_top1": float(top1),
                            "knn_acc": float(nn_acc)}, inputs=images, outputs=logits,
            targets=labels)
    model.train()
