"""facebookresearch/moco main_moco.py + moco/builder.py, shrunk: the MoCo model (a query encoder
and a key encoder that follows it by momentum, a queue of K negative keys, l_pos and l_neg
logits over the temperature T, the positive key at index 0 so the labels are zeros), the
single-process stand-in of its batch shuffle for BatchNorm (keys computed on a shuffled batch
and unshuffled), nn.CrossEntropyLoss, SGD(lr=0.03, momentum=0.9, weight_decay=1e-4), the step
schedule (lr x0.1 at 60% and 80% of the epochs, as 120 and 160 of 200), model.train() at the top
of every epoch. ResNet-50 becomes a small BatchNorm CNN (conv 16, conv 32 stride 2, pool, fc
to dim=32), K=65536 becomes 512 and m=0.999 0.99 for the short run, T=0.07; the two "crops"
are random one-pixel shifts with pixel noise of scikit-learn's 8x8 digits (ToTensor() +
Normalize); 200 epochs become 8, batch 256 becomes 64. After each epoch the key-free query
encoder's backbone features score the held-out digits by 5-nearest-neighbour accuracy against
the training digits (the repository's linear-probe evaluation, cheaply).

`bug` plants one fault (None: the script as published):
- "labels-one": the labels set to ones (taking the "positive key indicators" to be 1), so
  the loss pulls each query towards its first queued negative;
- "cos": healthy, the script's --cos option (lr *= 0.5 * (1 + cos(pi * epoch / epochs)));
- "train-once": model.train() called once before the epochs instead of at the top of train(),
  so after the first evaluation every epoch trains with BatchNorm in eval mode.
"""
from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

import tracelab
from _t_data import batches, digits, to_tensor

SOURCE = ("https://github.com/facebookresearch/moco/blob/"
          "132aea9da9bb995a411c915c0420be3db62052f3/main_moco.py")
BUGS = (None, "labels-one", "cos", "train-once")
MEAN, STD = 0.1307, 0.3081


class Encoder(nn.Module):
    def __init__(self, num_classes=32):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        self.conv2 = nn.Conv2d(16, 32, 3, stride=2, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(32)
        self.fc = nn.Linear(32, num_classes)

    def features(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.relu(self.bn2(self.conv2(x)))
        return F.adaptive_avg_pool2d(x, 1).flatten(1)

    def forward(self, x):
        return self.fc(self.features(x))


class MoCo(nn.Module):
    def __init__(self, base_encoder, dim=32, K=512, m=0.99, T=0.07, labels_one=False):
        super().__init__()
        self.K, self.m, self.T, self.labels_one = K, m, T, labels_one
        self.encoder_q = base_encoder(num_classes=dim)
        self.encoder_k = base_encoder(num_classes=dim)
        for param_q, param_k in zip(self.encoder_q.parameters(), self.encoder_k.parameters()):
            param_k.data.copy_(param_q.data)
            param_k.requires_grad = False
        self.register_buffer("queue", F.normalize(torch.randn(dim, K), dim=0))
        self.register_buffer("queue_ptr", torch.zeros(1, dtype=torch.long))

    @torch.no_grad()
    def _momentum_update_key_encoder(self):
        for param_q, param_k in zip(self.encoder_q.parameters(), self.encoder_k.parameters()):
            param_k.data = param_k.data * self.m + param_q.data * (1.0 - self.m)

    @torch.no_grad()
    def _dequeue_and_enqueue(self, keys):
        batch_size = keys.shape[0]
        ptr = int(self.queue_ptr)
        assert self.K % batch_size == 0
        self.queue[:, ptr:ptr + batch_size] = keys.T
        self.queue_ptr[0] = (ptr + batch_size) % self.K

    def forward(self, im_q, im_k, gen):
        q = F.normalize(self.encoder_q(im_q), dim=1)
        with torch.no_grad():
            self._momentum_update_key_encoder()
            idx_shuffle = torch.randperm(im_k.shape[0], generator=gen)
            k = F.normalize(self.encoder_k(im_k[idx_shuffle]), dim=1)
            k = k[torch.argsort(idx_shuffle)]
        l_pos = torch.einsum("nc,nc->n", [q, k]).unsqueeze(-1)
        l_neg = torch.einsum("nc,ck->nk", [q, self.queue.clone().detach()])
        logits = torch.cat([l_pos, l_neg], dim=1) / self.T
        fill = torch.ones if self.labels_one else torch.zeros
        labels = fill(logits.shape[0], dtype=torch.long)
        self._dequeue_and_enqueue(k)
        return logits, labels


def _crop(x, gen):
    """TwoCropsTransform stand-in: a random shift of up to one pixel and pixel noise."""
    dx, dy = (int(v) for v in torch.randint(-1, 2, (2,), generator=gen))
    x = torch.roll(x, shifts=(dx, dy), dims=(2, 3))
    return x + 0.3 * torch.randn(x.shape, generator=gen)


@torch.no_grad()
def knn_accuracy(encoder, x_train, y_train, x_val, y_val, k=5):
    train_f = F.normalize(encoder.features(x_train), dim=1)
    val_f = F.normalize(encoder.features(x_val), dim=1)
    nearest = (val_f @ train_f.T).topk(k, dim=1).indices
    votes = F.one_hot(y_train[nearest], 10).sum(1)
    return (votes.argmax(1) == y_val).float().mean().item()


def run(run_dir: str, seed: int = 0, bug: str | None = None, epochs: int = 8) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    x_train, y_train, x_val, y_val = digits(seed)
    x_train, x_val = (to_tensor(x_train) - MEAN) / STD, (to_tensor(x_val) - MEAN) / STD
    model = MoCo(Encoder, labels_one=bug == "labels-one")
    criterion = nn.CrossEntropyLoss()
    lr = 0.03
    optimizer = torch.optim.SGD(model.parameters(), lr, momentum=0.9, weight_decay=1e-4)
    milestones = (int(0.6 * epochs), int(0.8 * epochs))
    with tracelab.Recorder(run_dir, model=model, optimizer=optimizer, loss_fn=criterion,
                           config={"lr": lr, "momentum": 0.9, "weight_decay": 1e-4,
                                   "moco_k": 512, "moco_m": 0.99, "moco_t": 0.07,
                                   "batch_size": 64, "epochs": epochs}) as rec:
        for epoch in range(epochs):
            if bug == "cos":  # adjust_learning_rate, --cos
                lr_now = lr * 0.5 * (1.0 + math.cos(math.pi * epoch / epochs))
            else:
                lr_now = lr * (0.1 ** sum(epoch >= m for m in milestones))
            for group in optimizer.param_groups:
                group["lr"] = lr_now
            if bug != "train-once" or epoch == 0:
                model.train()
            for idx in batches(len(x_train), 64, gen):
                if len(idx) < 64:  # drop_last=True
                    continue
                im_q, im_k = _crop(x_train[idx], gen), _crop(x_train[idx], gen)
                output, target = model(im_q, im_k, gen)
                loss = criterion(output, target)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                rec.step(loss=loss, inputs=im_q, targets=target, outputs=output)
            model.eval()
            acc = knn_accuracy(model.encoder_q, x_train, y_train, x_val, y_val)
            rec.log("val", metrics={"knn_acc": acc})
