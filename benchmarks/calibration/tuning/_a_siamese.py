"""pytorch/examples siamese_network/main.py, shrunk: a shared feature extractor applied to both
images (forward_once), the two feature vectors concatenated into fc (Linear, ReLU, Linear) and
a sigmoid, BCELoss, Adadelta(lr=1.0) with StepLR(gamma=0.7) per epoch, and its APP_MATCHER
pairs (an even index pairs two images of one class, target 1; an odd index two classes,
target 0). ResNet-18 is replaced by two Conv-BatchNorm-ReLU layers and an average pool (8x8
images), the images are scikit-learn's digits divided by 255 (the script feeds raw 0-255
MNIST bytes to a ResNet whose BatchNorm absorbs the scale), 4,096 pairs per epoch, 6 epochs.

`bug` plants one fault (None: the script as published):
- "bce-with-logits": nn.BCEWithLogitsLoss() as the criterion of the sigmoid's output;
- "test-from-train": the test pairs drawn from the training images (APP_MATCHER(train=True)
  for the test loader).
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.optim as optim
from torch.optim.lr_scheduler import StepLR

import tracelab
from _a_data import digits, to_tensor

SOURCE = ("https://github.com/pytorch/examples/blob/77f55b912142e11fcfdf5b530231fb9c52f181e8/"
          "siamese_network/main.py")
BUGS = (None, "bce-with-logits", "test-from-train")


class SiameseNetwork(nn.Module):
    def __init__(self):
        super().__init__()
        self.resnet = nn.Sequential(
            nn.Conv2d(1, 32, 3, padding=1, bias=False), nn.BatchNorm2d(32), nn.ReLU(inplace=True),
            nn.Conv2d(32, 64, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(64),
            nn.ReLU(inplace=True), nn.AdaptiveAvgPool2d(1))
        self.fc = nn.Sequential(nn.Linear(64 * 2, 256), nn.ReLU(inplace=True), nn.Linear(256, 1))
        self.sigmoid = nn.Sigmoid()
        self.fc.apply(self.init_weights)

    def init_weights(self, m):
        if isinstance(m, nn.Linear):
            torch.nn.init.xavier_uniform_(m.weight)
            m.bias.data.fill_(0.01)

    def forward_once(self, x):
        output = self.resnet(x)
        return output.view(output.size()[0], -1)

    def forward(self, input1, input2):
        output = torch.cat((self.forward_once(input1), self.forward_once(input2)), 1)
        return self.sigmoid(self.fc(output))


def pairs(images, labels, n, gen):
    """APP_MATCHER: n pairs, the even ones of one class (target 1), the odd ones of two."""
    groups = [torch.nonzero(labels == c).flatten() for c in range(10)]

    def pick(c):
        g = groups[c]
        return g[torch.randint(len(g), (1,), generator=gen)].item()
    first, second, targets = [], [], []
    for index in range(n):
        c = int(torch.randint(10, (1,), generator=gen))
        i = pick(c)
        if index % 2 == 0:
            j = pick(c)
            while j == i:
                j = pick(c)
            target = 1.0
        else:
            other = int(torch.randint(10, (1,), generator=gen))
            while other == c:
                other = int(torch.randint(10, (1,), generator=gen))
            j, target = pick(other), 0.0
        first.append(i)
        second.append(j)
        targets.append(target)
    return images[first], images[second], torch.tensor(targets)


def run(run_dir: str, seed: int = 0, bug: str | None = None, epochs: int = 6,
        pairs_per_epoch: int = 4096) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    x_train, y_train, x_test, y_test = digits(seed)
    x_train, x_test = to_tensor(x_train), to_tensor(x_test)
    if bug == "test-from-train":
        x_test, y_test = x_train, y_train
    test_1, test_2, test_t = pairs(x_test, y_test, 300, gen)
    model = SiameseNetwork()
    optimizer = optim.Adadelta(model.parameters(), lr=1.0)
    scheduler = StepLR(optimizer, step_size=1, gamma=0.7)
    criterion = nn.BCEWithLogitsLoss() if bug == "bce-with-logits" else nn.BCELoss()
    with tracelab.Recorder(run_dir, model=model, optimizer=optimizer, scheduler=scheduler,
                           loss_fn=criterion, config={"lr": 1.0, "gamma": 0.7,
                                                      "batch_size": 64}) as rec:
        for _ in range(epochs):
            model.train()
            images_1, images_2, targets = pairs(x_train, y_train, pairs_per_epoch, gen)
            for idx in torch.randperm(pairs_per_epoch, generator=gen).split(64):
                optimizer.zero_grad()
                outputs = model(images_1[idx], images_2[idx]).squeeze()
                loss = criterion(outputs, targets[idx])
                loss.backward()
                optimizer.step()
                rec.step(loss=loss, inputs=(images_1[idx], images_2[idx]),
                         targets=targets[idx], outputs=outputs)
            model.eval()
            with torch.no_grad():
                outputs = model(test_1, test_2).squeeze()
                test_loss = criterion(outputs, test_t).item()
                acc = torch.where(outputs > 0.5, 1, 0).eq(test_t).float().mean().item()
            rec.log("val", metrics={"loss": test_loss, "acc": acc}, inputs=(test_1, test_2),
                    targets=test_t, outputs=outputs)
            scheduler.step()
