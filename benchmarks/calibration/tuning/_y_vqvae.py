"""zalandoresearch/pytorch-vq-vae vq-vae.ipynb, shrunk: its Model (Encoder of two stride-2
4x4 convolutions, a 3x3 convolution and a ResidualStack; a 1x1 _pre_vq_conv; the VectorQuantizer
with the straight-through estimator and q_latent + commitment_cost * e_latent loss -- the
notebook's decay=0 variant; the Decoder of a 3x3 convolution, a ResidualStack and two
ConvTranspose2d), the loss F.mse_loss(data_recon, data) / data_variance + vq_loss,
optim.Adam(lr=1e-3, amsgrad=False), model.train(), a fresh random batch each update. CIFAR-10 is
replaced by scikit-learn's 8x8 digits as 3-channel 16x16 images, transformed as the notebook
does (ToTensor() then Normalize((0.5, 0.5, 0.5), (1.0, 1.0, 1.0))), data_variance the variance of
the training pixels in 0-1; sizes shrink to num_hiddens 32, num_residual_hiddens 8, 2 residual
layers, embedding_dim 16, 64 embeddings, batch 64, 200 updates; the validation reconstruction
error is logged every 25 updates (model.eval(), the validation transform).

`bug` plants one fault (None: the notebook as published):
- "decoder-not-in-optimizer": the Adam optimizer gets the encoder's, _pre_vq_conv's and the
  quantizer's parameters but not the decoder's;
- "val-unnormalized": the validation transform lacks Normalize() (pixels in 0-1 where training
  saw -0.5-0.5).
"""
from __future__ import annotations

import itertools

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim

import tracelab
from _y_data import digits, to_tensor

SOURCE = ("https://github.com/zalandoresearch/pytorch-vq-vae/blob/"
          "b98fde9a8f8f65486dbfaf12958049e8d33184a1/vq-vae.ipynb")
BUGS = (None, "decoder-not-in-optimizer", "val-unnormalized")

batch_size, num_training_updates = 64, 200
num_hiddens, num_residual_hiddens, num_residual_layers = 32, 8, 2
embedding_dim, num_embeddings, commitment_cost, learning_rate = 16, 64, 0.25, 1e-3


class VectorQuantizer(nn.Module):
    def __init__(self, num_embeddings, embedding_dim, commitment_cost):
        super().__init__()
        self._embedding_dim = embedding_dim
        self._num_embeddings = num_embeddings
        self._embedding = nn.Embedding(self._num_embeddings, self._embedding_dim)
        self._embedding.weight.data.uniform_(-1 / self._num_embeddings, 1 / self._num_embeddings)
        self._commitment_cost = commitment_cost

    def forward(self, inputs):
        inputs = inputs.permute(0, 2, 3, 1).contiguous()
        input_shape = inputs.shape
        flat_input = inputs.view(-1, self._embedding_dim)
        distances = (torch.sum(flat_input ** 2, dim=1, keepdim=True)
                     + torch.sum(self._embedding.weight ** 2, dim=1)
                     - 2 * torch.matmul(flat_input, self._embedding.weight.t()))
        encoding_indices = torch.argmin(distances, dim=1).unsqueeze(1)
        encodings = torch.zeros(encoding_indices.shape[0], self._num_embeddings)
        encodings.scatter_(1, encoding_indices, 1)
        quantized = torch.matmul(encodings, self._embedding.weight).view(input_shape)
        e_latent_loss = F.mse_loss(quantized.detach(), inputs)
        q_latent_loss = F.mse_loss(quantized, inputs.detach())
        loss = q_latent_loss + self._commitment_cost * e_latent_loss
        quantized = inputs + (quantized - inputs).detach()
        avg_probs = torch.mean(encodings, dim=0)
        perplexity = torch.exp(-torch.sum(avg_probs * torch.log(avg_probs + 1e-10)))
        return loss, quantized.permute(0, 3, 1, 2).contiguous(), perplexity, encodings


class Residual(nn.Module):
    def __init__(self, in_channels, num_hiddens, num_residual_hiddens):
        super().__init__()
        self._block = nn.Sequential(
            nn.ReLU(True),
            nn.Conv2d(in_channels, num_residual_hiddens, kernel_size=3, stride=1, padding=1,
                      bias=False),
            nn.ReLU(True),
            nn.Conv2d(num_residual_hiddens, num_hiddens, kernel_size=1, stride=1, bias=False))

    def forward(self, x):
        return x + self._block(x)


class ResidualStack(nn.Module):
    def __init__(self, in_channels, num_hiddens, num_residual_layers, num_residual_hiddens):
        super().__init__()
        self._num_residual_layers = num_residual_layers
        self._layers = nn.ModuleList([Residual(in_channels, num_hiddens, num_residual_hiddens)
                                      for _ in range(self._num_residual_layers)])

    def forward(self, x):
        for i in range(self._num_residual_layers):
            x = self._layers[i](x)
        return F.relu(x)


