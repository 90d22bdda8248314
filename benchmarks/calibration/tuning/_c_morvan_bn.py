"""MorvanZhou/PyTorch-Tutorial tutorial-contents/504_batch_normalization.py, shrunk: its Net (8 hidden
Linear(10) layers with tanh, weights N(0, 0.1), every bias the "bad" constant -0.2, BatchNorm1d
(momentum=0.5) on the input and after every hidden layer when batch_normalization=True), MSELoss,
Adam(lr=0.03), batches of 64 from 2,000 noisy points of y = x^2 - 5, 12 epochs, and its per-epoch
test pass: net.eval() on 200 test points, then net.train(). The script trains the BN net and the
plain net side by side to compare them; here one run trains one net (the BN net is the healthy
run). Nothing is shrunk but the plotting, dropped; num_workers=2 becomes in-process batching.

`bug` plants one fault (None: the BN net as published):
- "no-bn": the script's other net, batch_normalization=False: 8 tanh layers, no BatchNorm;
- "no-train": net.train() left out after the test pass, so every epoch trains in eval mode;
- "batch-4": BATCH_SIZE=4 (BatchNorm1d estimating statistics on 4 points), 3 epochs (the same
  number of steps would take 16x longer);
- "relu": healthy, the BN net with ACTIVATION = torch.relu instead of torch.tanh.
"""
from __future__ import annotations

import numpy as np
import torch
from torch import nn
from torch.nn import init

import tracelab

SOURCE = ("https://github.com/MorvanZhou/PyTorch-Tutorial/blob/dbe154a9e56635e51c6b0c2ccea8ae36cfb585a7/"
          "tutorial-contents/504_batch_normalization.py")
BUGS = (None, "no-bn", "no-train", "batch-4", "relu")

N_SAMPLES = 2000
BATCH_SIZE = 64
EPOCH = 12
LR = 0.03
N_HIDDEN = 8
ACTIVATION = torch.tanh
B_INIT = -0.2   # use a bad bias constant initializer


class Net(nn.Module):
    def __init__(self, batch_normalization=False, activation=ACTIVATION):
        super().__init__()
        self.activation = activation
        self.do_bn = batch_normalization
        self.fcs = []
        self.bns = []
        self.bn_input = nn.BatchNorm1d(1, momentum=0.5)   # for input data

        for i in range(N_HIDDEN):               # build hidden layers and BN layers
            input_size = 1 if i == 0 else 10
            fc = nn.Linear(input_size, 10)
            setattr(self, 'fc%i' % i, fc)       # IMPORTANT set layer to the Module
            self._set_init(fc)                  # parameters initialization
            self.fcs.append(fc)
            if self.do_bn:
                bn = nn.BatchNorm1d(10, momentum=0.5)
                setattr(self, 'bn%i' % i, bn)   # IMPORTANT set layer to the Module
                self.bns.append(bn)

        self.predict = nn.Linear(10, 1)         # output layer
        self._set_init(self.predict)            # parameters initialization

    def _set_init(self, layer):
        init.normal_(layer.weight, mean=0., std=.1)
        init.constant_(layer.bias, B_INIT)

    def forward(self, x):
        if self.do_bn:
            x = self.bn_input(x)                # input batch normalization
        for i in range(N_HIDDEN):
            x = self.fcs[i](x)
            if self.do_bn:
                x = self.bns[i](x)              # batch normalization
            x = self.activation(x)
        return self.predict(x)


def run(run_dir: str, seed: int = 0, bug: str | None = None) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    gen = torch.Generator().manual_seed(seed)
    x = np.linspace(-7, 10, N_SAMPLES)[:, np.newaxis]
    y = np.square(x) - 5 + rng.normal(0, 2, x.shape)
    test_x = np.linspace(-7, 10, 200)[:, np.newaxis]
    test_y = np.square(test_x) - 5 + rng.normal(0, 2, test_x.shape)
    train_x, train_y = torch.from_numpy(x).float(), torch.from_numpy(y).float()
    test_x, test_y = torch.from_numpy(test_x).float(), torch.from_numpy(test_y).float()
    batch_size, epochs = (4, 3) if bug == "batch-4" else (BATCH_SIZE, EPOCH)

    net = Net(batch_normalization=bug != "no-bn",
              activation=torch.relu if bug == "relu" else ACTIVATION)
    opt = torch.optim.Adam(net.parameters(), lr=LR)
    loss_func = torch.nn.MSELoss()
    with tracelab.Recorder(run_dir, model=net, optimizer=opt, loss_fn=loss_func,
                           config={"batch_size": batch_size, "epochs": epochs, "lr": LR,
                                   "n_hidden": N_HIDDEN, "b_init": B_INIT}) as rec:
        for epoch in range(epochs):
            net.eval()              # set eval mode to fix moving_mean and moving_var
            with torch.no_grad():
                pred = net(test_x)
            rec.log("val", metrics={"loss": loss_func(pred, test_y).item()}, inputs=test_x,
                    targets=test_y, outputs=pred)
            if bug != "no-train":
                net.train()         # free moving_mean and moving_var
            for idx in torch.randperm(N_SAMPLES, generator=gen).split(batch_size):
                b_x, b_y = train_x[idx], train_y[idx]
                pred = net(b_x)
                loss = loss_func(pred, b_y)
                opt.zero_grad()
                loss.backward()
                opt.step()    # it will also learns the parameters in Batch Normalization
                rec.step(loss=loss, inputs=b_x, targets=b_y, outputs=pred)
        net.eval()
        with torch.no_grad():
            pred = net(test_x)
        rec.log("val", metrics={"loss": loss_func(pred, test_y).item()}, inputs=test_x,
                targets=test_y, outputs=pred)
