"""milesial/Pytorch-UNet train.py + evaluate.py + unet/, shrunk: the UNet (DoubleConv with
BatchNorm, four Down / four Up with ConvTranspose2d, OutConv) with every width divided by 8
(8 ... 128 channels instead of 64 ... 1024), n_classes=2, CrossEntropyLoss + multiclass
dice_loss on the softmax, RMSprop(lr, weight_decay=1e-8, momentum=0.999, foreach=True),
ReduceLROnPlateau('max', patience=5) stepped on the validation Dice, clip_grad_norm_(1.0), the
evaluation round five times an epoch (evaluate(): net.eval(), Dice of the argmax one-hot
without background, net.train()). Data: synthetic 32x32 RGB uint8 images of noisy background
with two to three coloured ellipses (140 images), their mask the target (instead of Carvana), divided by 255
as BasicDataset.preprocess does, random_split 10 % validation; batch 8 (--batch-size), 5
epochs, lr 1e-4 (--learning-rate; the default 1e-5 barely moves in 80 steps).

`bug` (None: the script as published):
- "no-train": evaluate() ends without net.train(), so after the first evaluation round the rest
  of each epoch trains in eval mode (model.train() only at the epoch's start);
- "raw-pixels": preprocess skips the division by 255, the images go in as 0-255.
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import optim

import tracelab

SOURCE = ("https://github.com/milesial/Pytorch-UNet/blob/21d7850f2af30a9695bbeea75f3136aa538cfc4a/"
          "train.py")
BUGS = (None, "no-train", "raw-pixels")


class DoubleConv(nn.Module):
    def __init__(self, in_channels, out_channels, mid_channels=None):
        super().__init__()
        mid_channels = mid_channels or out_channels
        self.double_conv = nn.Sequential(
            nn.Conv2d(in_channels, mid_channels, kernel_size=3, padding=1, bias=False),
            nn.BatchNorm2d(mid_channels), nn.ReLU(inplace=True),
            nn.Conv2d(mid_channels, out_channels, kernel_size=3, padding=1, bias=False),
            nn.BatchNorm2d(out_channels), nn.ReLU(inplace=True))

    def forward(self, x):
        return self.double_conv(x)


class Down(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.maxpool_conv = nn.Sequential(nn.MaxPool2d(2), DoubleConv(in_channels, out_channels))

    def forward(self, x):
        return self.maxpool_conv(x)


class Up(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.up = nn.ConvTranspose2d(in_channels, in_channels // 2, kernel_size=2, stride=2)
        self.conv = DoubleConv(in_channels, out_channels)

    def forward(self, x1, x2):
        x1 = self.up(x1)
        diffY, diffX = x2.size()[2] - x1.size()[2], x2.size()[3] - x1.size()[3]
        x1 = F.pad(x1, [diffX // 2, diffX - diffX // 2, diffY // 2, diffY - diffY // 2])
        return self.conv(torch.cat([x2, x1], dim=1))


class UNet(nn.Module):
    def __init__(self, n_channels, n_classes, w=8):
        super().__init__()
        self.n_channels, self.n_classes = n_channels, n_classes
        self.inc = DoubleConv(n_channels, w)
        self.down1, self.down2 = Down(w, 2 * w), Down(2 * w, 4 * w)
        self.down3, self.down4 = Down(4 * w, 8 * w), Down(8 * w, 16 * w)
        self.up1, self.up2 = Up(16 * w, 8 * w), Up(8 * w, 4 * w)
        self.up3, self.up4 = Up(4 * w, 2 * w), Up(2 * w, w)
        self.outc = nn.Conv2d(w, n_classes, kernel_size=1)

    def forward(self, x):
        x1 = self.inc(x)
        x2 = self.down1(x1)
        x3 = self.down2(x2)
        x4 = self.down3(x3)
        x5 = self.down4(x4)
        x = self.up1(x5, x4)
        x = self.up2(x, x3)
        x = self.up3(x, x2)
        x = self.up4(x, x1)
        return self.outc(x)


def dice_coeff(input, target, reduce_batch_first=False, epsilon=1e-6):
    sum_dim = (-1, -2) if input.dim() == 2 or not reduce_batch_first else (-1, -2, -3)
    inter = 2 * (input * target).sum(dim=sum_dim)
    sets_sum = input.sum(dim=sum_dim) + target.sum(dim=sum_dim)
    sets_sum = torch.where(sets_sum == 0, inter, sets_sum)
    return ((inter + epsilon) / (sets_sum + epsilon)).mean()


def multiclass_dice_coeff(input, target, reduce_batch_first=False, epsilon=1e-6):
    return dice_coeff(input.flatten(0, 1), target.flatten(0, 1), reduce_batch_first, epsilon)


def dice_loss(input, target, multiclass=False):
    fn = multiclass_dice_coeff if multiclass else dice_coeff
    return 1 - fn(input, target, reduce_batch_first=True)


def shapes(seed: int, n: int = 140, size: int = 32):
    """uint8 images (n, 3, size, size) and long masks (n, size, size): ellipses on noise."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:size, 0:size]
    images = rng.normal(90, 30, (n, 3, size, size))
    masks = np.zeros((n, size, size), dtype=np.int64)
    for i in range(n):
        for _ in range(rng.integers(2, 4)):
            cy, cx = rng.uniform(4, size - 4, 2)
            ry, rx = rng.uniform(3, 8, 2)
            inside = ((yy - cy) / ry) ** 2 + ((xx - cx) / rx) ** 2 <= 1
            masks[i][inside] = 1
            images[i][:, inside] += rng.uniform(40, 110, (3, 1))
    images = torch.from_numpy(images.clip(0, 255).astype(np.uint8))
    return images, torch.from_numpy(masks)


