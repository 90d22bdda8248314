"""lyeoni/pytorch-mnist-VAE pytorch-mnist-VAE.ipynb, shrunk: its VAE (encoder fc1 512, fc2 256,
fc31/fc32 to a 2-d mu and log_var, reparameterized sample, decoder fc4 256, fc5 512, fc6 with
sigmoid), loss F.binary_cross_entropy(reduction='sum') + KLD (summed over the batch),
optim.Adam(vae.parameters()) at its default lr 1e-3, batch 100, train() with vae.train() and
test() with vae.eval() and the test loss per sample. The data is scikit-learn's 8x8 digits as
0-1 pixels (ToTensor()), so x_dim is 64 instead of 784; 20 epochs.

`bug` plants one fault (None: the notebook as published):
- "lr-1e-6": optim.Adam(vae.parameters(), lr=1e-6).
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim

import tracelab
from _u_data import batches, digits, to_tensor

SOURCE = ("https://github.com/lyeoni/pytorch-mnist-VAE/blob/"
          "413bb3a8e77db3aa1ed3b20d0ceee5ea238834ab/pytorch-mnist-VAE.ipynb")
BUGS = (None, "lr-1e-6")


class VAE(nn.Module):
    def __init__(self, x_dim, h_dim1, h_dim2, z_dim):
        super().__init__()
        self.x_dim = x_dim
        self.fc1 = nn.Linear(x_dim, h_dim1)
        self.fc2 = nn.Linear(h_dim1, h_dim2)
        self.fc31 = nn.Linear(h_dim2, z_dim)
        self.fc32 = nn.Linear(h_dim2, z_dim)
        self.fc4 = nn.Linear(z_dim, h_dim2)
        self.fc5 = nn.Linear(h_dim2, h_dim1)
        self.fc6 = nn.Linear(h_dim1, x_dim)

    def encoder(self, x):
        h = F.relu(self.fc1(x))
        h = F.relu(self.fc2(h))
        return self.fc31(h), self.fc32(h)

    def sampling(self, mu, log_var):
        std = torch.exp(0.5 * log_var)
        eps = torch.randn_like(std)
        return eps.mul(std).add_(mu)

    def decoder(self, z):
        h = F.relu(self.fc4(z))
        h = F.relu(self.fc5(h))
        return torch.sigmoid(self.fc6(h))

    def forward(self, x):
        mu, log_var = self.encoder(x.view(-1, self.x_dim))
        z = self.sampling(mu, log_var)
        return self.decoder(z), mu, log_var


def loss_function(recon_x, x, mu, log_var, x_dim):
    BCE = F.binary_cross_entropy(recon_x, x.view(-1, x_dim), reduction="sum")
    KLD = -0.5 * torch.sum(1 + log_var - mu.pow(2) - log_var.exp())
    return BCE + KLD


def run(run_dir: str, seed: int = 0, bug: str | None = None, epochs: int = 20) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    x_train, _, x_test, _ = digits(seed)
    x_train, x_test = to_tensor(x_train), to_tensor(x_test)
    x_dim, bs = 64, 100
    vae = VAE(x_dim=x_dim, h_dim1=512, h_dim2=256, z_dim=2)
    optimizer = optim.Adam(vae.parameters(), lr=1e-6) if bug == "lr-1e-6" else \
        optim.Adam(vae.parameters())
    lr = optimizer.param_groups[0]["lr"]
    with tracelab.Recorder(run_dir, model=vae, optimizer=optimizer,
                           config={"lr": lr, "batch_size": bs, "z_dim": 2}) as rec:
        for _ in range(epochs):
            vae.train()
            for idx in batches(len(x_train), bs, gen):
                data = x_train[idx]
                optimizer.zero_grad()
                recon_batch, mu, log_var = vae(data)
                loss = loss_function(recon_batch, data, mu, log_var, x_dim)
                loss.backward()
                optimizer.step()
                rec.step(loss=loss, inputs=data, targets=data.view(-1, x_dim),
                         outputs=recon_batch, metrics={"loss_per_sample": loss / len(data)})
            vae.eval()
            with torch.no_grad():
                recon, mu, log_var = vae(x_test)
                test_loss = loss_function(recon, x_test, mu, log_var, x_dim).item()
            rec.log("val", metrics={"loss": test_loss / len(x_test)}, inputs=x_test,
                    targets=x_test.view(-1, x_dim), outputs=recon)
