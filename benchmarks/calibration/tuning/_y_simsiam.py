"""facebookresearch/simsiam main_simsiam.py with simsiam/builder.py, shrunk: the SimSiam model
(the base encoder's fc replaced by the 3-layer projection MLP with BatchNorm1d and a final
BatchNorm1d(dim, affine=False), its bias frozen by the builder's hack; the 2-layer predictor with a
BatchNorm1d hidden layer; z1, z2 detached as stop-gradient), nn.CosineSimilarity(dim=1) and
loss = -(criterion(p1, z2).mean() + criterion(p2, z1).mean()) * 0.5, torch.optim.SGD(init_lr =
lr * batch_size / 256, momentum=0.9, weight_decay=1e-4) with lr 0.05, adjust_learning_rate's
half-cosine set once per epoch, model.train(). ResNet-50 on ImageNet is replaced by a small
convolutional base encoder (two 3x3 convolutions with BatchNorm, average pooling and an fc) on
scikit-learn's 8x8 digits as 3-channel images, two views each made by a random resized crop
(padding 1, then a random 8x8 window), colour jitter on brightness and contrast, a random
grayscale mix and Gaussian noise; dim 64, pred_dim 16, batch 128, 12 epochs. After each epoch
the 1-nearest-neighbour accuracy of the encoder's output on the validation digits (against the
training digits) is logged as the val metric (model.eval()).

`bug` plants one fault (None: the script as published):
- "lr-5": --lr 5.0 (init_lr 2.5).
"""
from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

import tracelab
from _y_data import batches, digits, to_tensor

SOURCE = ("https://github.com/facebookresearch/simsiam/blob/"
          "a7bc1772896d0dad0806c51f0bb6f3b16d290468/main_simsiam.py")
BUGS = (None, "lr-5")


class SmallEncoder(nn.Module):
    """Stand-in for torchvision's resnet50(num_classes=dim): a body and an fc to dim."""

    def __init__(self, num_classes=64, zero_init_residual=True):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU(inplace=True),
            nn.Conv2d(16, 32, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(32),
            nn.ReLU(inplace=True), nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.fc = nn.Linear(32, num_classes)

    def forward(self, x):
        return self.fc(self.body(x))


class SimSiam(nn.Module):
    def __init__(self, base_encoder, dim=64, pred_dim=16):
        super().__init__()
        self.encoder = base_encoder(num_classes=dim, zero_init_residual=True)
        prev_dim = self.encoder.fc.weight.shape[1]
        self.encoder.fc = nn.Sequential(nn.Linear(prev_dim, prev_dim, bias=False),
                                        nn.BatchNorm1d(prev_dim), nn.ReLU(inplace=True),
                                        nn.Linear(prev_dim, prev_dim, bias=False),
                                        nn.BatchNorm1d(prev_dim), nn.ReLU(inplace=True),
                                        self.encoder.fc,
                                        nn.BatchNorm1d(dim, affine=False))
        self.encoder.fc[6].bias.requires_grad = False
        self.predictor = nn.Sequential(nn.Linear(dim, pred_dim, bias=False),
                                       nn.BatchNorm1d(pred_dim), nn.ReLU(inplace=True),
                                       nn.Linear(pred_dim, dim))

    def forward(self, x1, x2):
        z1 = self.encoder(x1)
        z2 = self.encoder(x2)
        p1 = self.predictor(z1)
        p2 = self.predictor(z2)
        return p1, p2, z1.detach(), z2.detach()


def augment(x, gen):
    n = len(x)
    x = F.pad(x, (1, 1, 1, 1))
    i, j = (int(v) for v in torch.randint(0, 3, (2,), generator=gen))
    x = x[:, :, i:i + 8, j:j + 8]
    b = 1 + 0.4 * (torch.rand(n, 1, 1, 1, generator=gen) * 2 - 1)
    c = 1 + 0.4 * (torch.rand(n, 1, 1, 1, generator=gen) * 2 - 1)
    m = x.mean(dim=(1, 2, 3), keepdim=True)
    x = ((x - m) * c + m) * b
    gray = (torch.rand(n, 1, 1, 1, generator=gen) < 0.2).float()
    x = gray * x.mean(1, keepdim=True).expand_as(x) + (1 - gray) * x
    x = x + 0.1 * torch.randn(x.shape, generator=gen)
    return (x - 0.45) / 0.225


def knn_acc(model, x_train, y_train, x_val, y_val):
    with torch.no_grad():
        ft = F.normalize(model.encoder((x_train - 0.45) / 0.225), dim=1)
        fv = F.normalize(model.encoder((x_val - 0.45) / 0.225), dim=1)
        pred = y_train[(fv @ ft.t()).argmax(1)]
    return pred.eq(y_val).float().mean().item()


def run(run_dir: str, seed: int = 0, bug: str | None = None, epochs: int = 12) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    x_train, y_train, x_val, y_val = digits(seed, channels=3)
    x_train, x_val = to_tensor(x_train), to_tensor(x_val)
    batch_size = 128
    lr = 5.0 if bug == "lr-5" else 0.05
    init_lr = lr * batch_size / 256
    model = SimSiam(SmallEncoder)
    criterion = nn.CosineSimilarity(dim=1)
    optimizer = torch.optim.SGD(model.parameters(), init_lr, momentum=0.9, weight_decay=1e-4)
    with tracelab.Recorder(run_dir, model=model, optimizer=optimizer, loss_fn=criterion,
                           config={"lr": lr, "init_lr": init_lr, "batch_size": batch_size,
                                   "momentum": 0.9, "weight_decay": 1e-4,
                                   "epochs": epochs}) as rec:
        for epoch in range(epochs):
            cur_lr = init_lr * 0.5 * (1. + math.cos(math.pi * epoch / epochs))
            for param_group in optimizer.param_groups:
                param_group['lr'] = cur_lr
            model.train()
            for idx in batches(len(x_train), batch_size, gen, drop_last=True):
                x1, x2 = augment(x_train[idx], gen), augment(x_train[idx], gen)
                p1, p2, z1, z2 = model(x1=x1, x2=x2)
                loss = -(criterion(p1, z2).mean() + criterion(p2, z1).mean()) * 0.5
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                rec.step(loss=loss, inputs=x1)
            model.eval()
            rec.log("val", metrics={"acc": knn_acc(model, x_train, y_train, x_val, y_val)})
