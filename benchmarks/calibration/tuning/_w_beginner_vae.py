"""L1aoXingyu/pytorch-beginner 08-AutoEncoder/Variational_autoencoder.py, shrunk: its VAE
(784-400-(20, 20) encoder, 20-400-784 sigmoid decoder), the loss BCE(size_average=False), i.e.
summed, plus the closed-form KL divergence, Adam(lr=1e-3), batch 128, ToTensor() images (no
Normalize). The data is scikit-learn's 8x8 digits upsampled to 28x28; the script has no
validation pass, so none is recorded.

`bug` plants one fault (None: the script as published):
- "kld-sign": the KL term enters with the wrong sign (BCE - KLD).
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import optim

import tracelab
from _w_data import batches, digits, to_tensor

SOURCE = ("https://github.com/L1aoXingyu/pytorch-beginner/blob/"
          "2abc21e6f52e300f9c81bd8acc721a1058af084d/08-AutoEncoder/Variational_autoencoder.py")
BUGS = (None, "kld-sign")


class VAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(784, 400)
        self.fc21 = nn.Linear(400, 20)
        self.fc22 = nn.Linear(400, 20)
        self.fc3 = nn.Linear(20, 400)
        self.fc4 = nn.Linear(400, 784)

    def encode(self, x):
        h1 = F.relu(self.fc1(x))
        return self.fc21(h1), self.fc22(h1)

    def reparametrize(self, mu, logvar):
        std = logvar.mul(0.5).exp_()
        eps = torch.randn_like(std)
        return eps.mul(std).add_(mu)

    def decode(self, z):
        h3 = F.relu(self.fc3(z))
        return torch.sigmoid(self.fc4(h3))

    def forward(self, x):
        mu, logvar = self.encode(x)
        z = self.reparametrize(mu, logvar)
        return self.decode(z), mu, logvar


def run(run_dir: str, seed: int = 0, bug: str | None = None, epochs: int = 8,
        batch_size: int = 128) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    x_train, _, _, _ = digits(seed, n_val=0)
    model = VAE()
    reconstruction_function = nn.BCELoss(reduction="sum")

    def loss_function(recon_x, x, mu, logvar):
        bce = reconstruction_function(recon_x, x)
        kld_element = mu.pow(2).add_(logvar.exp()).mul_(-1).add_(1).add_(logvar)
        kld = torch.sum(kld_element).mul_(-0.5)
        return bce - kld if bug == "kld-sign" else bce + kld

    optimizer = optim.Adam(model.parameters(), lr=1e-3)
    with tracelab.Recorder(run_dir, model=model, optimizer=optimizer,
                           loss_fn=reconstruction_function,
                           config={"lr": 1e-3, "batch_size": batch_size}) as rec:
        for _ in range(epochs):
            model.train()
            for idx in batches(len(x_train), batch_size, gen):
                img = to_tensor(x_train[idx]).view(len(idx), -1)
                optimizer.zero_grad()
                recon_batch, mu, logvar = model(img)
                loss = loss_function(recon_batch, img, mu, logvar)
                loss.backward()
                optimizer.step()
                rec.step(loss=loss, inputs=img, targets=img, outputs=recon_batch)
