"""dreamquark-ai/tabnet pytorch_tabnet/tab_network.py and abstract_model.py, shrunk: TabNet
(initial BatchNorm, shared and step-specific GLU feature transformers with Ghost BatchNorm,
attentive transformers with sparsemax and prior scaling gamma 1.3, n_d = n_a = 8, n_steps 3,
final mapping), TabNetClassifier's cross-entropy, _train_batch() (param.grad = None for every
parameter, loss - lambda_sparse * M_loss with lambda_sparse 1e-3, clip_grad_norm_(1), the
optimizer step) and the defaults Adam(lr 2e-2) with virtual_batch_size / batch_size 32 / 128
(1024 / 128 in the library, scaled to the small table). The data is scikit-learn's
breast-cancer table (30 raw features, 2 classes), split 75/25 as the README's
X_train / X_valid and standardized with the training split's mean and std (StandardScaler); 25
epochs. eval_set is scored after every epoch with the network in eval
mode.

`bug` plants one fault (None: the script as published):
- "target-in-features": the target column left among the feature columns (the
  train/valid matrices built from every column of the frame);
- "valid-unscaled": the scaler applied to X_train only; X_valid goes in raw;
- "no-grad-reset": the `param.grad = None` loop left out of _train_batch(), so gradients
  accumulate over the whole run.
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from sklearn.datasets import load_breast_cancer

import tracelab
from _z_data import batches

SOURCE = ("https://github.com/dreamquark-ai/tabnet/blob/"
          "2c0c4ebd2bb1cb639ea94ab4b11823bc49265588/pytorch_tabnet/tab_network.py")
BUGS = (None, "target-in-features", "valid-unscaled", "no-grad-reset")


def sparsemax(z):
    z_sorted, _ = torch.sort(z, dim=-1, descending=True)
    k = torch.arange(1, z.shape[-1] + 1, dtype=z.dtype)
    cumsum = z_sorted.cumsum(-1) - 1
    support = (k * z_sorted) > cumsum
    k_z = support.sum(-1, keepdim=True)
    tau = cumsum.gather(-1, k_z - 1) / k_z.to(z.dtype)
    return torch.clamp(z - tau, min=0)


class GBN(nn.Module):
    def __init__(self, input_dim, virtual_batch_size=32, momentum=0.02):
        super().__init__()
        self.virtual_batch_size = virtual_batch_size
        self.bn = nn.BatchNorm1d(input_dim, momentum=momentum)

    def forward(self, x):
        chunks = x.chunk(int(np.ceil(x.shape[0] / self.virtual_batch_size)), 0)
        return torch.cat([self.bn(x_) for x_ in chunks], dim=0)


class GLU_Layer(nn.Module):
    def __init__(self, input_dim, output_dim, fc=None, virtual_batch_size=32):
        super().__init__()
        self.output_dim = output_dim
        self.fc = fc if fc is not None else nn.Linear(input_dim, 2 * output_dim, bias=False)
        self.bn = GBN(2 * output_dim, virtual_batch_size)

    def forward(self, x):
        x = self.bn(self.fc(x))
        return x[:, :self.output_dim] * torch.sigmoid(x[:, self.output_dim:])


class FeatTransformer(nn.Module):
    def __init__(self, input_dim, output_dim, shared_layers, n_independent=2):
        super().__init__()
        self.layers = nn.ModuleList()
        for i, fc in enumerate(shared_layers):
            self.layers.append(GLU_Layer(input_dim if i == 0 else output_dim, output_dim, fc=fc))
        for _ in range(n_independent):
            self.layers.append(GLU_Layer(output_dim, output_dim))

    def forward(self, x):
        scale = torch.sqrt(torch.tensor(0.5))
        x = self.layers[0](x)
        for layer in self.layers[1:]:
            x = (x + layer(x)) * scale
        return x


class AttentiveTransformer(nn.Module):
    def __init__(self, input_dim, group_dim):
        super().__init__()
        self.fc = nn.Linear(input_dim, group_dim, bias=False)
        self.bn = GBN(group_dim)

    def forward(self, priors, processed_feat):
        return sparsemax(self.bn(self.fc(processed_feat)) * priors)


class TabNet(nn.Module):
    def __init__(self, input_dim, output_dim, n_d=8, n_a=8, n_steps=3, gamma=1.3, n_shared=2):
        super().__init__()
        self.n_d, self.n_steps, self.gamma = n_d, n_steps, gamma
        self.initial_bn = nn.BatchNorm1d(input_dim, momentum=0.01)
        shared = nn.ModuleList([nn.Linear(input_dim if i == 0 else n_d + n_a, 2 * (n_d + n_a),
                                          bias=False) for i in range(n_shared)])
        self.initial_splitter = FeatTransformer(input_dim, n_d + n_a, shared)
        self.feat_transformers = nn.ModuleList(
            [FeatTransformer(input_dim, n_d + n_a, shared) for _ in range(n_steps)])
        self.att_transformers = nn.ModuleList(
            [AttentiveTransformer(n_a, input_dim) for _ in range(n_steps)])
        self.final_mapping = nn.Linear(n_d, output_dim, bias=False)

    def forward(self, x):
        res = 0
        x = self.initial_bn(x)
        prior = torch.ones(x.shape)
        M_loss = 0
        att = self.initial_splitter(x)[:, self.n_d:]
        for step in range(self.n_steps):
            M = self.att_transformers[step](prior, att)
            M_loss += torch.mean(torch.sum(torch.mul(M, torch.log(M + 1e-15)), dim=1))
            prior = torch.mul(self.gamma - M, prior)
            out = self.feat_transformers[step](torch.mul(M, x))
            res = torch.add(res, F.relu(out[:, :self.n_d]))
            att = out[:, self.n_d:]
        return self.final_mapping(res), M_loss / self.n_steps


def run(run_dir: str, seed: int = 0, bug: str | None = None, epochs: int = 25) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    bunch = load_breast_cancer()
    frame = np.column_stack([bunch.data, bunch.target]).astype(np.float32)
    features = frame if bug == "target-in-features" else frame[:, :-1]
    order = np.random.default_rng(seed).permutation(len(frame))
    n_valid = len(frame) // 4
    X = torch.from_numpy(features[order])
    y = torch.from_numpy(bunch.target[order]).long()
    X_train, y_train, X_valid, y_valid = X[n_valid:], y[n_valid:], X[:n_valid], y[:n_valid]
    mean, std = X_train.mean(0), X_train.std(0)
    X_train = (X_train - mean) / std
    if bug != "valid-unscaled":
        X_valid = (X_valid - mean) / std
    network = TabNet(X.shape[1], 2)
    lr, lambda_sparse, clip_value, batch_size = 2e-2, 1e-3, 1.0, 128
    optimizer = torch.optim.Adam(network.parameters(), lr=lr)
    loss_fn = nn.CrossEntropyLoss()
    config = {"n_d": 8, "n_a": 8, "n_steps": 3, "gamma": 1.3, "lambda_sparse": lambda_sparse,
              "optimizer_params": {"lr": lr}, "batch_size": batch_size,
              "virtual_batch_size": 32, "clip_value": clip_value, "max_epochs": epochs}
    with tracelab.Recorder(run_dir, model=network, optimizer=optimizer, loss_fn=loss_fn,
                           config=config) as rec:
        for _ in range(epochs):
            network.train()
            for idx in batches(len(X_train), batch_size, gen):
                if len(idx) < 2:
                    continue
                Xb, yb = X_train[idx], y_train[idx]
                if bug != "no-grad-reset":
                    for param in network.parameters():
                        param.grad = None
                output, M_loss = network(Xb)
                loss = loss_fn(output, yb)
                loss = loss - lambda_sparse * M_loss
                loss.backward()
                nn.utils.clip_grad_norm_(network.parameters(), clip_value)
                optimizer.step()
                rec.step(loss=loss, inputs=Xb, targets=yb, outputs=output)
            network.eval()
            with torch.no_grad():
                output, _ = network(X_valid)
                val_loss = loss_fn(output, y_valid).item()
                acc = (output.argmax(1) == y_valid).float().mean().item()
            rec.log("val", metrics={"loss": val_loss, "accuracy": acc}, inputs=X_valid,
                    targets=y_valid, outputs=output)
