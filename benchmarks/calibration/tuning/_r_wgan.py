"""EmilienDupont/wgan-gp (models.py, training.py, main.py), shrunk: its Generator (Linear +
ReLU to 8*dim features, four ConvTranspose2d(4, 2, 1) with ReLU and BatchNorm2d, Sigmoid) and
Discriminator (four Conv2d(4, 2, 1) with LeakyReLU(0.2) then Sigmoid, Linear + Sigmoid), the
Trainer (critic loss d_generated.mean() - d_real.mean() + gradient penalty with gp_weight=10 on
random interpolates, the generator updated every critic_iterations=5 critic steps with
g_loss = -d_generated.mean()), two Adam(betas=(.5, .9)), lr 1e-4 -> 1e-3 for the short run. img_size (32, 32, 1) ->
(16, 16, 1), dim 16 -> 8, latent_dim 100 -> 16; the data is scikit-learn's digits upsampled to
16x16 and ToTensor()-scaled in place of MNIST, batch 64. After each epoch a fixed batch of
samples is compared with the real images (pixel mean and spread).

`bug` plants one fault (None: the script as published):
- "detach-g": the generator step samples its images with .detach(), so g_loss.backward()
  reaches only the critic and the generator never moves.
"""
from __future__ import annotations

import torch
import torch.nn as nn
from torch.autograd import grad as torch_grad

import tracelab
from _r_data import batches, digits, to_tensor

SOURCE = ("https://github.com/EmilienDupont/wgan-gp/blob/50361ca47d260f9585f557b84c136c2e417030d1/"
          "training.py")
BUGS = (None, "detach-g")