@torch.inference_mode()
def evaluate(net, val_batches, bug):
    net.eval()
    dice_score = 0
    for image, mask_true in val_batches:
        mask_pred = net(image)
        mask_true = F.one_hot(mask_true, net.n_classes).permute(0, 3, 1, 2).float()
        mask_pred = F.one_hot(mask_pred.argmax(dim=1), net.n_classes).permute(0, 3, 1, 2).float()
        dice_score += multiclass_dice_coeff(mask_pred[:, 1:], mask_true[:, 1:])
    if bug != "no-train":
        net.train()
    return float(dice_score / max(len(val_batches), 1)), image, mask_pred


def run(run_dir: str, seed: int = 0, bug: str | None = None, epochs: int = 5,
        batch_size: int = 8, learning_rate: float = 1e-4) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    images, masks = shapes(seed)
    images = images.float()
    if bug != "raw-pixels":
        images = images / 255.0  # BasicDataset.preprocess: img / 255 when img.max() > 1
    n_val = int(len(images) * 0.1)
    order = torch.randperm(len(images), generator=torch.Generator().manual_seed(0))
    val_idx, train_idx = order[:n_val], order[n_val:]
    val_batches = [(images[i], masks[i]) for i in val_idx.split(batch_size)
                   if len(i) == batch_size]  # drop_last=True
    model = UNet(n_channels=3, n_classes=2)
    optimizer = optim.RMSprop(model.parameters(), lr=learning_rate, weight_decay=1e-8,
                              momentum=0.999, foreach=True)
    scheduler = optim.lr_scheduler.ReduceLROnPlateau(optimizer, "max", patience=5)
    criterion = nn.CrossEntropyLoss()
    n_train = len(train_idx)
    division_step = n_train // (5 * batch_size)
    global_step = 0
    gen = torch.Generator().manual_seed(seed)
    with tracelab.Recorder(run_dir, model=model, optimizer=optimizer, scheduler=scheduler,
                           loss_fn=criterion,
                           config={"epochs": epochs, "batch_size": batch_size,
                                   "learning_rate": learning_rate, "weight_decay": 1e-8,
                                   "momentum": 0.999, "gradient_clipping": 1.0}) as rec:
        for epoch in range(1, epochs + 1):
            model.train()
            for idx in train_idx[torch.randperm(n_train, generator=gen)].split(batch_size):
                imgs, true_masks = images[idx], masks[idx]
                masks_pred = model(imgs)
                loss = criterion(masks_pred, true_masks)
                loss += dice_loss(F.softmax(masks_pred, dim=1).float(),
                                  F.one_hot(true_masks, model.n_classes).permute(0, 3, 1, 2).float(),
                                  multiclass=True)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
                global_step += 1
                rec.step(loss=loss, inputs=imgs, targets=true_masks, outputs=masks_pred)
                if division_step > 0 and global_step % division_step == 0:
                    val_score, vimg, vpred = evaluate(model, val_batches, bug)
                    scheduler.step(val_score)
                    rec.log("val", metrics={"dice": val_score}, inputs=vimg)
    print(f"    unet bug={bug}: val dice {val_score:.3f}")
