"""znxlwm/pytorch-MNIST-CelebA-GAN-DCGAN pytorch_MNIST_GAN.py, shrunk: its fully connected
generator (100 -> 256 -> 512 -> 1024 -> image, leaky ReLU 0.2, tanh) and discriminator
(image -> 1024 -> 512 -> 256 -> 1, leaky ReLU 0.2, F.dropout(0.3) after each hidden layer,
sigmoid), nn.BCELoss, two Adam(lr=2e-4), batch 128, images normalized to [-1, 1]; each batch one
D step (real then fake, D.zero_grad() first) and one G step (G.zero_grad(), fresh noise, target
ones). The data is scikit-learn's 8x8 digits (64 pixels instead of 784) and the hidden sizes are
halved (128/256/512); the discriminator's (N, 1) output is flattened before BCELoss (the script
predates the size check). 25 epochs of 13 batches. The Recorder gets one step per G step (the
generator's loss, the generated images and the discriminator's scores); the generated pixels'
mean and standard deviation against the real ones are logged as "val" each epoch.

`bug` plants one fault (None: the script as published):
- "no-g-step": the G_optimizer.step() line left out of the generator step.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn, optim

import tracelab
from _v_data import batches, digits, to_tensor

SOURCE = ("https://github.com/znxlwm/pytorch-MNIST-CelebA-GAN-DCGAN/blob/"
          "136130522554c4d858b5b40c5abd15d61130f103/pytorch_MNIST_GAN.py")
BUGS = (None, "no-g-step")


class generator(nn.Module):
    def __init__(self, input_size=32, n_class=10):
        super().__init__()
        self.fc1 = nn.Linear(input_size, 128)
        self.fc2 = nn.Linear(self.fc1.out_features, 256)
        self.fc3 = nn.Linear(self.fc2.out_features, 512)
        self.fc4 = nn.Linear(self.fc3.out_features, n_class)

    def forward(self, input):
        x = F.leaky_relu(self.fc1(input), 0.2)
        x = F.leaky_relu(self.fc2(x), 0.2)
        x = F.leaky_relu(self.fc3(x), 0.2)
        return torch.tanh(self.fc4(x))


class discriminator(nn.Module):
    def __init__(self, input_size=32, n_class=10):
        super().__init__()
        self.fc1 = nn.Linear(input_size, 512)
        self.fc2 = nn.Linear(self.fc1.out_features, 256)
        self.fc3 = nn.Linear(self.fc2.out_features, 128)
        self.fc4 = nn.Linear(self.fc3.out_features, n_class)

    def forward(self, input):
        x = F.leaky_relu(self.fc1(input), 0.2)
        x = F.dropout(x, 0.3)
        x = F.leaky_relu(self.fc2(x), 0.2)
        x = F.dropout(x, 0.3)
        x = F.leaky_relu(self.fc3(x), 0.2)
        x = F.dropout(x, 0.3)
        return torch.sigmoid(self.fc4(x))


def run(run_dir: str, seed: int = 0, bug: str | None = None, train_epoch: int = 25) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    images, _, _, _ = digits(seed, n_val=0)
    data = (to_tensor(images).view(-1, 64) - 0.5) / 0.5  # Normalize(mean=0.5, std=0.5)
    batch_size, lr = 128, 0.0002
    G = generator(input_size=100, n_class=64)
    D = discriminator(input_size=64, n_class=1)
    BCE_loss = nn.BCELoss()
    G_optimizer = optim.Adam(G.parameters(), lr=lr)
    D_optimizer = optim.Adam(D.parameters(), lr=lr)
    with tracelab.Recorder(run_dir, model=nn.ModuleDict({"G": G, "D": D}),
                           optimizer={"G": G_optimizer, "D": D_optimizer}, loss_fn=BCE_loss,
                           config={"lr": lr, "batch_size": batch_size,
                                   "epochs": train_epoch}) as rec:
        for _epoch in range(train_epoch):
            for idx in batches(len(data), batch_size, gen):
                # train discriminator D
                D.zero_grad()
                x_ = data[idx]
                mini_batch = x_.size()[0]
                y_real_, y_fake_ = torch.ones(mini_batch), torch.zeros(mini_batch)
                D_result = D(x_).view(-1)
                D_real_loss = BCE_loss(D_result, y_real_)
                z_ = torch.randn((mini_batch, 100))
                G_result = G(z_)
                D_result = D(G_result).view(-1)
                D_fake_loss = BCE_loss(D_result, y_fake_)
                D_train_loss = D_real_loss + D_fake_loss
                D_train_loss.backward()
                D_optimizer.step()
                # train generator G
                G.zero_grad()
                z_ = torch.randn((mini_batch, 100))
                y_ = torch.ones(mini_batch)
                G_result = G(z_)
                D_result = D(G_result).view(-1)
                G_train_loss = BCE_loss(D_result, y_)
                G_train_loss.backward()
                if bug != "no-g-step":
                    G_optimizer.step()
                rec.step(loss=G_train_loss, inputs=G_result, targets=y_, outputs=D_result,
                         metrics={"d_loss": D_train_loss.item()})
            with torch.no_grad():
                fake = G(torch.randn(500, 100))
                gap = ((fake.mean(0) - data.mean(0)).abs().mean()
                       + (fake.std(0) - data.std(0)).abs().mean()).item()
            rec.log("val", metrics={"fake_mean": fake.mean().item(), "fake_std": fake.std().item(),
                                    "pixel_stat_gap": gap})
