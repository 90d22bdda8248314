"""karpathy/pytorch-made run.py + made.py, shrunk: MADE (MaskedLinear layers with autoregressive
masks from a random input ordering, ReLU between, one hidden layer of 500), the loss
binary_cross_entropy_with_logits summed over the batch and divided by the batch size B=100,
Adam(lr=1e-3, weight_decay=1e-4), StepLR stepped at the start of each epoch with the epoch
number as the script does, and a few test batches in eval mode before each training epoch.
The data is scikit-learn's 8x8 digits binarized at half intensity (64 binary inputs) instead
of binarized MNIST; 20 epochs with StepLR(step_size=9) instead of 100 and 45.

`bug` plants one fault (None: the script as published):
- "sigmoid-logits": the model's outputs pass through a sigmoid before
  binary_cross_entropy_with_logits.
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

import tracelab
from _w_data import digits

SOURCE = ("https://github.com/karpathy/pytorch-made/blob/"
          "08431d9a9759446f1c298af727bc7e529dd24938/run.py")
BUGS = (None, "sigmoid-logits")


class MaskedLinear(nn.Linear):
    def __init__(self, in_features, out_features, bias=True):
        super().__init__(in_features, out_features, bias)
        self.register_buffer("mask", torch.ones(out_features, in_features))

    def set_mask(self, mask):
        self.mask.data.copy_(torch.from_numpy(mask.astype(np.uint8).T))

    def forward(self, input):
        return F.linear(input, self.mask * self.weight, self.bias)


class MADE(nn.Module):
    def __init__(self, nin, hidden_sizes, nout, num_masks=1, natural_ordering=False):
        super().__init__()
        self.nin, self.nout, self.hidden_sizes = nin, nout, hidden_sizes
        net = []
        hs = [nin] + hidden_sizes + [nout]
        for h0, h1 in zip(hs, hs[1:]):
            net.extend([MaskedLinear(h0, h1), nn.ReLU()])
        net.pop()
        self.net = nn.Sequential(*net)
        self.natural_ordering, self.num_masks, self.seed = natural_ordering, num_masks, 0
        self.m = {}
        self.update_masks()

    def update_masks(self):
        if self.m and self.num_masks == 1:
            return
        L = len(self.hidden_sizes)
        rng = np.random.RandomState(self.seed)
        self.seed = (self.seed + 1) % self.num_masks
        self.m[-1] = np.arange(self.nin) if self.natural_ordering else rng.permutation(self.nin)
        for l in range(L):
            self.m[l] = rng.randint(self.m[l - 1].min(), self.nin - 1, size=self.hidden_sizes[l])
        masks = [self.m[l - 1][:, None] <= self.m[l][None, :] for l in range(L)]
        masks.append(self.m[L - 1][:, None] < self.m[-1][None, :])
        layers = [l for l in self.net.modules() if isinstance(l, MaskedLinear)]
        for l, m in zip(layers, masks):
            l.set_mask(m)

    def forward(self, x):
        return self.net(x)


def run(run_dir: str, seed: int = 0, bug: str | None = None, epochs: int = 20,
        resample_every: int = 20, samples: int = 1) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    np.random.seed(42 + seed)
    torch.manual_seed(42 + seed)
    x_train, _, x_val, _ = digits(seed, size=8)
    xtr = (x_train.view(len(x_train), -1) > 127).float()
    xte = (x_val.view(len(x_val), -1) > 127).float()
    model = MADE(xtr.size(1), [500], xtr.size(1), num_masks=1)
    opt = torch.optim.Adam(model.parameters(), 1e-3, weight_decay=1e-4)
    scheduler = torch.optim.lr_scheduler.StepLR(opt, step_size=9, gamma=0.1)
    B = 100

    def loss_of(xb, logits):
        if bug == "sigmoid-logits":
            logits = torch.sigmoid(logits)
        return F.binary_cross_entropy_with_logits(logits, xb, reduction="sum") / B, logits

    with tracelab.Recorder(run_dir, model=model, optimizer=opt, scheduler=scheduler,
                           loss_fn=nn.BCEWithLogitsLoss(reduction="sum"),
                           config={"lr": 1e-3, "weight_decay": 1e-4, "batch_size": B}) as rec:

        def run_epoch(split, upto=None):
            torch.set_grad_enabled(split == "train")
            model.train() if split == "train" else model.eval()
            nsamples = 1 if split == "train" else samples
            x = xtr if split == "train" else xte
            N = x.size(0)
            nsteps = N // B if upto is None else min(N // B, upto)
            lossfs = []
            for step in range(nsteps):
                xb = x[step * B:step * B + B]
                xbhat = torch.zeros_like(xb)
                for _ in range(nsamples):
                    if step % resample_every == 0 or split == "test":
                        model.update_masks()
                    xbhat += model(xb)
                xbhat /= nsamples
                loss, seen = loss_of(xb, xbhat)
                lossfs.append(loss.item())
                if split == "train":
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
                    rec.step(loss=loss, inputs=xb, targets=xb, outputs=seen)
            if split == "test":
                rec.log("val", metrics={"loss": float(np.mean(lossfs))}, inputs=xb, targets=xb,
                        outputs=seen)
            torch.set_grad_enabled(True)

        for epoch in range(epochs):
            scheduler.step(epoch)
            run_epoch("test", upto=5)
            run_epoch("train")
