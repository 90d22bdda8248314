"""patrickloeber/pytorchTutorial 13_feedforward.py, shrunk: its NeuralNet (Linear, ReLU, Linear,
no softmax at the end), nn.CrossEntropyLoss, Adam(lr=0.001), batch 100, images flattened, and
its test loop under no_grad (accuracy of the argmax) run after every epoch. The data is
scikit-learn's 8x8 digits with ToTensor() (input_size 64 instead of 784), hidden_size 100
instead of 500, 8 epochs of 15 batches instead of 2 epochs of MNIST; 297 images held out.

`bug` plants one fault (None: the script as published):
- "l2-left-out": the optimizer built from model.l1.parameters() only, so the output layer keeps
  its random initialization;
- "lr-1e-6": Adam(lr=1e-6) instead of 0.001.
"""
from __future__ import annotations

import torch
from torch import nn

import tracelab
from _v_data import batches, digits, to_tensor

SOURCE = ("https://github.com/patrickloeber/pytorchTutorial/blob/"
          "00657e47d662398eb0028b19481e4069ace2dd61/13_feedforward.py")
BUGS = (None, "l2-left-out", "lr-1e-6")


class NeuralNet(nn.Module):
    def __init__(self, input_size, hidden_size, num_classes):
        super().__init__()
        self.input_size = input_size
        self.l1 = nn.Linear(input_size, hidden_size)
        self.relu = nn.ReLU()
        self.l2 = nn.Linear(hidden_size, num_classes)

    def forward(self, x):
        out = self.l1(x)
        out = self.relu(out)
        return self.l2(out)


def run(run_dir: str, seed: int = 0, bug: str | None = None, num_epochs: int = 8) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    x_train, y_train, x_test, y_test = digits(seed)
    x_train, x_test = to_tensor(x_train).reshape(-1, 64), to_tensor(x_test).reshape(-1, 64)
    input_size, hidden_size, num_classes, batch_size, learning_rate = 64, 100, 10, 100, 0.001
    if bug == "lr-1e-6":
        learning_rate = 1e-6
    model = NeuralNet(input_size, hidden_size, num_classes)
    criterion = nn.CrossEntropyLoss()
    params = model.l1.parameters() if bug == "l2-left-out" else model.parameters()
    optimizer = torch.optim.Adam(params, lr=learning_rate)
    with tracelab.Recorder(run_dir, model=model, optimizer=optimizer, loss_fn=criterion,
                           config={"lr": learning_rate, "batch_size": batch_size,
                                   "epochs": num_epochs, "hidden_size": hidden_size}) as rec:
        for _epoch in range(num_epochs):
            for idx in batches(len(x_train), batch_size, gen):
                images, labels = x_train[idx], y_train[idx]
                outputs = model(images)
                loss = criterion(outputs, labels)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                rec.step(loss=loss, inputs=images, targets=labels, outputs=outputs)
            with torch.no_grad():
                outputs = model(x_test)
                acc = (outputs.argmax(1) == y_test).float().mean().item()
                test_loss = criterion(outputs, y_test).item()
            rec.log("val", metrics={"loss": test_loss, "accuracy": acc}, inputs=x_test,
                    targets=y_test, outputs=outputs)
