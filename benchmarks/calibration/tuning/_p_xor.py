"""phlippe/uvadlc_notebooks tutorial2 Introduction_to_PyTorch.ipynb, shrunk: its
SimpleClassifier (Linear(2, 4), Tanh, Linear(4, 1)) on the notebook's continuous XOR dataset
(2500 training points, std 0.1), BCEWithLogitsLoss on preds.squeeze(dim=1), SGD(lr=0.1), batch
128 shuffled, train_model() / eval_model() as published (the test set of 500 points evaluated
after each epoch, sigmoid >= 0.5); 40 epochs instead of 100.

`bug` (None: the notebook as published):
- "sigmoid-out": the model ends in nn.Sigmoid() and its probabilities go to BCEWithLogitsLoss.
"""
from __future__ import annotations

import torch
import torch.nn as nn

import tracelab

SOURCE = ("https://github.com/phlippe/uvadlc_notebooks/blob/"
          "0da8037c7abc32f478ff6142acceb72dbcf088ee/docs/tutorial_notebooks/tutorial2/"
          "Introduction_to_PyTorch.ipynb")
BUGS = (None, "sigmoid-out")


class SimpleClassifier(nn.Module):
    def __init__(self, num_inputs, num_hidden, num_outputs, sigmoid=False):
        super().__init__()
        self.linear1 = nn.Linear(num_inputs, num_hidden)
        self.act_fn = nn.Tanh()
        self.linear2 = nn.Linear(num_hidden, num_outputs)
        self.out = nn.Sigmoid() if sigmoid else nn.Identity()

    def forward(self, x):
        x = self.linear1(x)
        x = self.act_fn(x)
        x = self.linear2(x)
        return self.out(x)


def continuous_xor(size, std, generator):
    data = torch.randint(low=0, high=2, size=(size, 2), generator=generator).float()
    label = (data.sum(dim=1) == 1).to(torch.long)
    data += std * torch.randn(data.shape, generator=generator)
    return data, label


def run(run_dir: str, seed: int = 0, bug: str | None = None, num_epochs: int = 40) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    x_tr, y_tr = continuous_xor(2500, 0.1, gen)
    x_te, y_te = continuous_xor(500, 0.1, gen)
    model = SimpleClassifier(num_inputs=2, num_hidden=4, num_outputs=1,
                             sigmoid=bug == "sigmoid-out")
    loss_module = nn.BCEWithLogitsLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with tracelab.Recorder(run_dir, model=model, optimizer=optimizer, loss_fn=loss_module,
                           config={"lr": 0.1, "batch_size": 128, "num_hidden": 4}) as rec:
        for epoch in range(num_epochs):
            model.train()
            for idx in torch.randperm(len(x_tr), generator=gen).split(128):
                data_inputs, data_labels = x_tr[idx], y_tr[idx]
                preds = model(data_inputs)
                preds = preds.squeeze(dim=1)
                loss = loss_module(preds, data_labels.float())
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                rec.step(loss=loss, inputs=data_inputs, targets=data_labels.float(),
                         outputs=preds)
            model.eval()
            with torch.no_grad():
                preds = model(x_te).squeeze(dim=1)
                vloss = loss_module(preds, y_te.float()).item()
                pred_labels = (torch.sigmoid(preds) >= 0.5).long()
                acc = (pred_labels == y_te).float().mean().item()
            rec.log("val", metrics={"loss": vloss, "acc": acc}, inputs=x_te,
                    targets=y_te.float(), outputs=preds)
    print(f"    xor bug={bug}: test acc {acc:.3f}")
