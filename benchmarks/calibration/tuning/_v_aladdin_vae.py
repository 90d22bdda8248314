"""aladdinpersson/Machine-Learning-Collection ML/Pytorch/more_advanced/VAE (model.py, train.py),
shrunk: its VariationalAutoEncoder (img_2hid, ReLU, hid_2mu and hid_2sigma; z = mu + sigma * eps;
z_2hid, ReLU, hid_2img, sigmoid), nn.BCELoss(reduction="sum") plus
kl_div = -sum(1 + log(sigma^2) - mu^2 - sigma^2), Adam(lr=3e-4), batch 32. The data is
scikit-learn's 8x8 digits with ToTensor() (0-1, INPUT_DIM 64 instead of 784), H_DIM 64 and
Z_DIM 8 instead of 200 and 20, 10 epochs of 47 batches. The held-out images' summed loss per
image is logged as "val" after every epoch (under no_grad; the model has no dropout or
BatchNorm).

`bug` plants one fault (None: the script as published):
- "kl-sign": the KL term written without its leading minus, so the loss rewards a posterior far
  from the prior.
"""
from __future__ import annotations

import torch
from torch import nn, optim

import tracelab
from _v_data import batches, digits, to_tensor

SOURCE = ("https://github.com/aladdinpersson/Machine-Learning-Collection/blob/"
          "ae581a64e6b1a9350adbdc726bc5a860cb6f5370/ML/Pytorch/more_advanced/VAE/train.py")
BUGS = (None, "kl-sign")


class VariationalAutoEncoder(nn.Module):
    def __init__(self, input_dim, h_dim=200, z_dim=20):
        super().__init__()
        self.img_2hid = nn.Linear(input_dim, h_dim)
        self.hid_2mu = nn.Linear(h_dim, z_dim)
        self.hid_2sigma = nn.Linear(h_dim, z_dim)
        self.z_2hid = nn.Linear(z_dim, h_dim)
        self.hid_2img = nn.Linear(h_dim, input_dim)
        self.relu = nn.ReLU()

    def encode(self, x):
        h = self.relu(self.img_2hid(x))
        return self.hid_2mu(h), self.hid_2sigma(h)

    def decode(self, z):
        h = self.relu(self.z_2hid(z))
        return torch.sigmoid(self.hid_2img(h))

    def forward(self, x):
        mu, sigma = self.encode(x)
        epsilon = torch.randn_like(sigma)
        z_new = mu + sigma * epsilon
        return self.decode(z_new), mu, sigma


def run(run_dir: str, seed: int = 0, bug: str | None = None, NUM_EPOCHS: int = 10) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    x_train, _, x_val, _ = digits(seed)
    INPUT_DIM, H_DIM, Z_DIM, BATCH_SIZE, LR_RATE = 64, 64, 8, 32, 3e-4
    model = VariationalAutoEncoder(INPUT_DIM, H_DIM, Z_DIM)
    optimizer = optim.Adam(model.parameters(), lr=LR_RATE)
    loss_fn = nn.BCELoss(reduction="sum")

    def vae_loss(x):
        x_reconstructed, mu, sigma = model(x)
        reconstruction_loss = loss_fn(x_reconstructed, x)
        kl = torch.sum(1 + torch.log(sigma.pow(2)) - mu.pow(2) - sigma.pow(2))
        kl_div = kl if bug == "kl-sign" else -kl
        return reconstruction_loss + kl_div, reconstruction_loss, x_reconstructed

    with tracelab.Recorder(run_dir, model=model, optimizer=optimizer, loss_fn=loss_fn,
                           config={"lr": LR_RATE, "batch_size": BATCH_SIZE,
                                   "epochs": NUM_EPOCHS}) as rec:
        for _epoch in range(NUM_EPOCHS):
            for idx in batches(len(x_train), BATCH_SIZE, gen):
                x = to_tensor(x_train[idx]).view(len(idx), INPUT_DIM)
                loss, _, x_reconstructed = vae_loss(x)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                rec.step(loss=loss, inputs=x, targets=x, outputs=x_reconstructed)
            with torch.no_grad():
                x = to_tensor(x_val).view(len(x_val), INPUT_DIM)
                loss, recon, x_reconstructed = vae_loss(x)
            rec.log("val", metrics={"loss": loss.item() / len(x),
                                    "reconstruction": recon.item() / len(x)},
                    inputs=x, targets=x, outputs=x_reconstructed)
