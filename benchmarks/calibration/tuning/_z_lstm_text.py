"""prakashpandey9/Text-Classification-Pytorch main.py + models/LSTM.py, shrunk: LSTMClassifier
(an embedding table holding frozen pretrained vectors, requires_grad=False; input.permute(1, 0, 2)
to (num_sequences, batch_size, embedding_length); nn.LSTM with zero (h_0, c_0) of the fixed
batch_size; a linear layer on the final hidden state), F.cross_entropy, train_model() (Adam over
the parameters that require grad, default lr 1e-3 -- built once here so the Recorder can be
given it, where the script builds a new one at every epoch; model.train();
batches of another size than 32 skipped; clip_gradient(model, 1e-1) clamping each gradient
value before optim.step()) and eval_model() under model.eval() and no_grad. The GloVe vectors
are replaced by a fixed random table (vocabulary 50, length 64), IMDB by a generated two-class
token task with sentences of 32 tokens; hidden_size 64; 8 epochs.

`bug` plants one fault (None: the script as published):
- "no-permute": the input.permute(1, 0, 2) left out, so the batch-first embeddings go into the
  sequence-first nn.LSTM (the batch of 32 read as 32 time steps, the 32 time steps as the batch);
- "lr-2e-5": the script's learning_rate = 2e-5 passed to Adam (lr=learning_rate), the value
  main.py defines for a model whose embeddings are frozen, instead of Adam's default.
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

import tracelab
from _z_data import batches, sentences

SOURCE = ("https://github.com/prakashpandey9/Text-Classification-Pytorch/blob/"
          "8649eec7a840d55e314b4b992048f3ce966fd05d/models/LSTM.py")
BUGS = (None, "no-permute", "lr-2e-5")


class LSTMClassifier(nn.Module):
    def __init__(self, batch_size, output_size, hidden_size, vocab_size, embedding_length,
                 weights, permute=True):
        super().__init__()
        self.batch_size = batch_size
        self.hidden_size = hidden_size
        self.word_embeddings = nn.Embedding(vocab_size, embedding_length)
        self.word_embeddings.weight = nn.Parameter(weights, requires_grad=False)
        self.lstm = nn.LSTM(embedding_length, hidden_size)
        self.label = nn.Linear(hidden_size, output_size)
        self.permute = permute

    def forward(self, input_sentence, batch_size=None):
        input = self.word_embeddings(input_sentence)
        if self.permute:
            input = input.permute(1, 0, 2)
        n = self.batch_size if batch_size is None else batch_size
        h_0 = torch.zeros(1, n, self.hidden_size)
        c_0 = torch.zeros(1, n, self.hidden_size)
        output, (final_hidden_state, final_cell_state) = self.lstm(input, (h_0, c_0))
        return self.label(final_hidden_state[-1])


def clip_gradient(model, clip_value):
    params = list(filter(lambda p: p.grad is not None, model.parameters()))
    for p in params:
        p.grad.data.clamp_(-clip_value, clip_value)


def run(run_dir: str, seed: int = 0, bug: str | None = None, epochs: int = 8) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    x_train, y_train, x_val, y_val = sentences(seed, length=32)
    batch_size, output_size, hidden_size, vocab_size, embedding_length = 32, 2, 64, 50, 64
    word_embeddings = torch.randn(vocab_size, embedding_length, generator=gen)
    model = LSTMClassifier(batch_size, output_size, hidden_size, vocab_size, embedding_length,
                           word_embeddings, permute=bug != "no-permute")
    loss_fn = F.cross_entropy
    lr = 2e-5 if bug == "lr-2e-5" else 1e-3
    optim = torch.optim.Adam(filter(lambda p: p.requires_grad, model.parameters()), lr=lr)
    config = {"batch_size": batch_size, "hidden_size": hidden_size,
              "embedding_length": embedding_length, "output_size": output_size,
              "learning_rate": lr, "clip_value": 1e-1, "epochs": epochs}
    with tracelab.Recorder(run_dir, model=model, optimizer=optim, loss_fn=nn.CrossEntropyLoss(),
                           config=config) as rec:
        for epoch in range(epochs):
            model.train()
            for idx in batches(len(x_train), batch_size, gen):
                text, target = x_train[idx], y_train[idx]
                if text.size()[0] != 32:
                    continue
                optim.zero_grad()
                prediction = model(text)
                loss = loss_fn(prediction, target)
                loss.backward()
                clip_gradient(model, 1e-1)
                optim.step()
                rec.step(loss=loss, inputs=text, targets=target, outputs=prediction)
            model.eval()
            losses, correct, seen = [], 0, 0
            with torch.no_grad():
                for start in range(0, len(x_val) - 31, 32):
                    text, target = x_val[start:start + 32], y_val[start:start + 32]
                    prediction = model(text)
                    losses.append(loss_fn(prediction, target).item())
                    correct += (prediction.argmax(1) == target).sum().item()
                    seen += len(target)
            rec.log("val", metrics={"loss": sum(losses) / len(losses), "acc": correct / seen},
                    inputs=text, targets=target, outputs=prediction)
