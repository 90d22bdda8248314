"""pytorch/examples vae/main.py, shrunk: its fully connected VAE (fc1, fc21/fc22 for mu and
logvar, fc3, fc4 with a sigmoid), the loss binary_cross_entropy(reduction='sum') + KLD summed
over the batch, Adam(lr=1e-3), batch 128. The data is scikit-learn's 8x8 digits through
ToTensor() (64 pixels in 0-1 instead of 784), layers of 128 units instead of 400 and a
latent of 8 instead of 20.

`bug` plants one fault (None: the script as published):
- "kld-sign": the KL term written as +0.5 * sum(1 + logvar - mu^2 - exp(logvar)) (the sign
  pytorch/examples issue 824 asked about), so the loss rewards a large KL divergence;
- "tiny-lr": Adam(lr=1e-6) instead of 1e-3 (a fine-tuning learning rate).
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim

import tracelab
from _a_data import batches, digits, to_tensor

SOURCE = ("https://github.com/pytorch/examples/blob/77f55b912142e11fcfdf5b530231fb9c52f181e8/"
          "vae/main.py")
BUGS = (None, "kld-sign", "tiny-lr")


class VAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(64, 128)
        self.fc21 = nn.Linear(128, 8)
        self.fc22 = nn.Linear(128, 8)
        self.fc3 = nn.Linear(8, 128)
        self.fc4 = nn.Linear(128, 64)

    def encode(self, x):
        h1 = F.relu(self.fc1(x))
        return self.fc21(h1), self.fc22(h1)

    def reparameterize(self, mu, logvar):
        std = torch.exp(0.5 * logvar)
        eps = torch.randn_like(std)
        return mu + eps * std

    def decode(self, z):
        h3 = F.relu(self.fc3(z))
        return torch.sigmoid(self.fc4(h3))

    def forward(self, x):
        mu, logvar = self.encode(x.view(-1, 64))
        z = self.reparameterize(mu, logvar)
        return self.decode(z), mu, logvar


def loss_function(recon_x, x, mu, logvar, bug=None):
    bce = F.binary_cross_entropy(recon_x, x.view(-1, 64), reduction="sum")
    sign = 0.5 if bug == "kld-sign" else -0.5
    kld = sign * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
    return bce + kld


def run(run_dir: str, seed: int = 0, bug: str | None = None, epochs: int = 25) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    x_train, _, x_val, _ = digits(seed)
    x_train, x_val = to_tensor(x_train), to_tensor(x_val)
    model = VAE()
    lr = 1e-6 if bug == "tiny-lr" else 1e-3
    optimizer = optim.Adam(model.parameters(), lr=lr)
    with tracelab.Recorder(run_dir, model=model, optimizer=optimizer,
                           config={"lr": lr, "batch_size": 128, "loss": "BCE(sum) + KLD"}
                           ) as rec:
        for _ in range(epochs):
            model.train()
            for idx in batches(len(x_train), 128, gen):
                data = x_train[idx]
                optimizer.zero_grad()
                recon_batch, mu, logvar = model(data)
                loss = loss_function(recon_batch, data, mu, logvar, bug)
                loss.backward()
                optimizer.step()
                rec.step(loss=loss, inputs=data, targets=data.view(-1, 64),
                         outputs=recon_batch)
            model.eval()
            with torch.no_grad():
                recon, mu, logvar = model(x_val)
                test_loss = loss_function(recon, x_val, mu, logvar, bug).item() / len(x_val)
            rec.log("val", metrics={"loss": test_loss}, inputs=x_val,
                    targets=x_val.view(-1, 64), outputs=recon)
