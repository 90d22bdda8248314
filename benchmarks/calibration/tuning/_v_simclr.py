"""leftthomas/SimCLR main.py and model.py, shrunk: its Model (an encoder f, resnet18 without its
fc, and a projection head g = Linear(bias=False), ReLU, Linear(bias=False); both outputs
L2-normalized), its train() (net.train(); two augmented views per image; the NT-Xent loss
written out as exp(out @ out.T / temperature) with the diagonal masked away,
-log(pos_sim / sim_matrix.sum(-1)).mean()), Adam(lr=1e-3, weight_decay=1e-6), batches with
drop_last, temperature 0.5, and its test() (net.eval(); a weighted kNN over the features of the
training images without augmentation, k neighbours, classes voted by exp(sim / temperature)),
logged as "val" top-1 accuracy after every epoch. resnet18 is shrunk to conv 3x3 (16) with
BatchNorm and ReLU, conv 3x3 stride 2 (32) with BatchNorm and ReLU, and average pooling (feature
32, feature_dim 16); the data is scikit-learn's 8x8 digits upsampled to 16x16 with ToTensor()
and Normalize, the CIFAR augmentations (RandomResizedCrop, flips, colour jitter) replaced by a
random shift of up to 2 pixels, a random contrast factor in [0.6, 1.4] and Gaussian noise;
batch 128, k 20, 12 epochs of 11 batches instead of 512, 200 and 500 epochs of CIFAR-10.

`bug` plants one fault (None: the script as published):
- "temperature-0.01": --temperature 0.01: exp(1 / 0.01) overflows float32, the loss is NaN.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn, optim

import tracelab
from _v_data import batches, digits, to_tensor

SOURCE = ("https://github.com/leftthomas/SimCLR/blob/1e4dc8edacc1842b2728eef444299dce95fce5ba/"
          "main.py")
BUGS = (None, "temperature-0.01")
MEAN, STD = 0.3, 0.4


class Model(nn.Module):
    def __init__(self, feature_dim=16):
        super().__init__()
        self.f = nn.Sequential(nn.Conv2d(1, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16),
                               nn.ReLU(inplace=True), nn.Conv2d(16, 32, 3, 2, 1, bias=False),
                               nn.BatchNorm2d(32), nn.ReLU(inplace=True),
                               nn.AdaptiveAvgPool2d(1))
        self.g = nn.Sequential(nn.Linear(32, feature_dim, bias=False), nn.ReLU(inplace=True),
                               nn.Linear(feature_dim, feature_dim, bias=False))

    def forward(self, x):
        x = self.f(x)
        feature = torch.flatten(x, start_dim=1)
        out = self.g(feature)
        return F.normalize(feature, dim=-1), F.normalize(out, dim=-1)


def augment(x, gen):
    """A random shift of up to 2 pixels, a contrast factor and noise, per image."""
    n = x.shape[0]
    padded = F.pad(x, (2, 2, 2, 2))
    dx = torch.randint(0, 5, (n,), generator=gen)
    dy = torch.randint(0, 5, (n,), generator=gen)
    out = torch.stack([padded[i, :, dy[i]:dy[i] + 16, dx[i]:dx[i] + 16] for i in range(n)])
    out = out * (0.6 + 0.8 * torch.rand(n, 1, 1, 1, generator=gen))
    out = out + 0.1 * torch.randn(out.shape, generator=gen)
    return (out - MEAN) / STD


def run(run_dir: str, seed: int = 0, bug: str | None = None, epochs: int = 12) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    x_train, y_train, x_val, y_val = digits(seed, size=16)
    images, memory = to_tensor(x_train), (to_tensor(x_train) - MEAN) / STD
    test_images = (to_tensor(x_val) - MEAN) / STD
    temperature = 0.01 if bug == "temperature-0.01" else 0.5
    batch_size, k, c = 128, 20, 10
    model = Model(feature_dim=16)
    optimizer = optim.Adam(model.parameters(), lr=1e-3, weight_decay=1e-6)
    with tracelab.Recorder(run_dir, model=model, optimizer=optimizer,
                           config={"lr": 1e-3, "weight_decay": 1e-6, "batch_size": batch_size,
                                   "temperature": temperature, "epochs": epochs}) as rec:
        for _epoch in range(epochs):
            # train
            model.train()
            for idx in batches(len(images), batch_size, gen, drop_last=True):
                pos_1, pos_2 = augment(images[idx], gen), augment(images[idx], gen)
                feature_1, out_1 = model(pos_1)
                feature_2, out_2 = model(pos_2)
                out = torch.cat([out_1, out_2], dim=0)
                sim_matrix = torch.exp(torch.mm(out, out.t().contiguous()) / temperature)
                mask = (torch.ones_like(sim_matrix)
                        - torch.eye(2 * batch_size, device=sim_matrix.device)).bool()
                sim_matrix = sim_matrix.masked_select(mask).view(2 * batch_size, -1)
                pos_sim = torch.exp(torch.sum(out_1 * out_2, dim=-1) / temperature)
                pos_sim = torch.cat([pos_sim, pos_sim], dim=0)
                loss = (-torch.log(pos_sim / sim_matrix.sum(dim=-1))).mean()
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                rec.step(loss=loss, inputs=torch.cat([pos_1, pos_2]), outputs=out)
            # test: weighted kNN on the features
            model.eval()
            with torch.no_grad():
                feature_bank = model(memory)[0].t().contiguous()
                feature, _ = model(test_images)
                sim = torch.mm(feature, feature_bank)
                sim_weight, sim_indices = sim.topk(k=k, dim=-1)
                sim_labels = torch.gather(y_train.expand(feature.size(0), -1), dim=-1,
                                          index=sim_indices)
                sim_weight = (sim_weight / temperature).exp()
                one_hot = torch.zeros(feature.size(0) * k, c).scatter(
                    dim=-1, index=sim_labels.view(-1, 1), value=1.0)
                pred_scores = torch.sum(one_hot.view(feature.size(0), -1, c)
                                        * sim_weight.unsqueeze(dim=-1), dim=1)
                top1 = (pred_scores.argmax(dim=-1) == y_val).float().mean().item()
            rec.log("val", metrics={"knn_top1": top1}, inputs=test_images, targets=y_val)
