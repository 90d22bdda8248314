"""aladdinpersson/Machine-Learning-Collection ML/Pytorch/Basics/pytorch_simple_CNN.py, shrunk: its
CNN (conv 1->8 k3 pad 1, ReLU, max-pool, conv 8->16 k3 pad 1, ReLU, max-pool, one linear layer to
10 classes), nn.CrossEntropyLoss, Adam(lr=1e-3), batch 64, and its check_accuracy (model.eval(),
no_grad, then model.train()) run on the held-out images after every epoch instead of once at the
end. The data is scikit-learn's 8x8 digits upsampled to 16x16 (uint8, 0-255) with the script's
transforms.ToTensor() (0-1), so fc1 takes 16 * 4 * 4 features instead of 16 * 7 * 7; 10 epochs
of 24 batches instead of 5 epochs of MNIST.

`bug` plants one fault (None: the script as published):
- "sgd": healthy, the "SGD, Adam, etc." the script's comment offers: SGD(lr=0.05, momentum=0.9);
- "softmax": the network ends in a softmax, and CrossEntropyLoss reads the probabilities;
- "no-zero-grad": the optimizer.zero_grad() line left out of the loop;
- "frozen-convs": both convolutions' parameters set requires_grad=False (a freeze meant for
  fine-tuning, never undone), so only fc1 trains;
- "labels-misaligned": each batch's images drawn through the shuffled indices but its labels
  taken from the unshuffled order, so images and labels no longer correspond.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn, optim

import tracelab
from _v_data import batches, digits, to_tensor

SOURCE = ("https://github.com/aladdinpersson/Machine-Learning-Collection/blob/"
          "157a5f458f272a513eb6b4a19d6613aec32dc21c/ML/Pytorch/Basics/pytorch_simple_CNN.py")
BUGS = (None, "sgd", "softmax", "no-zero-grad", "frozen-convs", "labels-misaligned")


class CNN(nn.Module):
    def __init__(self, in_channels=1, num_classes=10, softmax=False):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels=in_channels, out_channels=8, kernel_size=(3, 3),
                               stride=(1, 1), padding=(1, 1))
        self.pool = nn.MaxPool2d(kernel_size=(2, 2), stride=(2, 2))
        self.conv2 = nn.Conv2d(in_channels=8, out_channels=16, kernel_size=(3, 3), stride=(1, 1),
                               padding=(1, 1))
        self.fc1 = nn.Linear(16 * 4 * 4, num_classes)
        self.softmax = softmax

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = self.pool(x)
        x = F.relu(self.conv2(x))
        x = self.pool(x)
        x = x.reshape(x.shape[0], -1)
        x = self.fc1(x)
        return F.softmax(x, dim=1) if self.softmax else x


def run(run_dir: str, seed: int = 0, bug: str | None = None, num_epochs: int = 10) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    x_train, y_train, x_test, y_test = digits(seed, size=16)
    transform = to_tensor
    learning_rate, batch_size = 0.001, 64
    model = CNN(softmax=bug == "softmax")
    if bug == "frozen-convs":
        for p in list(model.conv1.parameters()) + list(model.conv2.parameters()):
            p.requires_grad = False
    criterion = nn.CrossEntropyLoss()
    if bug == "sgd":
        learning_rate = 0.05
        optimizer = optim.SGD(model.parameters(), lr=learning_rate, momentum=0.9)
    else:
        optimizer = optim.Adam(model.parameters(), lr=learning_rate)
    with tracelab.Recorder(run_dir, model=model, optimizer=optimizer, loss_fn=criterion,
                           config={"lr": learning_rate, "batch_size": batch_size,
                                   "epochs": num_epochs}) as rec:
        for _epoch in range(num_epochs):
            for b, idx in enumerate(batches(len(x_train), batch_size, gen)):
                data, targets = transform(x_train[idx]), y_train[idx]
                if bug == "labels-misaligned":
                    targets = y_train[b * batch_size:b * batch_size + len(idx)]
                # forward
                scores = model(data)
                loss = criterion(scores, targets)
                # backward
                if bug != "no-zero-grad":
                    optimizer.zero_grad()
                loss.backward()
                # gradient descent or adam step
                optimizer.step()
                rec.step(loss=loss, inputs=data, targets=targets, outputs=scores)
            # check_accuracy on the test images
            model.eval()
            with torch.no_grad():
                x = transform(x_test)
                scores = model(x)
                acc = (scores.argmax(1) == y_test).float().mean().item()
                val_loss = criterion(scores, y_test).item()
            model.train()
            rec.log("val", metrics={"loss": val_loss, "accuracy": acc}, inputs=x, targets=y_test,
                    outputs=scores)
