"""davidtvs/pytorch-lr-finder examples/lrfinder_mnist_gradient_accumulation.ipynb, shrunk: its
ConvNet (the MNIST Net of lrfinder_mnist.ipynb), NLLLoss, SGD(momentum=0.5), DESIRED_BATCH_SIZE
256 reached with batch_size 8 and accumulation_steps = 256 // 8 = 32, each micro-batch loss
divided by accumulation_steps before backward() as LRFinder._train_batch does; then the training
at the learning rate read off the range test (0.05), model.train() / model.eval() around a
validation pass each epoch, 10 epochs. The Recorder gets each micro-batch loss through
rec.accumulate_loss() and one step() per optimizer step, as docs/recording.md says. Data:
scikit-learn's 8x8 digits upsampled to 28x28, 300 held out.

`bug` (None: the accumulation as published):
- "zero-grad-per-micro-batch": optimizer.zero_grad() moved inside the micro-batch loop, so each
  optimizer step uses the last micro-batch's gradient only (divided by 32).
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.optim as optim

import tracelab
from _p_data import digits
from _p_lrfinder import Net, _prep

SOURCE = ("https://github.com/davidtvs/pytorch-lr-finder/blob/"
          "76df3050c5554d698cb618e792957873bc878b30/examples/"
          "lrfinder_mnist_gradient_accumulation.ipynb")
BUGS = (None, "zero-grad-per-micro-batch")


def run(run_dir: str, seed: int = 0, bug: str | None = None, epochs: int = 10) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    x_tr, y_tr, x_va, y_va = digits(seed)
    x_tr, x_va = _prep(x_tr), _prep(x_va)
    desired_batch_size, batch_size, lr = 256, 8, 0.05
    accumulation_steps = desired_batch_size // batch_size
    model = Net()
    criterion = nn.NLLLoss()
    optimizer = optim.SGD(model.parameters(), lr=lr, momentum=0.5)
    gen = torch.Generator().manual_seed(seed)
    with tracelab.Recorder(run_dir, model=model, optimizer=optimizer, loss_fn=criterion,
                           config={"lr": lr, "momentum": 0.5, "batch_size": batch_size,
                                   "accumulation_steps": accumulation_steps}) as rec:
        for epoch in range(epochs):
            model.train()
            micro = list(torch.randperm(len(x_tr), generator=gen).split(batch_size))
            for start in range(0, len(micro) - accumulation_steps + 1, accumulation_steps):
                optimizer.zero_grad()
                for idx in micro[start:start + accumulation_steps]:
                    if bug == "zero-grad-per-micro-batch":
                        optimizer.zero_grad()
                    inputs, labels = x_tr[idx], y_tr[idx]
                    outputs = model(inputs)
                    loss = criterion(outputs, labels)
                    loss /= accumulation_steps
                    loss.backward()
                    rec.accumulate_loss(loss * accumulation_steps)
                optimizer.step()
                rec.step(inputs=inputs, targets=labels, outputs=outputs)
            model.eval()
            with torch.no_grad():
                outputs = model(x_va)
                vloss = criterion(outputs, y_va).item()
                acc = (outputs.argmax(1) == y_va).float().mean().item()
            rec.log("val", metrics={"loss": vloss, "acc": acc}, inputs=x_va, targets=y_va,
                    outputs=outputs)
    print(f"    accum bug={bug}: val acc {acc:.3f} loss {vloss:.3f}")
