"""udacity/deep-learning-v2-pytorch sentiment-rnn/Sentiment_RNN_Solution.ipynb, shrunk: the same
SentimentRNN (Embedding, 2-layer LSTM with dropout and batch_first=True, last step, Dropout(0.3),
Linear, Sigmoid) trained with BCELoss, Adam, clip_grad_norm_ between backward and step,
batch size 50, validation every 100 steps between net.eval() and net.train(). Synthetic reviews
instead of the IMDB text: 24 tokens drawn from 60 words, positive when more of them come from
the ten "good" words than from the ten "bad" ones. The hidden state starts at zero for each
batch (the notebook carries it, detached, from batch to batch). clip=1 instead of 5: this
small model's gradient norms stay below 5, where the clipping would never act.

Bugs (`bug=`): "seq-first" (the LSTM built without batch_first=True, so it reads the batch
as time), "clip-after-step" (clip_grad_norm_ called after optimizer.step())."""
from __future__ import annotations

import torch
from torch import nn

import tracelab

VOCAB, SEQ, GOOD, BAD = 60, 24, range(1, 11), range(11, 21)


class SentimentRNN(nn.Module):
    def __init__(self, vocab_size, output_size, embedding_dim, hidden_dim, n_layers,
                 drop_prob=0.5, batch_first=True):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embedding_dim)
        self.lstm = nn.LSTM(embedding_dim, hidden_dim, n_layers, dropout=drop_prob,
                            batch_first=batch_first)
        self.dropout = nn.Dropout(0.3)
        self.fc = nn.Linear(hidden_dim, output_size)
        self.sig = nn.Sigmoid()

    def forward(self, x):
        embeds = self.embedding(x.long())
        lstm_out, _ = self.lstm(embeds)
        lstm_out = lstm_out[:, -1, :]
        out = self.fc(self.dropout(lstm_out))
        return self.sig(out)


def reviews(n: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """(token ids (n, SEQ), 0/1 labels (n,)), ties broken towards negative."""
    x = torch.randint(1, VOCAB, (n, SEQ), generator=generator)
    good = ((x >= GOOD.start) & (x < GOOD.stop)).sum(1)
    bad = ((x >= BAD.start) & (x < BAD.stop)).sum(1)
    return x, (good > bad).long()


def train(run_dir: str, seed: int = 0, *, bug: str | None = None, steps: int = 400,
          lr: float = 0.005, clip: float = 1.0) -> None:
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    x_tr, y_tr = reviews(4000, gen)
    x_va, y_va = reviews(500, gen)
    net = SentimentRNN(VOCAB, 1, 16, 32, 2, batch_first=bug != "seq-first")
    criterion = nn.BCELoss()
    optimizer = torch.optim.Adam(net.parameters(), lr=lr)
    batch_size, print_every = 50, 100
    counter = 0
    with tracelab.Recorder(run_dir, model=net, optimizer=optimizer, loss_fn=criterion,
                           config={"lr": lr, "clip": clip, "batch_size": batch_size}) as rec:
        net.train()
        while counter < steps:
            for idx in torch.randperm(len(x_tr), generator=gen).split(batch_size):
                counter += 1
                inputs, labels = x_tr[idx], y_tr[idx]
                net.zero_grad()
                output = net(inputs)
                loss = criterion(output.squeeze(), labels.float())
                loss.backward()
                if bug != "clip-after-step":
                    nn.utils.clip_grad_norm_(net.parameters(), clip)
                optimizer.step()
                if bug == "clip-after-step":
                    nn.utils.clip_grad_norm_(net.parameters(), clip)
                rec.step(loss=loss, inputs=inputs, targets=labels.float(),
                         outputs=output.squeeze())
                if counter % print_every == 0:
                    net.eval()
                    with torch.no_grad():
                        out = net(x_va).squeeze()
                        val_loss = criterion(out, y_va.float())
                        val_acc = ((out > 0.5).long() == y_va).float().mean()
                    rec.log("val", metrics={"loss": val_loss, "acc": val_acc}, inputs=x_va,
                            targets=y_va.float(), outputs=out)
                    net.train()
                if counter >= steps:
                    break
