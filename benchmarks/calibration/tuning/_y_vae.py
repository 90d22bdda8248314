"""Jackson-Kang/Pytorch-VAE-tutorial 01_Variational_AutoEncoder.ipynb, shrunk: its Gaussian MLP
Encoder (FC_input, FC_input2 with LeakyReLU(0.2), FC_mean and FC_var giving the log-variance),
Decoder (two LeakyReLU(0.2) hidden layers, sigmoid output) and Model (reparameterization
z = mean + std * epsilon), the loss binary_cross_entropy(x_hat, x, reduction='sum') -
0.5 * sum(1 + log_var - mean^2 - exp(log_var)) summed over the batch, Adam(lr=1e-3), batch 100
(x.view(batch_size, x_dim), so full batches), model.train(). MNIST is replaced by scikit-learn's
8x8 digits as 0-1 pixels (ToTensor()), so x_dim is 64; hidden_dim 128 and latent_dim 16 instead
of 400 and 200; 15 epochs instead of 30; the test loss per image is logged after each epoch
(model.eval()).

`bug` plants one fault (None: the notebook as published):
- "kld-sign": KLD = + 0.5 * sum(1 + log_var - mean^2 - exp(log_var)), the sign flipped, so the
  KL term is maximized instead of minimized.
"""
from __future__ import annotations

import torch
import torch.nn as nn
from torch.optim import Adam

import tracelab
from _y_data import batches, digits, to_tensor

SOURCE = ("https://github.com/Jackson-Kang/Pytorch-VAE-tutorial/blob/"
          "ae227c560ee09a92c9e57088d093022882327b46/01_Variational_AutoEncoder.ipynb")
BUGS = (None, "kld-sign")
batch_size, x_dim, hidden_dim, latent_dim, lr, epochs = 100, 64, 128, 16, 1e-3, 15


class Encoder(nn.Module):
    def __init__(self, input_dim, hidden_dim, latent_dim):
        super().__init__()
        self.FC_input = nn.Linear(input_dim, hidden_dim)
        self.FC_input2 = nn.Linear(hidden_dim, hidden_dim)
        self.FC_mean = nn.Linear(hidden_dim, latent_dim)
        self.FC_var = nn.Linear(hidden_dim, latent_dim)
        self.LeakyReLU = nn.LeakyReLU(0.2)

    def forward(self, x):
        h_ = self.LeakyReLU(self.FC_input(x))
        h_ = self.LeakyReLU(self.FC_input2(h_))
        return self.FC_mean(h_), self.FC_var(h_)


class Decoder(nn.Module):
    def __init__(self, latent_dim, hidden_dim, output_dim):
        super().__init__()
        self.FC_hidden = nn.Linear(latent_dim, hidden_dim)
        self.FC_hidden2 = nn.Linear(hidden_dim, hidden_dim)
        self.FC_output = nn.Linear(hidden_dim, output_dim)
        self.LeakyReLU = nn.LeakyReLU(0.2)

    def forward(self, x):
        h = self.LeakyReLU(self.FC_hidden(x))
        h = self.LeakyReLU(self.FC_hidden2(h))
        return torch.sigmoid(self.FC_output(h))


class Model(nn.Module):
    def __init__(self, Encoder, Decoder):
        super().__init__()
        self.Encoder = Encoder
        self.Decoder = Decoder

    def reparameterization(self, mean, var):
        epsilon = torch.randn_like(var)
        return mean + var * epsilon

    def forward(self, x):
        mean, log_var = self.Encoder(x)
        z = self.reparameterization(mean, torch.exp(0.5 * log_var))
        return self.Decoder(z), mean, log_var


def loss_function(x, x_hat, mean, log_var, bug=None):
    reproduction_loss = nn.functional.binary_cross_entropy(x_hat, x, reduction='sum')
    KLD = - 0.5 * torch.sum(1 + log_var - mean.pow(2) - log_var.exp())
    if bug == "kld-sign":
        KLD = -KLD
    return reproduction_loss + KLD


def run(run_dir: str, seed: int = 0, bug: str | None = None) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    x_train, _, x_test, _ = digits(seed)
    x_train, x_test = to_tensor(x_train), to_tensor(x_test)
    encoder = Encoder(input_dim=x_dim, hidden_dim=hidden_dim, latent_dim=latent_dim)
    decoder = Decoder(latent_dim=latent_dim, hidden_dim=hidden_dim, output_dim=x_dim)
    model = Model(Encoder=encoder, Decoder=decoder)
    optimizer = Adam(model.parameters(), lr=lr)
    with tracelab.Recorder(run_dir, model=model, optimizer=optimizer,
                           config={"lr": lr, "batch_size": batch_size, "latent_dim": latent_dim,
                                   "epochs": epochs}) as rec:
        model.train()
        for _ in range(epochs):
            for idx in batches(len(x_train), batch_size, gen, drop_last=True):
                x = x_train[idx].view(batch_size, x_dim)
                optimizer.zero_grad()
                x_hat, mean, log_var = model(x)
                loss = loss_function(x, x_hat, mean, log_var, bug)
                loss.backward()
                optimizer.step()
                rec.step(loss=loss, inputs=x, targets=x, outputs=x_hat)
            model.eval()
            with torch.no_grad():
                xt = x_test.view(len(x_test), x_dim)
                x_hat, mean, log_var = model(xt)
                test_loss = loss_function(xt, x_hat, mean, log_var, bug).item() / len(xt)
                bce = nn.functional.binary_cross_entropy(x_hat, xt, reduction='sum').item()
            rec.log("val", metrics={"loss": test_loss, "recon_bce": bce / len(xt)}, inputs=xt,
                    targets=xt, outputs=x_hat)
            model.train()
