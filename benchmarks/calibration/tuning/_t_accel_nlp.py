"""huggingface/accelerate examples/nlp_example.py, shrunk: a BertForSequenceClassification on
sentence pairs, AdamW, get_linear_schedule_with_warmup(num_warmup_steps, num_training_steps=
len(train_dataloader) * num_epochs // gradient_accumulation_steps), batch_size 32 split into
micro-batches of MAX_GPU_BATCH_SIZE=16 (gradient_accumulation_steps=2; loss divided by it;
optimizer.step(), lr_scheduler.step() and zero_grad() when step % 2 == 0), model.train() each
epoch and model.eval() for the evaluation loop (accuracy, as the GLUE MRPC metric gives it).
Nothing can be downloaded, so the checkpoint becomes a 2-layer BertConfig (hidden 32, 4 heads)
trained from scratch at lr=1e-3 (the script's 2e-5 is a fine-tuning rate), and MRPC becomes a
synthetic pair task: [CLS] A [SEP] B [SEP] labelled by whether the pair holds more
"positive" than "negative" words; 3 epochs become 5 and 100 warm-up steps 30.

`bug` plants one fault (None: the script as published):
- "sched-per-micro": lr_scheduler.step() called on every micro-batch while the schedule's
  length counts optimizer steps, so the LR reaches zero halfway through training;
- "frozen-bert": the encoder's parameters set requires_grad=False ("freeze BERT, train the
  classifier"), on a model that has no pretrained weights to keep.
"""
from __future__ import annotations

import torch
import torch.nn as nn
from transformers import BertConfig, BertForSequenceClassification, get_linear_schedule_with_warmup
from transformers.utils import logging as hf_logging

import tracelab

SOURCE = ("https://github.com/huggingface/accelerate/blob/"
          "16cb6eb80dd9aa8b4df1a63ef57863e455d53b83/examples/nlp_example.py")
BUGS = (None, "sched-per-micro", "frozen-bert")
MAX_GPU_BATCH_SIZE, EVAL_BATCH_SIZE = 16, 32
VOCAB, LEN = 40, 8  # ids 0-3 special ([PAD], [CLS], [SEP], unused); words 4-39


def pairs(n: int, gen: torch.Generator):
    """Sentence pairs whose label says whether the pair holds more "positive" words (ids 4-13)
    than "negative" ones (ids 14-23); ids 24-39 are neutral; ties are redrawn as neutral."""
    a = torch.randint(4, VOCAB, (n, LEN), generator=gen)
    b = torch.randint(4, VOCAB, (n, LEN), generator=gen)
    both = torch.cat([a, b], dim=1)
    pos = ((both >= 4) & (both < 14)).sum(1)
    neg = ((both >= 14) & (both < 24)).sum(1)
    tie = pos == neg
    a[tie, 0] = 4  # one more positive word breaks the tie
    label = (pos + tie.long() > neg).long()
    cls, sep = torch.full((n, 1), 1), torch.full((n, 1), 2)
    ids = torch.cat([cls, a, sep, b, sep], dim=1)
    types = torch.cat([torch.zeros(n, LEN + 2, dtype=torch.long),
                       torch.ones(n, LEN + 1, dtype=torch.long)], dim=1)
    return {"input_ids": ids, "token_type_ids": types,
            "attention_mask": torch.ones_like(ids), "labels": label}


def run(run_dir: str, seed: int = 0, bug: str | None = None, num_epochs: int = 5) -> None:
    assert bug in BUGS, bug
    hf_logging.set_verbosity_error()
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    lr, batch_size = 1e-3, 32
    gradient_accumulation_steps = batch_size // MAX_GPU_BATCH_SIZE
    batch_size = MAX_GPU_BATCH_SIZE
    train, val = pairs(960, gen), pairs(320, gen)
    n_batches = len(train["labels"]) // batch_size  # drop_last=True
    config = BertConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2,
                        num_attention_heads=4, intermediate_size=64,
                        max_position_embeddings=32, num_labels=2)
    model = BertForSequenceClassification(config)
    if bug == "frozen-bert":
        for param in model.bert.parameters():
            param.requires_grad = False
    optimizer = torch.optim.AdamW(params=model.parameters(), lr=lr)
    lr_scheduler = get_linear_schedule_with_warmup(
        optimizer=optimizer, num_warmup_steps=30,
        num_training_steps=(n_batches * num_epochs) // gradient_accumulation_steps)
    with tracelab.Recorder(run_dir, model=model, optimizer=optimizer, scheduler=lr_scheduler,
                           loss_fn=nn.CrossEntropyLoss(),
                           config={"lr": lr, "batch_size": 32, "num_epochs": num_epochs,
                                   "gradient_accumulation_steps": gradient_accumulation_steps,
                                   "num_warmup_steps": 30}) as rec:
        for _epoch in range(num_epochs):
            model.train()
            order = torch.randperm(len(train["labels"]), generator=gen)
            for step in range(n_batches):
                idx = order[step * batch_size:(step + 1) * batch_size]
                batch = {k: v[idx] for k, v in train.items()}
                outputs = model(**batch)
                loss = outputs.loss
                rec.accumulate_loss(loss)
                loss = loss / gradient_accumulation_steps
                loss.backward()
                if step % gradient_accumulation_steps == 0:
                    optimizer.step()
                    if bug != "sched-per-micro":
                        lr_scheduler.step()
                    optimizer.zero_grad()
                if bug == "sched-per-micro":
                    lr_scheduler.step()
                if step % gradient_accumulation_steps == 0:
                    rec.step(inputs=batch["input_ids"], targets=batch["labels"],
                             outputs=outputs.logits)
            model.eval()
            correct, losses = 0, []
            for start in range(0, len(val["labels"]), EVAL_BATCH_SIZE):
                batch = {k: v[start:start + EVAL_BATCH_SIZE] for k, v in val.items()}
                with torch.no_grad():
                    outputs = model(**batch)
                losses.append(outputs.loss.item())
                correct += (outputs.logits.argmax(dim=-1) == batch["labels"]).sum().item()
            rec.log("val", metrics={"loss": sum(losses) / len(losses),
                                    "accuracy": correct / len(val["labels"])},
                    inputs=batch["input_ids"], targets=batch["labels"], outputs=outputs.logits)
