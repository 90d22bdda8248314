"""timbmg/VAE-CVAE-MNIST train.py + models.py, shrunk: the MLP Encoder (Linear+ReLU, then
linear_means and linear_log_var) and Decoder (Linear+ReLU, Linear+Sigmoid), latent size 2,
reparameterisation, loss_fn = binary_cross_entropy(recon_x, x, reduction='sum') + KLD summed
over the batch, Adam(lr=0.001), batch 128; --conditional concatenates one-hot labels to the
encoder input and the latent. Data: scikit-learn's digits flattened to 64 pixels in 0-1
(layer sizes [64, 256] / [256, 64]). The script has no validation split.

`bug` (None: as published):
- "kld-sign": a redundant minus before the KLD term, so the loss subtracts the KL divergence;
- "cvae": healthy, the script's --conditional run.
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

import tracelab
from _x_data import batches, digits

SOURCE = ("https://github.com/timbmg/VAE-CVAE-MNIST/blob/"
          "233688bbf96b972131cad6d125c776c64e094099/train.py")
BUGS = (None, "kld-sign", "cvae")


def idx2onehot(idx, n):
    return F.one_hot(idx.view(-1), n).float()


class Encoder(nn.Module):
    def __init__(self, layer_sizes, latent_size, conditional, num_labels):
        super().__init__()
        self.conditional = conditional
        if conditional:
            layer_sizes = [layer_sizes[0] + num_labels] + layer_sizes[1:]
        self.MLP = nn.Sequential()
        for i, (a, b) in enumerate(zip(layer_sizes[:-1], layer_sizes[1:])):
            self.MLP.add_module(name="L%i" % i, module=nn.Linear(a, b))
            self.MLP.add_module(name="A%i" % i, module=nn.ReLU())
        self.linear_means = nn.Linear(layer_sizes[-1], latent_size)
        self.linear_log_var = nn.Linear(layer_sizes[-1], latent_size)

    def forward(self, x, c=None):
        if self.conditional:
            x = torch.cat((x, idx2onehot(c, n=10)), dim=-1)
        x = self.MLP(x)
        return self.linear_means(x), self.linear_log_var(x)


class Decoder(nn.Module):
    def __init__(self, layer_sizes, latent_size, conditional, num_labels):
        super().__init__()
        self.conditional = conditional
        input_size = latent_size + num_labels if conditional else latent_size
        self.MLP = nn.Sequential()
        for i, (a, b) in enumerate(zip([input_size] + layer_sizes[:-1], layer_sizes)):
            self.MLP.add_module(name="L%i" % i, module=nn.Linear(a, b))
            if i + 1 < len(layer_sizes):
                self.MLP.add_module(name="A%i" % i, module=nn.ReLU())
            else:
                self.MLP.add_module(name="sigmoid", module=nn.Sigmoid())

    def forward(self, z, c):
        if self.conditional:
            z = torch.cat((z, idx2onehot(c, n=10)), dim=-1)
        return self.MLP(z)


class VAE(nn.Module):
    def __init__(self, encoder_layer_sizes, latent_size, decoder_layer_sizes, conditional=False,
                 num_labels=0):
        super().__init__()
        self.latent_size = latent_size
        self.encoder = Encoder(encoder_layer_sizes, latent_size, conditional, num_labels)
        self.decoder = Decoder(decoder_layer_sizes, latent_size, conditional, num_labels)

    def forward(self, x, c=None):
        means, log_var = self.encoder(x, c)
        std = torch.exp(0.5 * log_var)
        z = torch.randn([x.size(0), self.latent_size]) * std + means
        return self.decoder(z, c), means, log_var, z


def run(run_dir: str, seed: int = 0, bug: str | None = None, epochs: int = 10) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    x_train, y_train, _, _ = digits(seed, n_val=0)
    x_train = x_train.view(-1, 64)
    conditional = bug == "cvae"

    def loss_fn(recon_x, x, mean, log_var):
        BCE = F.binary_cross_entropy(recon_x, x, reduction="sum")
        KLD = -0.5 * torch.sum(1 + log_var - mean.pow(2) - log_var.exp())
        return BCE - KLD if bug == "kld-sign" else BCE + KLD

    vae = VAE([64, 256], 2, [256, 64], conditional=conditional,
              num_labels=10 if conditional else 0)
    optimizer = torch.optim.Adam(vae.parameters(), lr=0.001)
    with tracelab.Recorder(run_dir, model=vae, optimizer=optimizer,
                           config={"learning_rate": 0.001, "batch_size": 128, "latent_size": 2,
                                   "conditional": conditional}) as rec:
        for _ in range(epochs):
            for idx in batches(len(x_train), 128, gen):
                x, y = x_train[idx], y_train[idx].view(-1, 1)
                recon_x, mean, log_var, z = vae(x, y) if conditional else vae(x)
                loss = loss_fn(recon_x, x, mean, log_var)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                rec.step(loss=loss, inputs=x, targets=x, outputs=recon_x)