class Encoder(nn.Module):
    def __init__(self, in_channels, num_hiddens, num_residual_layers, num_residual_hiddens):
        super().__init__()
        self._conv_1 = nn.Conv2d(in_channels, num_hiddens // 2, kernel_size=4, stride=2,
                                 padding=1)
        self._conv_2 = nn.Conv2d(num_hiddens // 2, num_hiddens, kernel_size=4, stride=2,
                                 padding=1)
        self._conv_3 = nn.Conv2d(num_hiddens, num_hiddens, kernel_size=3, stride=1, padding=1)
        self._residual_stack = ResidualStack(num_hiddens, num_hiddens, num_residual_layers,
                                             num_residual_hiddens)

    def forward(self, inputs):
        x = F.relu(self._conv_1(inputs))
        x = F.relu(self._conv_2(x))
        return self._residual_stack(self._conv_3(x))


class Decoder(nn.Module):
    def __init__(self, in_channels, num_hiddens, num_residual_layers, num_residual_hiddens):
        super().__init__()
        self._conv_1 = nn.Conv2d(in_channels, num_hiddens, kernel_size=3, stride=1, padding=1)
        self._residual_stack = ResidualStack(num_hiddens, num_hiddens, num_residual_layers,
                                             num_residual_hiddens)
        self._conv_trans_1 = nn.ConvTranspose2d(num_hiddens, num_hiddens // 2, kernel_size=4,
                                                stride=2, padding=1)
        self._conv_trans_2 = nn.ConvTranspose2d(num_hiddens // 2, 3, kernel_size=4, stride=2,
                                                padding=1)

    def forward(self, inputs):
        x = self._residual_stack(self._conv_1(inputs))
        x = F.relu(self._conv_trans_1(x))
        return self._conv_trans_2(x)


class Model(nn.Module):
    def __init__(self, num_hiddens, num_residual_layers, num_residual_hiddens, num_embeddings,
                 embedding_dim, commitment_cost):
        super().__init__()
        self._encoder = Encoder(3, num_hiddens, num_residual_layers, num_residual_hiddens)
        self._pre_vq_conv = nn.Conv2d(num_hiddens, embedding_dim, kernel_size=1, stride=1)
        self._vq_vae = VectorQuantizer(num_embeddings, embedding_dim, commitment_cost)
        self._decoder = Decoder(embedding_dim, num_hiddens, num_residual_layers,
                                num_residual_hiddens)

    def forward(self, x):
        z = self._pre_vq_conv(self._encoder(x))
        loss, quantized, perplexity, _ = self._vq_vae(z)
        return loss, self._decoder(quantized), perplexity


def run(run_dir: str, seed: int = 0, bug: str | None = None) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    x_train, _, x_val, _ = digits(seed, size=16, channels=3)
    data_variance = to_tensor(x_train).var().item()
    train_images = to_tensor(x_train) - 0.5
    val_images = to_tensor(x_val) if bug == "val-unnormalized" else to_tensor(x_val) - 0.5
    model = Model(num_hiddens, num_residual_layers, num_residual_hiddens, num_embeddings,
                  embedding_dim, commitment_cost)
    if bug == "decoder-not-in-optimizer":
        params = itertools.chain(model._encoder.parameters(), model._pre_vq_conv.parameters(),
                                 model._vq_vae.parameters())
    else:
        params = model.parameters()
    optimizer = optim.Adam(params, lr=learning_rate, amsgrad=False)
    with tracelab.Recorder(run_dir, model=model, optimizer=optimizer,
                           config={"lr": learning_rate, "batch_size": batch_size,
                                   "num_embeddings": num_embeddings,
                                   "commitment_cost": commitment_cost}) as rec:
        model.train()
        for i in range(num_training_updates):
            idx = torch.randint(len(train_images), (batch_size,), generator=gen)
            data = train_images[idx]
            optimizer.zero_grad()
            vq_loss, data_recon, perplexity = model(data)
            recon_error = F.mse_loss(data_recon, data) / data_variance
            loss = recon_error + vq_loss
            loss.backward()
            optimizer.step()
            rec.step(loss=loss, inputs=data, targets=data, outputs=data_recon,
                     metrics={"recon_error": recon_error.item(),
                              "perplexity": perplexity.item()})
            if (i + 1) % 25 == 0:
                model.eval()
                with torch.no_grad():
                    v_vq, v_recon, v_perp = model(val_images)
                    v_err = F.mse_loss(v_recon, val_images) / data_variance
                rec.log("val", metrics={"loss": (v_err + v_vq).item(),
                                        "recon_error": v_err.item(),
                                        "perplexity": v_perp.item()},
                        inputs=val_images, targets=val_images, outputs=v_recon)
                model.train()
