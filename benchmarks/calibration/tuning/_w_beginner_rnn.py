"""L1aoXingyu/pytorch-beginner 05-Recurrent Neural Network/recurrent_network.py, shrunk: its Rnn
(a two-layer nn.LSTM(28, 128, batch_first=True) reading each image row by row, the last step's
output into a linear classifier), nn.CrossEntropyLoss, Adam(lr=1e-3), batch 100, the images
ToTensor()'d and squeezed to (batch, 28, 28), model.eval() for the test pass. The data is
scikit-learn's 8x8 digits upsampled to 28x28.

`bug` plants one fault (None: the script as published):
- "no-batch-first": the LSTM built without batch_first=True while the batches stay
  (batch, rows, 28).
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.optim as optim

import tracelab
from _w_data import batches, digits, to_tensor

SOURCE = ("https://github.com/L1aoXingyu/pytorch-beginner/blob/"
          "267a31a6da9623f8f81514097c4d47fb983bc0a4/05-Recurrent%20Neural%20Network/"
          "recurrent_network.py")
BUGS = (None, "no-batch-first")


class Rnn(nn.Module):
    def __init__(self, in_dim, hidden_dim, n_layer, n_class, batch_first=True):
        super().__init__()
        self.n_layer = n_layer
        self.hidden_dim = hidden_dim
        self.lstm = nn.LSTM(in_dim, hidden_dim, n_layer, batch_first=batch_first)
        self.classifier = nn.Linear(hidden_dim, n_class)

    def forward(self, x):
        out, _ = self.lstm(x)
        out = out[:, -1, :]
        return self.classifier(out)


def run(run_dir: str, seed: int = 0, bug: str | None = None, epochs: int = 4,
        batch_size: int = 100, learning_rate: float = 1e-3) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    x_train, y_train, x_val, y_val = digits(seed)
    model = Rnn(28, 128, 2, 10, batch_first=bug != "no-batch-first")
    criterion = nn.CrossEntropyLoss()
    optimizer = optim.Adam(model.parameters(), lr=learning_rate)
    with tracelab.Recorder(run_dir, model=model, optimizer=optimizer, loss_fn=criterion,
                           config={"lr": learning_rate, "batch_size": batch_size}) as rec:
        for _ in range(epochs):
            model.train()
            for idx in batches(len(x_train), batch_size, gen):
                img, label = to_tensor(x_train[idx]).squeeze(1), y_train[idx]
                out = model(img)
                loss = criterion(out, label)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                rec.step(loss=loss, inputs=img, targets=label, outputs=out)
            model.eval()
            with torch.no_grad():
                img = to_tensor(x_val).squeeze(1)
                out = model(img)
                eval_loss = criterion(out, y_val).item()
                acc = (out.argmax(1) == y_val).float().mean().item()
            rec.log("val", metrics={"loss": eval_loss, "acc": acc}, inputs=img, targets=y_val,
                    outputs=out)
