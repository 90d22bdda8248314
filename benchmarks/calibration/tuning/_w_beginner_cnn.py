"""L1aoXingyu/pytorch-beginner 04-Convolutional Neural Network/convolution_network.py, shrunk:
its Cnn (two convolutions with max-pooling, three linear layers without activations between
them), nn.CrossEntropyLoss and plain SGD, the images ToTensor()'d (0-1, no Normalize), the
test loop calling model.eval() after each epoch (the net has no dropout or BatchNorm, so the
published script never calls model.train() again and that is harmless). The data is
scikit-learn's 8x8 digits upsampled to 28x28; with about 1,500 images instead of 60,000 the
batch is 32 and the learning rate 1e-2 instead of 128 and 1e-3, so that the run learns in a
few hundred steps.

`bug` plants one fault (None: the script as published):
- "softmax-ce": the model ends in nn.Softmax and its probabilities go into CrossEntropyLoss;
- "raw-pixels": the ToTensor() division is skipped, the pixels go in as 0-255.
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.optim as optim

import tracelab
from _w_data import batches, digits, to_tensor

SOURCE = ("https://github.com/L1aoXingyu/pytorch-beginner/blob/"
          "4cae537a325cc96a6b35adc46fee6a44739a321a/04-Convolutional%20Neural%20Network/"
          "convolution_network.py")
BUGS = (None, "softmax-ce", "raw-pixels")


class Cnn(nn.Module):
    def __init__(self, in_dim, n_class, softmax=False):
        super().__init__()
        self.conv = nn.Sequential(
            nn.Conv2d(in_dim, 6, 3, stride=1, padding=1),
            nn.MaxPool2d(2, 2),
            nn.Conv2d(6, 16, 5, stride=1, padding=0),
            nn.MaxPool2d(2, 2),
        )
        layers = [nn.Linear(400, 120), nn.Linear(120, 84), nn.Linear(84, n_class)]
        if softmax:
            layers.append(nn.Softmax(dim=1))
        self.fc = nn.Sequential(*layers)

    def forward(self, x):
        out = self.conv(x)
        out = out.view(out.size(0), -1)
        return self.fc(out)


def run(run_dir: str, seed: int = 0, bug: str | None = None, epochs: int = 8,
        batch_size: int = 32, learning_rate: float = 1e-2) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    x_train, y_train, x_val, y_val = digits(seed)
    prep = (lambda im: im) if bug == "raw-pixels" else to_tensor
    model = Cnn(1, 10, softmax=bug == "softmax-ce")
    criterion = nn.CrossEntropyLoss()
    optimizer = optim.SGD(model.parameters(), lr=learning_rate)
    with tracelab.Recorder(run_dir, model=model, optimizer=optimizer, loss_fn=criterion,
                           config={"lr": learning_rate, "batch_size": batch_size,
                                   "epochs": epochs}) as rec:
        for _ in range(epochs):
            for idx in batches(len(x_train), batch_size, gen):
                img, label = prep(x_train[idx]), y_train[idx]
                out = model(img)
                loss = criterion(out, label)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                rec.step(loss=loss, inputs=img, targets=label, outputs=out)
            model.eval()
            with torch.no_grad():
                img = prep(x_val)
                out = model(img)
                eval_loss = criterion(out, y_val).item()
                acc = (out.argmax(1) == y_val).float().mean().item()
            rec.log("val", metrics={"loss": eval_loss, "acc": acc}, inputs=img, targets=y_val,
                    outputs=out)
