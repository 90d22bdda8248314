"""eriklindernoren/PyTorch-GAN implementations/gan/gan.py, wgan_gp/wgan_gp.py and cgan/cgan.py,
shrunk: the same MLP Generator (Linear blocks with BatchNorm1d(out, 0.8) -- eps 0.8 as published
-- and LeakyReLU(0.2), Tanh out) and MLP Discriminator (gan: Sigmoid + BCELoss; wgan_gp: a critic
with no sigmoid, -mean(real) + mean(fake) + 10 * gradient penalty, the generator trained every
n_critic=5 batches; cgan: label embeddings concatenated to noise and image, Dropout(0.4) in the
discriminator, MSELoss), Adam(lr=2e-4, betas=(0.5, 0.999)) for each network, batch 64 shuffled,
the loops' order of updates as published. The data is scikit-learn's 8x8 digits normalized to
[-1, 1] (Normalize([0.5], [0.5])); latent_dim 32 for 100 and hidden widths halved
(G 64-128-256-512, D 256-128; cgan D 256-256-256) to fit a few CPU seconds. Each epoch ends
with a check on held-out digits recorded as the validation split: the distance between the
pixel means of 297 generated and 297 held-out images, and (gan, cgan) the discriminator's
accuracy on those real vs generated images.

`variant` picks the script: "gan", "wgan_gp" or "cgan". No bug is planted (healthy runs)."""
from __future__ import annotations

import numpy as np
import torch
from torch import autograd, nn

import tracelab
from _e_data import batches, digits01

COMMIT = "36d3c77e5ff20ebe0aeefd322326a134a279b93e"
SOURCES = {v: (f"https://github.com/eriklindernoren/PyTorch-GAN/blob/{COMMIT}/"
               f"implementations/{v}/{v}.py")
           for v in ("gan", "wgan_gp", "cgan")}
LATENT, N_CLASSES, IMG = 32, 10, (1, 8, 8)
IMG_N = int(np.prod(IMG))


def _block(in_feat, out_feat, normalize=True):
    layers = [nn.Linear(in_feat, out_feat)]
    if normalize:
        layers.append(nn.BatchNorm1d(out_feat, 0.8))
    layers.append(nn.LeakyReLU(0.2, inplace=True))
    return layers


class Generator(nn.Module):
    def __init__(self, conditional=False):
        super().__init__()
        self.conditional = conditional
        if conditional:
            self.label_emb = nn.Embedding(N_CLASSES, N_CLASSES)
        in_dim = LATENT + (N_CLASSES if conditional else 0)
        self.model = nn.Sequential(*_block(in_dim, 64, normalize=False), *_block(64, 128),
                                   *_block(128, 256), *_block(256, 512),
                                   nn.Linear(512, IMG_N), nn.Tanh())

    def forward(self, z, labels=None):
        if self.conditional:
            z = torch.cat((self.label_emb(labels), z), -1)
        img = self.model(z)
        return img.view(img.size(0), *IMG)


class Discriminator(nn.Module):
    def __init__(self, sigmoid=True):
        super().__init__()
        layers = [nn.Linear(IMG_N, 256), nn.LeakyReLU(0.2, inplace=True),
                  nn.Linear(256, 128), nn.LeakyReLU(0.2, inplace=True), nn.Linear(128, 1)]
        if sigmoid:
            layers.append(nn.Sigmoid())
        self.model = nn.Sequential(*layers)

    def forward(self, img):
        return self.model(img.view(img.shape[0], -1))


class CDiscriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.label_embedding = nn.Embedding(N_CLASSES, N_CLASSES)
        self.model = nn.Sequential(
            nn.Linear(N_CLASSES + IMG_N, 256), nn.LeakyReLU(0.2, inplace=True),
            nn.Linear(256, 256), nn.Dropout(0.4), nn.LeakyReLU(0.2, inplace=True),
            nn.Linear(256, 256), nn.Dropout(0.4), nn.LeakyReLU(0.2, inplace=True),
            nn.Linear(256, 1))

    def forward(self, img, labels):
        d_in = torch.cat((img.view(img.size(0), -1), self.label_embedding(labels)), -1)
        return self.model(d_in)


def compute_gradient_penalty(D, real_samples, fake_samples, rng):
    alpha = torch.from_numpy(rng.random((real_samples.size(0), 1, 1, 1)).astype(np.float32))
    interpolates = (alpha * real_samples + ((1 - alpha) * fake_samples)).requires_grad_(True)
    d_interpolates = D(interpolates)
    fake = torch.ones(real_samples.shape[0], 1)
    gradients = autograd.grad(outputs=d_interpolates, inputs=interpolates, grad_outputs=fake,
                              create_graph=True, retain_graph=True, only_inputs=True)[0]
    gradients = gradients.view(gradients.size(0), -1)
    return ((gradients.norm(2, dim=1) - 1) ** 2).mean()


