"""A tiny MoCo training (a query encoder, a key encoder that follows it by momentum and holds
requires_grad=False, a queue of negative keys filled from it, InfoNCE over a temperature),
shared by the tests of the rules that read the loss's level. Imports torch: import it after
pytest.importorskip("torch")."""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

import tracelab


def moco(path, *, m: float = 0.99, lr: float = 0.03, steps: int = 180, queue: int = 512,
         batch: int = 64, noise: float = 0.3, seed: int = 0):
    """MoCo v1's step on Gaussian blobs with noisy "crops"; `m` is the key encoder's momentum
    (1.0: it never moves, a frozen copy of the initial query encoder). Returns the run path."""
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    centers = 3 * torch.randn(8, 16, generator=gen)
    x = centers[torch.randint(0, 8, (1024,), generator=gen)] + torch.randn(1024, 16,
                                                                          generator=gen)

    def encoder():
        return nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 16))

    model = nn.ModuleDict({"q": encoder(), "k": encoder()})
    for pq, pk in zip(model["q"].parameters(), model["k"].parameters()):
        pk.data.copy_(pq.data)
        pk.requires_grad = False
    keys = F.normalize(torch.randn(16, queue, generator=gen), dim=0)
    ptr = 0
    opt = torch.optim.SGD(model["q"].parameters(), lr, momentum=0.9, weight_decay=1e-4)
    loss_fn = nn.CrossEntropyLoss()
    with tracelab.Recorder(str(path), model=model, optimizer=opt, loss_fn=loss_fn) as rec:
        for step in range(steps):
            idx = torch.randint(0, len(x), (batch,), generator=gen)
            im_q = x[idx] + noise * torch.randn(batch, 16, generator=gen)
            im_k = x[idx] + noise * torch.randn(batch, 16, generator=gen)
            q = F.normalize(model["q"](im_q), dim=1)
            with torch.no_grad():
                for pq, pk in zip(model["q"].parameters(), model["k"].parameters()):
                    pk.data = pk.data * m + pq.data * (1.0 - m)
                k = F.normalize(model["k"](im_k), dim=1)
            logits = torch.cat([(q * k).sum(1, keepdim=True), q @ keys.clone()], dim=1) / 0.07
            target = torch.zeros(batch, dtype=torch.long)
            loss = loss_fn(logits, target)
            opt.zero_grad()
            loss.backward()
            opt.step()
            keys[:, ptr:ptr + batch] = k.T
            ptr = (ptr + batch) % queue
            rec.step(loss=loss, inputs=im_q, targets=target, outputs=logits)
    return path