class Generator(nn.Module):
    def __init__(self, img_size, latent_dim, dim):
        super().__init__()
        self.dim = dim
        self.latent_dim = latent_dim
        self.img_size = img_size
        self.feature_sizes = (self.img_size[0] // 16, self.img_size[1] // 16)
        self.latent_to_features = nn.Sequential(
            nn.Linear(latent_dim, 8 * dim * self.feature_sizes[0] * self.feature_sizes[1]),
            nn.ReLU()
        )
        self.features_to_image = nn.Sequential(
            nn.ConvTranspose2d(8 * dim, 4 * dim, 4, 2, 1),
            nn.ReLU(),
            nn.BatchNorm2d(4 * dim),
            nn.ConvTranspose2d(4 * dim, 2 * dim, 4, 2, 1),
            nn.ReLU(),
            nn.BatchNorm2d(2 * dim),
            nn.ConvTranspose2d(2 * dim, dim, 4, 2, 1),
            nn.ReLU(),
            nn.BatchNorm2d(dim),
            nn.ConvTranspose2d(dim, self.img_size[2], 4, 2, 1),
            nn.Sigmoid()
        )

    def forward(self, input_data):
        x = self.latent_to_features(input_data)
        x = x.view(-1, 8 * self.dim, self.feature_sizes[0], self.feature_sizes[1])
        return self.features_to_image(x)

    def sample_latent(self, num_samples):
        return torch.randn((num_samples, self.latent_dim))


class Discriminator(nn.Module):
    def __init__(self, img_size, dim):
        super().__init__()
        self.img_size = img_size
        self.image_to_features = nn.Sequential(
            nn.Conv2d(self.img_size[2], dim, 4, 2, 1),
            nn.LeakyReLU(0.2),
            nn.Conv2d(dim, 2 * dim, 4, 2, 1),
            nn.LeakyReLU(0.2),
            nn.Conv2d(2 * dim, 4 * dim, 4, 2, 1),
            nn.LeakyReLU(0.2),
            nn.Conv2d(4 * dim, 8 * dim, 4, 2, 1),
            nn.Sigmoid()
        )
        output_size = 8 * dim * (img_size[0] // 16) * (img_size[1] // 16)
        self.features_to_prob = nn.Sequential(
            nn.Linear(output_size, 1),
            nn.Sigmoid()
        )

    def forward(self, input_data):
        batch_size = input_data.size()[0]
        x = self.image_to_features(input_data)
        x = x.view(batch_size, -1)
        return self.features_to_prob(x)


class Trainer:
    def __init__(self, generator, discriminator, gen_optimizer, dis_optimizer, rec, bug,
                 gp_weight=10, critic_iterations=5):
        self.G, self.G_opt = generator, gen_optimizer
        self.D, self.D_opt = discriminator, dis_optimizer
        self.rec, self.bug = rec, bug
        self.num_steps = 0
        self.gp_weight = gp_weight
        self.critic_iterations = critic_iterations
        self.last_g = None

    def _critic_train_iteration(self, data):
        batch_size = data.size()[0]
        generated_data = self.sample_generator(batch_size)
        d_real = self.D(data)
        d_generated = self.D(generated_data)
        gradient_penalty, grad_norm = self._gradient_penalty(data, generated_data)
        self.D_opt.zero_grad()
        d_loss = d_generated.mean() - d_real.mean() + gradient_penalty
        d_loss.backward()
        self.D_opt.step()
        return d_loss, gradient_penalty, grad_norm, d_real

    def _generator_train_iteration(self, data):
        self.G_opt.zero_grad()
        batch_size = data.size()[0]
        generated_data = self.sample_generator(batch_size)
        if self.bug == "detach-g":
            generated_data = generated_data.detach()
        d_generated = self.D(generated_data)
        g_loss = - d_generated.mean()
        g_loss.backward()
        self.G_opt.step()
        return g_loss

    def _gradient_penalty(self, real_data, generated_data):
        batch_size = real_data.size()[0]
        alpha = torch.rand(batch_size, 1, 1, 1)
        alpha = alpha.expand_as(real_data)
        interpolated = alpha * real_data.data + (1 - alpha) * generated_data.data
        interpolated.requires_grad_(True)
        prob_interpolated = self.D(interpolated)
        gradients = torch_grad(outputs=prob_interpolated, inputs=interpolated,
                               grad_outputs=torch.ones(prob_interpolated.size()),
                               create_graph=True, retain_graph=True)[0]
        gradients = gradients.view(batch_size, -1)
        gradients_norm = torch.sqrt(torch.sum(gradients ** 2, dim=1) + 1e-12)
        return self.gp_weight * ((gradients_norm - 1) ** 2).mean(), gradients.norm(2, dim=1).mean()

    def _train_epoch(self, images, gen):
        for idx in batches(len(images), 64, gen):
            data = images[idx]
            self.num_steps += 1
            d_loss, gp, grad_norm, d_real = self._critic_train_iteration(data)
            if self.num_steps % self.critic_iterations == 0:
                self.last_g = self._generator_train_iteration(data)
            metrics = {"GP": gp, "gradient_norm": grad_norm}
            if self.last_g is not None:
                metrics["G"] = self.last_g
            self.rec.step(loss=d_loss, inputs=data, outputs=d_real, metrics=metrics)

    def sample_generator(self, num_samples):
        return self.G(self.G.sample_latent(num_samples))


def run(run_dir: str, seed: int = 0, bug: str | None = None, epochs: int = 8) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    x_train, _, _, _ = digits(seed, n_val=0, size=16)
    images = to_tensor(x_train)
    img_size = (16, 16, 1)
    generator = Generator(img_size=img_size, latent_dim=16, dim=8)
    discriminator = Discriminator(img_size=img_size, dim=8)
    lr, betas = 1e-3, (.5, .9)
    G_optimizer = torch.optim.Adam(generator.parameters(), lr=lr, betas=betas)
    D_optimizer = torch.optim.Adam(discriminator.parameters(), lr=lr, betas=betas)
    fixed_latents = generator.sample_latent(256)
    real_mean, real_std = images.mean().item(), images.std().item()
    model = nn.ModuleDict({"G": generator, "D": discriminator})
    with tracelab.Recorder(run_dir, model=model, optimizer={"G": G_optimizer, "D": D_optimizer},
                           config={"lr": lr, "betas": betas, "gp_weight": 10,
                                   "critic_iterations": 5, "batch_size": 64}) as rec:
        trainer = Trainer(generator, discriminator, G_optimizer, D_optimizer, rec, bug)
        for _ in range(epochs):
            generator.train()
            trainer._train_epoch(images, gen)
            generator.eval()
            with torch.no_grad():
                fake = generator(fixed_latents)
            rec.log("val", metrics={"fake_mean": fake.mean().item(), "fake_std": fake.std().item(),
                                    "mean_gap": abs(fake.mean().item() - real_mean),
                                    "std_gap": abs(fake.std().item() - real_std)})