def run(run_dir: str, seed: int = 0, variant: str = "gan", epochs: int = 20,
        lr: float = 2e-4, n_critic: int = 5) -> None:
    assert variant in SOURCES, variant
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    gen = torch.Generator().manual_seed(seed)
    x_train, y_train, x_val, y_val = digits01(seed)
    x_train, x_val = (x_train - 0.5) / 0.5, (x_val - 0.5) / 0.5
    generator = Generator(conditional=variant == "cgan")
    if variant == "cgan":
        discriminator = CDiscriminator()
        adversarial_loss = nn.MSELoss()
    else:
        discriminator = Discriminator(sigmoid=variant == "gan")
        adversarial_loss = nn.BCELoss() if variant == "gan" else None
    optimizer_G = torch.optim.Adam(generator.parameters(), lr=lr, betas=(0.5, 0.999))
    optimizer_D = torch.optim.Adam(discriminator.parameters(), lr=lr, betas=(0.5, 0.999))
    model = nn.ModuleDict({"G": generator, "D": discriminator})
    config = {"lr": lr, "b1": 0.5, "b2": 0.999, "batch_size": 64, "latent_dim": LATENT}
    if variant == "wgan_gp":
        config.update(n_critic=n_critic, lambda_gp=10)
    with tracelab.Recorder(run_dir, model=model, optimizer={"G": optimizer_G, "D": optimizer_D},
                           loss_fn=adversarial_loss, config=config) as rec:
        for _ in range(epochs):
            for i, idx in enumerate(batches(len(x_train), 64, gen)):
                real_imgs, labels = x_train[idx], y_train[idx]
                n = real_imgs.size(0)
                valid, fake = torch.ones(n, 1), torch.zeros(n, 1)
                z = torch.from_numpy(rng.normal(0, 1, (n, LATENT)).astype(np.float32))
                if variant == "gan":
                    optimizer_G.zero_grad()
                    gen_imgs = generator(z)
                    g_loss = adversarial_loss(discriminator(gen_imgs), valid)
                    g_loss.backward()
                    optimizer_G.step()
                    optimizer_D.zero_grad()
                    out_real = discriminator(real_imgs)
                    real_loss = adversarial_loss(out_real, valid)
                    fake_loss = adversarial_loss(discriminator(gen_imgs.detach()), fake)
                    d_loss = (real_loss + fake_loss) / 2
                    d_loss.backward()
                    optimizer_D.step()
                    rec.step(loss=g_loss, inputs=real_imgs, outputs=out_real, targets=valid,
                             metrics={"loss_D": d_loss})
                elif variant == "cgan":
                    optimizer_G.zero_grad()
                    gen_labels = torch.from_numpy(rng.integers(0, N_CLASSES, n))
                    gen_imgs = generator(z, gen_labels)
                    g_loss = adversarial_loss(discriminator(gen_imgs, gen_labels), valid)
                    g_loss.backward()
                    optimizer_G.step()
                    optimizer_D.zero_grad()
                    validity_real = discriminator(real_imgs, labels)
                    d_real_loss = adversarial_loss(validity_real, valid)
                    d_fake_loss = adversarial_loss(discriminator(gen_imgs.detach(), gen_labels),
                                                   fake)
                    d_loss = (d_real_loss + d_fake_loss) / 2
                    d_loss.backward()
                    optimizer_D.step()
                    rec.step(loss=g_loss, inputs=(real_imgs, labels), outputs=validity_real,
                             targets=valid, metrics={"loss_D": d_loss})
                else:
                    optimizer_D.zero_grad()
                    fake_imgs = generator(z)
                    real_validity = discriminator(real_imgs)
                    fake_validity = discriminator(fake_imgs)
                    gradient_penalty = compute_gradient_penalty(discriminator, real_imgs.data,
                                                                fake_imgs.data, rng)
                    d_loss = (-torch.mean(real_validity) + torch.mean(fake_validity)
                              + 10 * gradient_penalty)
                    d_loss.backward()
                    optimizer_D.step()
                    optimizer_G.zero_grad()
                    metrics = {"gradient_penalty": gradient_penalty}
                    if i % n_critic == 0:
                        fake_imgs = generator(z)
                        g_loss = -torch.mean(discriminator(fake_imgs))
                        g_loss.backward()
                        optimizer_G.step()
                        metrics["loss_G"] = g_loss
                    rec.step(loss=d_loss, inputs=real_imgs, metrics=metrics)
            _validate(rec, generator, discriminator, variant, x_val, y_val, rng)


def _validate(rec, generator, discriminator, variant, x_val, y_val, rng):
    generator.eval()
    discriminator.eval()
    with torch.no_grad():
        n = len(x_val)
        z = torch.from_numpy(rng.normal(0, 1, (n, LATENT)).astype(np.float32))
        if variant == "cgan":
            fake = generator(z, y_val)
            d_real, d_fake = discriminator(x_val, y_val), discriminator(fake, y_val)
            thr = 0.5
        else:
            fake = generator(z)
            d_real, d_fake = discriminator(x_val), discriminator(fake)
            thr = 0.5 if variant == "gan" else float(torch.cat([d_real, d_fake]).median())
        mean_gap = float((fake.mean(0) - x_val.mean(0)).norm())
        d_acc = float(((d_real > thr).float().mean() + (d_fake <= thr).float().mean()) / 2)
    rec.log("val", metrics={"mean_gap": mean_gap, "d_acc": d_acc}, inputs=x_val)
    generator.train()
    discriminator.train()
