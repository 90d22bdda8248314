"""aladdinpersson/Machine-Learning-Collection ML/Pytorch/Basics/pytorch_rnn_gru_lstm.py, shrunk: its
many-to-one RNN_LSTM (2-layer nn.LSTM with batch_first=True, zero initial states, every time
step's output flattened into one linear layer), nn.CrossEntropyLoss, Adam(lr=0.005), batch 64,
images read row by row (sequence_length rows of input_size pixels), and its check_accuracy
(model.eval(), no_grad, model.train()) run on the held-out images after every epoch. The data is
scikit-learn's 8x8 digits with ToTensor() (0-1): sequence_length 8 and input_size 8 instead of
28 and 28, hidden_size 64 instead of 256, 8 epochs of 24 batches.

`bug` plants one fault (None: the script as published):
- "gru": healthy, the script's RNN_GRU instead of RNN_LSTM;
- "lr-0.1": Adam(lr=0.1) instead of 0.005.
"""
from __future__ import annotations

import torch
from torch import nn, optim

import tracelab
from _v_data import batches, digits, to_tensor

SOURCE = ("https://github.com/aladdinpersson/Machine-Learning-Collection/blob/"
          "28bd89ea9c07db15ebaa232328a53e03614b1c88/ML/Pytorch/Basics/pytorch_rnn_gru_lstm.py")
BUGS = (None, "gru", "lr-0.1")

input_size, hidden_size, num_layers, num_classes, sequence_length = 8, 64, 2, 10, 8


class RNN_LSTM(nn.Module):
    def __init__(self, input_size, hidden_size, num_layers, num_classes):
        super().__init__()
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.lstm = nn.LSTM(input_size, hidden_size, num_layers, batch_first=True)
        self.fc = nn.Linear(hidden_size * sequence_length, num_classes)

    def forward(self, x):
        h0 = torch.zeros(self.num_layers, x.size(0), self.hidden_size)
        c0 = torch.zeros(self.num_layers, x.size(0), self.hidden_size)
        out, _ = self.lstm(x, (h0, c0))
        out = out.reshape(out.shape[0], -1)
        return self.fc(out)


class RNN_GRU(nn.Module):
    def __init__(self, input_size, hidden_size, num_layers, num_classes):
        super().__init__()
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.gru = nn.GRU(input_size, hidden_size, num_layers, batch_first=True)
        self.fc = nn.Linear(hidden_size * sequence_length, num_classes)

    def forward(self, x):
        h0 = torch.zeros(self.num_layers, x.size(0), self.hidden_size)
        out, _ = self.gru(x, h0)
        out = out.reshape(out.shape[0], -1)
        return self.fc(out)


def run(run_dir: str, seed: int = 0, bug: str | None = None, num_epochs: int = 8) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    x_train, y_train, x_test, y_test = digits(seed)
    learning_rate, batch_size = (0.1 if bug == "lr-0.1" else 0.005), 64
    if bug == "gru":
        model = RNN_GRU(input_size, hidden_size, num_layers, num_classes)
    else:
        model = RNN_LSTM(input_size, hidden_size, num_layers, num_classes)
    criterion = nn.CrossEntropyLoss()
    optimizer = optim.Adam(model.parameters(), lr=learning_rate)
    with tracelab.Recorder(run_dir, model=model, optimizer=optimizer, loss_fn=criterion,
                           config={"lr": learning_rate, "batch_size": batch_size,
                                   "epochs": num_epochs}) as rec:
        for _epoch in range(num_epochs):
            for idx in batches(len(x_train), batch_size, gen):
                data = to_tensor(x_train[idx]).squeeze(1)
                targets = y_train[idx]
                scores = model(data)
                loss = criterion(scores, targets)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                rec.step(loss=loss, inputs=data, targets=targets, outputs=scores)
            model.eval()
            with torch.no_grad():
                x = to_tensor(x_test).squeeze(1)
                scores = model(x)
                acc = (scores.argmax(1) == y_test).float().mean().item()
                val_loss = criterion(scores, y_test).item()
            model.train()
            rec.log("val", metrics={"loss": val_loss, "accuracy": acc}, inputs=x, targets=y_test,
                    outputs=scores)
