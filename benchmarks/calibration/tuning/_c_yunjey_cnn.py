"""yunjey/pytorch-tutorial tutorials/02-intermediate/convolutional_neural_network/main.py, shrunk:
its ConvNet (two conv 5x5 + BatchNorm2d + ReLU + MaxPool blocks, one linear layer), nn.CrossEntropyLoss,
Adam(lr=0.001), batches of 100 through ToTensor() images (no Normalize), and the test pass in
model.eval() under torch.no_grad(). The data is scikit-learn's 8x8 digits as uint8 images, so fc
reads 2*2*32 features instead of 7*7*32; 8 epochs instead of 5 (1,497 images instead of 60,000),
and the test pass runs after every epoch (model.train() at the start of each epoch).

`bug` plants one fault (None: the script as published):
- "lr-1": Adam(lr=1.0) instead of 0.001;
- "accum": healthy, gradient accumulation: micro-batches of 25, loss / 4, step every 4;
- "accum-zero-inside": the same accumulation with optimizer.zero_grad() inside the micro-batch
  loop, so each step sees the last micro-batch's gradient only.
"""
from __future__ import annotations

import torch
import torch.nn as nn

import tracelab
from _a_data import batches, digits, to_tensor

SOURCE = ("https://github.com/yunjey/pytorch-tutorial/blob/0500d3df5a2a8080ccfccbc00aca0eacc21818db/"
          "tutorials/02-intermediate/convolutional_neural_network/main.py")
BUGS = (None, "lr-1", "accum", "accum-zero-inside")


class ConvNet(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.layer1 = nn.Sequential(
            nn.Conv2d(1, 16, kernel_size=5, stride=1, padding=2),
            nn.BatchNorm2d(16),
            nn.ReLU(),
            nn.MaxPool2d(kernel_size=2, stride=2))
        self.layer2 = nn.Sequential(
            nn.Conv2d(16, 32, kernel_size=5, stride=1, padding=2),
            nn.BatchNorm2d(32),
            nn.ReLU(),
            nn.MaxPool2d(kernel_size=2, stride=2))
        self.fc = nn.Linear(2 * 2 * 32, num_classes)

    def forward(self, x):
        out = self.layer1(x)
        out = self.layer2(out)
        out = out.reshape(out.size(0), -1)
        out = self.fc(out)
        return out


def test(model, rec, images, labels, criterion, bug):
    model.eval()
    with torch.no_grad():
        correct, total, loss_sum, outs = 0, 0, 0.0, []
        for i in range(0, len(images), 100):  # test_loader: batch_size=100, shuffle=False
            x, y = to_tensor(images[i:i + 100]), labels[i:i + 100]
            outputs = model(x)
            loss_sum += criterion(outputs, y).item() * len(y)
            _, predicted = torch.max(outputs.data, 1)
            total += y.size(0)
            correct += (predicted == y).sum().item()
            outs.append(outputs)
    rec.log("val", metrics={"loss": loss_sum / total, "acc": correct / total},
            inputs=to_tensor(images), targets=labels, outputs=torch.cat(outs))


def run(run_dir: str, seed: int = 0, bug: str | None = None, num_epochs: int = 8) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    x_train, y_train, x_val, y_val = digits(seed)
    batch_size = 100
    learning_rate = 1.0 if bug == "lr-1" else 0.001
    accum = 4 if bug in ("accum", "accum-zero-inside") else 1
    model = ConvNet(10)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=learning_rate)
    config = {"num_epochs": num_epochs, "batch_size": batch_size, "learning_rate": learning_rate}
    if accum > 1:
        config["accumulation_steps"] = accum
    with tracelab.Recorder(run_dir, model=model, optimizer=optimizer, loss_fn=criterion,
                           config=config) as rec:
        for epoch in range(num_epochs):
            model.train()
            for idx in batches(len(x_train), batch_size, gen):
                images, labels = to_tensor(x_train[idx]), y_train[idx]
                if accum == 1:
                    outputs = model(images)
                    loss = criterion(outputs, labels)
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                    rec.step(loss=loss, inputs=images, targets=labels, outputs=outputs)
                    continue
                optimizer.zero_grad()
                total, outs = 0.0, []
                for part in torch.arange(len(idx)).chunk(accum):
                    if bug == "accum-zero-inside":
                        optimizer.zero_grad()
                    out = model(images[part])
                    micro = criterion(out, labels[part]) / accum
                    micro.backward()
                    total += micro.item()
                    outs.append(out.detach())
                optimizer.step()
                rec.step(loss=total, inputs=images, targets=labels, outputs=torch.cat(outs))
            test(model, rec, x_val, y_val, criterion, bug)
