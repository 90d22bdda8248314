"""huggingface/transformers examples/pytorch/text-classification/run_glue_no_trainer.py, shrunk:
its loop (model.train() per epoch, loss / gradient_accumulation_steps, optimizer.step(),
lr_scheduler.step() and optimizer.zero_grad() every gradient_accumulation_steps batches,
model.eval() for the evaluation), AdamW over two parameter groups (weight decay 0.01, none for
biases and LayerNorm weights) and get_scheduler("linear", num_warmup_steps, max_train_steps).
The pretrained BERT is replaced by a two-layer BERT-style encoder trained from scratch (token and
position embeddings with LayerNorm, nn.TransformerEncoder with batch_first=True, a tanh pooler on
the [CLS] token, dropout 0.1 and a linear classifier; cross-entropy on the logits as
BertForSequenceClassification computes it); the data is a generated two-class token task
(GLUE/SST-2 stand-in); 6 epochs, batch 16, gradient_accumulation_steps 2, 10 warm-up steps,
lr 1e-3 (5e-5 is for a pretrained model).

`bug` plants one fault (None: the script as published):
- "seq-first": the encoder layers built without batch_first=True (the default), so the
  (batch, seq, hidden) embeddings are read as (seq, batch, hidden) and attention runs across
  the sentences of a batch instead of along each one;
- "frozen-encoder": the embeddings and encoder set to requires_grad=False ("freeze BERT"),
  leaving only the pooler and classifier to train.
"""
from __future__ import annotations

import math

import torch
import torch.nn as nn
from torch.optim.lr_scheduler import LambdaLR

import tracelab
from _z_data import batches, sentences

SOURCE = ("https://github.com/huggingface/transformers/blob/"
          "0310c247aafa21ef0567787645656d0ef1d42cf9/examples/pytorch/text-classification/"
          "run_glue_no_trainer.py")
BUGS = (None, "seq-first", "frozen-encoder")


class Embeddings(nn.Module):
    def __init__(self, vocab, hidden, max_len):
        super().__init__()
        self.word_embeddings = nn.Embedding(vocab, hidden)
        self.position_embeddings = nn.Embedding(max_len, hidden)
        self.LayerNorm = nn.LayerNorm(hidden)
        self.dropout = nn.Dropout(0.1)

    def forward(self, input_ids):
        pos = torch.arange(input_ids.shape[1]).unsqueeze(0)
        return self.dropout(self.LayerNorm(self.word_embeddings(input_ids)
                                           + self.position_embeddings(pos)))


class BertForSequenceClassification(nn.Module):
    def __init__(self, vocab=50, hidden=64, layers=2, heads=4, max_len=16, num_labels=2,
                 batch_first=True):
        super().__init__()
        self.embeddings = Embeddings(vocab, hidden, max_len)
        layer = nn.TransformerEncoderLayer(hidden, heads, 4 * hidden, dropout=0.1,
                                           activation="gelu", batch_first=batch_first)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.pooler = nn.Sequential(nn.Linear(hidden, hidden), nn.Tanh())
        self.dropout = nn.Dropout(0.1)
        self.classifier = nn.Linear(hidden, num_labels)

    def forward(self, input_ids):
        h = self.encoder(self.embeddings(input_ids))
        return self.classifier(self.dropout(self.pooler(h[:, 0])))


def get_linear_schedule_with_warmup(optimizer, num_warmup_steps, num_training_steps):
    def lr_lambda(current_step):
        if current_step < num_warmup_steps:
            return float(current_step) / float(max(1, num_warmup_steps))
        return max(0.0, float(num_training_steps - current_step)
                   / float(max(1, num_training_steps - num_warmup_steps)))
    return LambdaLR(optimizer, lr_lambda)


def run(run_dir: str, seed: int = 0, bug: str | None = None, epochs: int = 6) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    x_train, y_train, x_val, y_val = sentences(seed)
    model = BertForSequenceClassification(batch_first=bug != "seq-first")
    if bug == "frozen-encoder":
        for module in (model.embeddings, model.encoder):
            for p in module.parameters():
                p.requires_grad = False
    lr, weight_decay, accum, batch_size, warmup = 1e-3, 0.01, 2, 16, 10
    no_decay = ["bias", "LayerNorm.weight", "norm1.weight", "norm2.weight"]
    optimizer_grouped_parameters = [
        {"params": [p for n, p in model.named_parameters() if not any(nd in n for nd in no_decay)],
         "weight_decay": weight_decay},
        {"params": [p for n, p in model.named_parameters() if any(nd in n for nd in no_decay)],
         "weight_decay": 0.0},
    ]
    optimizer = torch.optim.AdamW(optimizer_grouped_parameters, lr=lr)
    n_batches = math.ceil(len(x_train) / batch_size)
    max_train_steps = epochs * math.ceil(n_batches / accum)
    lr_scheduler = get_linear_schedule_with_warmup(optimizer, warmup, max_train_steps)
    loss_fct = nn.CrossEntropyLoss()
    config = {"learning_rate": lr, "weight_decay": weight_decay, "num_train_epochs": epochs,
              "per_device_train_batch_size": batch_size, "gradient_accumulation_steps": accum,
              "lr_scheduler_type": "linear", "num_warmup_steps": warmup,
              "max_train_steps": max_train_steps}
    with tracelab.Recorder(run_dir, model=model, optimizer=optimizer, scheduler=lr_scheduler,
                           loss_fn=loss_fct, config=config) as rec:
        for epoch in range(epochs):
            model.train()
            for step, idx in enumerate(batches(len(x_train), batch_size, gen)):
                input_ids, labels = x_train[idx], y_train[idx]
                logits = model(input_ids)
                loss = loss_fct(logits, labels)
                loss = loss / accum
                loss.backward()
                if step % accum == 0 or step == n_batches - 1:
                    optimizer.step()
                    lr_scheduler.step()
                    optimizer.zero_grad()
                rec.step(loss=loss, inputs=input_ids, targets=labels, outputs=logits)
            model.eval()
            with torch.no_grad():
                logits = model(x_val)
                val_loss = loss_fct(logits, y_val).item()
                acc = (logits.argmax(-1) == y_val).float().mean().item()
            rec.log("val", metrics={"loss": val_loss, "accuracy": acc}, inputs=x_val,
                    targets=y_val, outputs=logits)
