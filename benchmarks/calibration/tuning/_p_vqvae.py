"""ritheshkumar95/pytorch-vqvae vqvae.py + modules.py + functions.py, shrunk: the
VectorQuantizedVAE (conv encoder with BatchNorm and two ResBlocks, VQEmbedding codebook with the
straight-through VectorQuantizationStraightThrough function, ResBlock / ConvTranspose2d decoder
ending in Tanh, xavier init of the convolutions), the loss mse(x_tilde, x) + mse(z_q, sg(z_e)) +
beta * mse(z_e, sg(z_q)) with beta 1.0, Adam(lr=1e-3; --lr, the default 2e-4 leaves the codebook far
behind the encoder in a run this short), batch 128 (unshuffled, as the
script's loader), train() / test() as published (test() under no_grad without model.eval(), as
in the script). Sizes: hidden_size 32 and K 64 (instead of 256 and 512); the data is
scikit-learn's 8x8 digits upsampled to 16x16, ToTensor() + Normalize((0.5,), (0.5,)) as the
script's MNIST transform; 12 epochs.

`bug` (None: the script as published):
- "decode-codes": the decoder is fed the codebook lookup z_q_x instead of the straight-through
  z_q_x_st, so no reconstruction gradient reaches the encoder (only the commitment term does).
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.autograd import Function

import tracelab
from _p_data import digits

SOURCE = ("https://github.com/ritheshkumar95/pytorch-vqvae/blob/"
          "8d123c0d043bebc8734d37785dd13dd20e7e5e0e/vqvae.py")
BUGS = (None, "decode-codes")


def vq(inputs, codebook):
    with torch.no_grad():
        embedding_size = codebook.size(1)
        inputs_flatten = inputs.reshape(-1, embedding_size)
        codebook_sqr = torch.sum(codebook ** 2, dim=1)
        inputs_sqr = torch.sum(inputs_flatten ** 2, dim=1, keepdim=True)
        distances = torch.addmm(codebook_sqr + inputs_sqr, inputs_flatten, codebook.t(),
                                alpha=-2.0, beta=1.0)
        _, indices_flatten = torch.min(distances, dim=1)
        return indices_flatten.view(*inputs.size()[:-1])


class VectorQuantizationStraightThrough(Function):
    @staticmethod
    def forward(ctx, inputs, codebook):
        indices_flatten = vq(inputs, codebook).view(-1)
        ctx.save_for_backward(indices_flatten, codebook)
        ctx.mark_non_differentiable(indices_flatten)
        codes = torch.index_select(codebook, dim=0, index=indices_flatten).view_as(inputs)
        return codes, indices_flatten

    @staticmethod
    def backward(ctx, grad_output, grad_indices):
        grad_inputs, grad_codebook = None, None
        if ctx.needs_input_grad[0]:
            grad_inputs = grad_output.clone()
        if ctx.needs_input_grad[1]:
            indices, codebook = ctx.saved_tensors
            grad_codebook = torch.zeros_like(codebook)
            grad_codebook.index_add_(0, indices, grad_output.contiguous().view(-1, codebook.size(1)))
        return grad_inputs, grad_codebook


vq_st = VectorQuantizationStraightThrough.apply


def weights_init(m):
    if m.__class__.__name__.find("Conv") != -1:
        nn.init.xavier_uniform_(m.weight.data)
        m.bias.data.fill_(0)


class VQEmbedding(nn.Module):
    def __init__(self, K, D):
        super().__init__()
        self.embedding = nn.Embedding(K, D)
        self.embedding.weight.data.uniform_(-1.0 / K, 1.0 / K)

    def straight_through(self, z_e_x):
        z_e_x_ = z_e_x.permute(0, 2, 3, 1).contiguous()
        z_q_x_, indices = vq_st(z_e_x_, self.embedding.weight.detach())
        z_q_x = z_q_x_.permute(0, 3, 1, 2).contiguous()
        z_q_x_bar = torch.index_select(self.embedding.weight, dim=0, index=indices)
        z_q_x_bar = z_q_x_bar.view_as(z_e_x_).permute(0, 3, 1, 2).contiguous()
        return z_q_x, z_q_x_bar


class ResBlock(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.block = nn.Sequential(nn.ReLU(True), nn.Conv2d(dim, dim, 3, 1, 1),
                                   nn.BatchNorm2d(dim), nn.ReLU(True), nn.Conv2d(dim, dim, 1),
                                   nn.BatchNorm2d(dim))

    def forward(self, x):
        return x + self.block(x)


class VectorQuantizedVAE(nn.Module):
    def __init__(self, input_dim, dim, K=512):
        super().__init__()
        self.encoder = nn.Sequential(
            nn.Conv2d(input_dim, dim, 4, 2, 1), nn.BatchNorm2d(dim), nn.ReLU(True),
            nn.Conv2d(dim, dim, 4, 2, 1), ResBlock(dim), ResBlock(dim))
        self.codebook = VQEmbedding(K, dim)
        self.decoder = nn.Sequential(
            ResBlock(dim), ResBlock(dim), nn.ReLU(True),
            nn.ConvTranspose2d(dim, dim, 4, 2, 1), nn.BatchNorm2d(dim), nn.ReLU(True),
            nn.ConvTranspose2d(dim, input_dim, 4, 2, 1), nn.Tanh())
        self.apply(weights_init)

    def forward(self, x, st=True):
        z_e_x = self.encoder(x)
        z_q_x_st, z_q_x = self.codebook.straight_through(z_e_x)
        x_tilde = self.decoder(z_q_x_st if st else z_q_x)
        return x_tilde, z_e_x, z_q_x, z_q_x_st


def _prep(images):
    x = F.interpolate(images.float() / 255.0, size=(16, 16), mode="bilinear",
                      align_corners=False)
    return (x - 0.5) / 0.5


def run(run_dir: str, seed: int = 0, bug: str | None = None, num_epochs: int = 12) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    x_tr, _, x_va, _ = digits(seed)
    x_tr, x_va = _prep(x_tr), _prep(x_va)
    lr, beta, batch_size, hidden_size, k = 1e-3, 1.0, 128, 32, 64
    model = VectorQuantizedVAE(1, hidden_size, k)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    with tracelab.Recorder(run_dir, model=model, optimizer=optimizer,
                           config={"lr": lr, "beta": beta, "batch_size": batch_size,
                                   "hidden_size": hidden_size, "k": k}) as rec:
        for epoch in range(num_epochs):
            for images in x_tr.split(batch_size):
                optimizer.zero_grad()
                x_tilde, z_e_x, z_q_x, _ = model(images, st=bug != "decode-codes")
                loss_recons = F.mse_loss(x_tilde, images)
                loss_vq = F.mse_loss(z_q_x, z_e_x.detach())
                loss_commit = F.mse_loss(z_e_x, z_q_x.detach())
                loss = loss_recons + loss_vq + beta * loss_commit
                loss.backward()
                optimizer.step()
                rec.step(loss=loss, inputs=images, targets=images, outputs=x_tilde,
                         metrics={"reconstruction": loss_recons.item(),
                                  "quantization": loss_vq.item()})
            with torch.no_grad():
                v_recons, v_vq, n = 0.0, 0.0, 0
                for images in x_va.split(batch_size):
                    if len(images) < batch_size:
                        continue  # drop_last=True
                    x_tilde, z_e_x, z_q_x, _ = model(images)
                    v_recons += F.mse_loss(x_tilde, images).item()
                    v_vq += F.mse_loss(z_q_x, z_e_x).item()
                    n += 1
            rec.log("val", metrics={"reconstruction": v_recons / n, "quantization": v_vq / n},
                    inputs=images, targets=images, outputs=x_tilde)
    print(f"    vqvae bug={bug}: val reconstruction {v_recons / n:.4f}")
