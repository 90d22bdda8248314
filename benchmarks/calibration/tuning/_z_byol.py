"""lucidrains/byol-pytorch byol_pytorch/byol_pytorch.py and its README's training loop, shrunk:
BYOL (NetWrapper with a forward hook on the encoder's hidden layer, projector and predictor MLPs
Linear-BatchNorm1d-ReLU-Linear, a target encoder deep-copied with requires_grad False and updated
by EMA (decay 0.99) after each step, loss 2 - 2 * cosine of the normalized online prediction and
target projection for both views, mean), Adam(learner.parameters(), lr=3e-4), and
learner.update_moving_average() after opt.step(). The encoder is a small CNN ending in an
avgpool and an fc layer (the README's resnet50 with hidden_layer="avgpool") on scikit-learn's
8x8 digits; the augmentation is a random shift, brightness jitter and Gaussian noise (the
SimCLR-style DEFAULT_AUG stand-in); projection 64, hidden 128, batch 128, 10 epochs, lr 1e-3;
simplicial embeddings off. After each epoch the run measures the representation with a
nearest-class-mean probe on the validation split under learner.eval() (the README's
"save your improved network" step stand-in).

`bug` plants one fault (None: the script as published):
- "eval-left-on": the probe's learner.eval() is never undone, so from the second epoch on the
  BatchNorm layers of the projector and predictor train on their running statistics;
- "net-params-only": Adam given net.parameters() (the backbone) instead of
  learner.parameters(), so the projector and predictor never train.
"""
from __future__ import annotations

import copy

import torch
import torch.nn as nn
import torch.nn.functional as F

import tracelab
from _z_data import batches, digits

SOURCE = ("https://github.com/lucidrains/byol-pytorch/blob/"
          "299312613c1f44923e7869d1c82be7d536c2c42b/byol_pytorch/byol_pytorch.py")
BUGS = (None, "eval-left-on", "net-params-only")


def cosine_loss_fn(x, y):
    x = F.normalize(x, dim=-1, p=2)
    y = F.normalize(y, dim=-1, p=2)
    return 2 - 2 * (x * y).sum(dim=-1)


class EMA:
    def __init__(self, beta):
        self.beta = beta

    def update_average(self, old, new):
        return old * self.beta + (1 - self.beta) * new


def MLP(dim, projection_size, hidden_size):
    return nn.Sequential(nn.Linear(dim, hidden_size), nn.BatchNorm1d(hidden_size),
                         nn.ReLU(inplace=True), nn.Linear(hidden_size, projection_size))


class SmallNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(32, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc(torch.flatten(self.avgpool(x), 1))


class NetWrapper(nn.Module):
    def __init__(self, net, projection_size, projection_hidden_size, layer="avgpool"):
        super().__init__()
        self.net = net
        self.hidden = None
        dict(net.named_modules())[layer].register_forward_hook(self._hook)
        self.projector = MLP(32, projection_size, projection_hidden_size)

    def _hook(self, _, inputs, output):
        self.hidden = torch.flatten(output, 1)

    def forward(self, x):
        self.net(x)
        representation = self.hidden
        return self.projector(representation), representation


def augment(x, gen):
    n = len(x)
    dx, dy = (int(v) for v in torch.randint(-1, 2, (2,), generator=gen))
    x = torch.roll(x, shifts=(dx, dy), dims=(2, 3))
    x = x * (0.6 + 0.8 * torch.rand(n, 1, 1, 1, generator=gen))
    x = x + 0.1 * torch.randn(x.shape, generator=gen)
    return (x - 0.3) / 0.4


class BYOL(nn.Module):
    def __init__(self, net, projection_size=64, projection_hidden_size=128,
                 moving_average_decay=0.99):
        super().__init__()
        self.net = net
        self.online_encoder = NetWrapper(net, projection_size, projection_hidden_size)
        self.target_encoder = copy.deepcopy(self.online_encoder)
        for p in self.target_encoder.parameters():
            p.requires_grad = False
        self.target_ema_updater = EMA(moving_average_decay)
        self.online_predictor = MLP(projection_size, projection_size, projection_hidden_size)

    def update_moving_average(self):
        for cur, ma in zip(self.online_encoder.parameters(), self.target_encoder.parameters()):
            ma.data = self.target_ema_updater.update_average(ma.data, cur.data)

    def forward(self, image_one, image_two):
        images = torch.cat((image_one, image_two), dim=0)
        online_projections, _ = self.online_encoder(images)
        online_predictions = self.online_predictor(online_projections)
        online_pred_one, online_pred_two = online_predictions.chunk(2, dim=0)
        with torch.no_grad():
            target_projections, _ = self.target_encoder(images)
            target_proj_one, target_proj_two = target_projections.detach().chunk(2, dim=0)
        loss_one = cosine_loss_fn(online_pred_one, target_proj_two.detach())
        loss_two = cosine_loss_fn(online_pred_two, target_proj_one.detach())
        loss = loss_one + loss_two
        return loss.mean(), online_predictions, target_projections


def probe(learner, x_train, y_train, x_val, y_val):
    """Nearest-class-mean accuracy of the encoder's avgpool representation."""
    norm = lambda x: (x - 0.3) / 0.4
    with torch.no_grad():
        _, h_tr = learner.online_encoder(norm(x_train))
        _, h_va = learner.online_encoder(norm(x_val))
    h_tr, h_va = F.normalize(h_tr, dim=1), F.normalize(h_va, dim=1)
    means = torch.stack([h_tr[y_train == c].mean(0) for c in range(10)])
    return (F.normalize(means, dim=1) @ h_va.T).argmax(0).eq(y_val).float().mean().item()


def run(run_dir: str, seed: int = 0, bug: str | None = None, epochs: int = 10) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    x_train, y_train, x_val, y_val = digits(seed)
    net = SmallNet()
    learner = BYOL(net)
    lr = 1e-3
    opt = torch.optim.Adam(net.parameters() if bug == "net-params-only" else learner.parameters(),
                           lr=lr)
    config = {"lr": lr, "moving_average_decay": 0.99, "projection_size": 64,
              "projection_hidden_size": 128, "batch_size": 128}
    with tracelab.Recorder(run_dir, model=learner, optimizer=opt, config=config) as rec:
        learner.train()
        for _ in range(epochs):
            for idx in batches(len(x_train), 128, gen):
                images = x_train[idx]
                one, two = augment(images, gen), augment(images, gen)
                loss, outputs, targets = learner(one, two)
                opt.zero_grad()
                loss.backward()
                opt.step()
                learner.update_moving_average()
                rec.step(loss=loss, inputs=one, outputs=outputs, targets=targets)
            learner.eval()
            acc = probe(learner, x_train, y_train, x_val, y_val)
            with torch.no_grad():
                one, two = augment(x_val, gen), augment(x_val, gen)
                val_loss, _, _ = learner(one, two)
            rec.log("val", metrics={"loss": float(val_loss), "probe_acc": acc}, inputs=one)
            if bug != "eval-left-on":
                learner.train()
