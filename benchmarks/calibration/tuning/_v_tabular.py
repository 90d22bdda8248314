"""yashu-seth/pytorch-tabular pytorch_tabular.py (and the loop of its README's walkthrough), shrunk:
its FeedForwardNN (an embedding per categorical column with embedding dropout, a BatchNorm1d over
the continuous columns, linear layers each followed by ReLU, BatchNorm1d and Dropout,
kaiming-normal init, one linear output), its TabularDataset (continuous columns as float32,
categorical columns as int64, the output column reshaped to (N, 1)), nn.MSELoss and Adam with
batch 64 as in the walkthrough (lr 0.01 here). The data is scikit-learn's diabetes table in raw
units (`sex` as the categorical column, embedding dimension 1; the other nine columns continuous;
disease progression as the output) instead of the walkthrough's house prices; the numeric columns
are standardized with a StandardScaler fit on the training rows, lin_layer_sizes [50, 100],
dropouts 0.001 and 0.01 as in the walkthrough, 15 epochs of 5 batches. The validation rows are
scored after every epoch in eval mode.

`bug` plants one fault (None: the script as published):
- "sgd": healthy, SGD(lr=0.01, momentum=0.9) instead of Adam;
- "val-unscaled": the validation rows go in without the scaler's transform;
- "y-flat": the output column kept as (N,) (TabularDataset without its .reshape(-1, 1)), so
  MSELoss broadcasts the (N, 1) predictions against it to (N, N);
- "target-in-features": the continuous columns listed before the output column is removed, so
  the (scaled) disease progression itself is one of the inputs. A "deployed" metric scores the
  validation rows with that column set to its training mean, as it is unknown at prediction
  time.
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from sklearn.preprocessing import StandardScaler
from torch import nn

import tracelab
from _v_data import batches, diabetes

SOURCE = ("https://github.com/yashu-seth/pytorch-tabular/blob/"
          "4ae59e5494db03b5276c9dab867890a23ffd6408/pytorch_tabular.py")
BUGS = (None, "sgd", "val-unscaled", "target-in-features", "y-flat")


class FeedForwardNN(nn.Module):
    def __init__(self, emb_dims, no_of_cont, lin_layer_sizes, output_size, emb_dropout,
                 lin_layer_dropouts):
        super().__init__()
        self.emb_layers = nn.ModuleList([nn.Embedding(x, y) for x, y in emb_dims])
        no_of_embs = sum([y for x, y in emb_dims])
        self.no_of_embs = no_of_embs
        self.no_of_cont = no_of_cont
        first_lin_layer = nn.Linear(self.no_of_embs + self.no_of_cont, lin_layer_sizes[0])
        self.lin_layers = nn.ModuleList(
            [first_lin_layer]
            + [nn.Linear(lin_layer_sizes[i], lin_layer_sizes[i + 1])
               for i in range(len(lin_layer_sizes) - 1)])
        for lin_layer in self.lin_layers:
            nn.init.kaiming_normal_(lin_layer.weight.data)
        self.output_layer = nn.Linear(lin_layer_sizes[-1], output_size)
        nn.init.kaiming_normal_(self.output_layer.weight.data)
        self.first_bn_layer = nn.BatchNorm1d(self.no_of_cont)
        self.bn_layers = nn.ModuleList([nn.BatchNorm1d(size) for size in lin_layer_sizes])
        self.emb_dropout_layer = nn.Dropout(emb_dropout)
        self.droput_layers = nn.ModuleList([nn.Dropout(size) for size in lin_layer_dropouts])

    def forward(self, cont_data, cat_data):
        if self.no_of_embs != 0:
            x = [emb_layer(cat_data[:, i]) for i, emb_layer in enumerate(self.emb_layers)]
            x = torch.cat(x, 1)
            x = self.emb_dropout_layer(x)
        if self.no_of_cont != 0:
            normalized_cont_data = self.first_bn_layer(cont_data)
            if self.no_of_embs != 0:
                x = torch.cat([x, normalized_cont_data], 1)
            else:
                x = normalized_cont_data
        for lin_layer, dropout_layer, bn_layer in zip(self.lin_layers, self.droput_layers,
                                                      self.bn_layers):
            x = F.relu(lin_layer(x))
            x = bn_layer(x)
            x = dropout_layer(x)
        return self.output_layer(x)


class Model(nn.Module):
    """The network and one input tensor: the Recorder sees `inputs` as the model's one input
    (the continuous columns followed by the categorical codes)."""

    def __init__(self, net, no_of_cont):
        super().__init__()
        self.net, self.no_of_cont = net, no_of_cont

    def forward(self, x):
        return self.net(x[:, :self.no_of_cont], x[:, self.no_of_cont:].long())


def run(run_dir: str, seed: int = 0, bug: str | None = None, no_of_epochs: int = 15) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    train, val = diabetes(seed)
    scaler = StandardScaler().fit(train["cont"])
    cont_train = scaler.transform(train["cont"])
    cont_val = val["cont"] if bug == "val-unscaled" else scaler.transform(val["cont"])
    if bug == "target-in-features":
        y_scaler = StandardScaler().fit(train["y"][:, None])
        cont_train = np.column_stack([cont_train, y_scaler.transform(train["y"][:, None])])
        cont_val = np.column_stack([cont_val, y_scaler.transform(val["y"][:, None])])
    y_mean, y_std = train["y"].mean(), train["y"].std()

    def table(cont, sex, y):
        x = torch.from_numpy(np.column_stack([cont, sex]).astype(np.float32))
        t = torch.from_numpy(((y - y_mean) / y_std).astype(np.float32))
        t = t if bug == "y-flat" else t.reshape(-1, 1)
        return x, t

    x_train, y_train = table(cont_train, train["sex"], train["y"])
    x_val, y_val = table(cont_val, val["sex"], val["y"])
    no_of_cont = x_train.shape[1] - 1
    net = FeedForwardNN(emb_dims=[(2, 1)], no_of_cont=no_of_cont, lin_layer_sizes=[50, 100],
                        output_size=1, emb_dropout=0.04, lin_layer_dropouts=[0.001, 0.01])
    model = Model(net, no_of_cont)
    batchsize = 64
    epochs = no_of_epochs
    criterion = nn.MSELoss()
    lr = 0.01
    if bug == "sgd":
        optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    else:
        optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    with tracelab.Recorder(run_dir, model=model, optimizer=optimizer, loss_fn=criterion,
                           config={"lr": lr, "batch_size": batchsize, "epochs": epochs}) as rec:
        for _epoch in range(epochs):
            model.train()
            for idx in batches(len(x_train), batchsize, gen, drop_last=True):
                x, y = x_train[idx], y_train[idx]
                preds = model(x)
                loss = criterion(preds, y)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                rec.step(loss=loss, inputs=x, targets=y, outputs=preds)
            model.eval()
            with torch.no_grad():
                preds = model(x_val)
                val_loss = criterion(preds, y_val).item()
                metrics = {"loss": val_loss, "mse": val_loss}
                if bug == "target-in-features":
                    blind = x_val.clone()
                    blind[:, no_of_cont - 1] = 0.0
                    metrics["deployed_mse"] = criterion(model(blind), y_val).item()
            rec.log("val", metrics=metrics, inputs=x_val,
                    targets=y_val, outputs=preds)
