"""dsgiitr/d2l-pytorch Ch10 Long_Short_Term_Memory.ipynb, concise implementation, shrunk:
nn.LSTM(input_size=len(vocab), hidden_size=num_hiddens) (sequence-first), d2l's RNNModel
(one-hot inputs transposed to (num_steps, batch), a Linear on every hidden state),
train_and_predict_rnn_nn: consecutive sampling with the state carried and detached between
batches (state=None at each epoch start), CrossEntropyLoss on the flattened outputs and the
transposed targets, grad_clipping(params, clipping_theta=1) before SGD(lr=3).
Text: a generated character corpus; num_hiddens 64 (of 256), num_steps 20 (of 35), batch 16
(of 32), 12 epochs.

`bug` (None: as published):
- "batch-first": the one-hot batch is built as (batch, num_steps, vocab) without the transpose
  and fed to the sequence-first LSTM (the targets flattened to match).
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

import tracelab
from _x_data import corpus

SOURCE = ("https://github.com/dsgiitr/d2l-pytorch/blob/79a0f08c79a32d4380cbc958c05206ad80870c6d/"
          "Ch10_Recurrent_Neural_Networks/Long_Short_Term_Memory.ipynb")
BUGS = (None, "batch-first")


class RNNModel(nn.Module):
    def __init__(self, rnn_layer, num_hiddens, vocab_size):
        super().__init__()
        self.rnn, self.vocab_size = rnn_layer, vocab_size
        self.dense = nn.Linear(num_hiddens, vocab_size)

    def forward(self, inputs, state, batch_first_bug=False):
        idx = inputs if batch_first_bug else inputs.T
        X = F.one_hot(idx.long(), self.vocab_size).float()
        Y, state = self.rnn(X, state)
        return self.dense(Y.reshape(-1, Y.shape[-1])), state


def grad_clipping(params, theta):
    norm = torch.sqrt(sum((p.grad ** 2).sum() for p in params))
    if norm > theta:
        for p in params:
            p.grad.mul_(theta / norm)


def data_iter_consecutive(indices, batch_size, num_steps):
    data_len = len(indices) // batch_size * batch_size
    idx = torch.tensor(indices[:data_len]).view(batch_size, -1)
    for i in range((idx.shape[1] - 1) // num_steps):
        j = i * num_steps
        yield idx[:, j:j + num_steps], idx[:, j + 1:j + num_steps + 1]


def run(run_dir: str, seed: int = 0, bug: str | None = None, num_epochs: int = 12) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    text = corpus(seed)
    vocab = sorted(set(text))
    char_to_idx = {c: i for i, c in enumerate(vocab)}
    corpus_indices = [char_to_idx[c] for c in text]
    num_hiddens, num_steps, batch_size, lr, clipping_theta = 64, 20, 16, 3.0, 1.0
    model = RNNModel(nn.LSTM(input_size=len(vocab), hidden_size=num_hiddens), num_hiddens,
                     len(vocab))
    loss = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    params = list(model.parameters())
    with tracelab.Recorder(run_dir, model=model, optimizer=optimizer, loss_fn=loss,
                           config={"lr": lr, "clipping_theta": clipping_theta,
                                   "num_steps": num_steps, "batch_size": batch_size,
                                   "num_hiddens": num_hiddens}) as rec:
        for _ in range(num_epochs):
            state = None
            for X, Y in data_iter_consecutive(corpus_indices, batch_size, num_steps):
                if state is not None:
                    state = tuple(s.detach() for s in state)
                output, state = model(X, state, batch_first_bug=bug == "batch-first")
                y = (Y if bug == "batch-first" else Y.T).reshape(-1)
                l = loss(output, y.long())
                optimizer.zero_grad()
                l.backward()
                grad_clipping(params, clipping_theta)
                optimizer.step()
                rec.step(loss=l, inputs=X, targets=y, outputs=output)
