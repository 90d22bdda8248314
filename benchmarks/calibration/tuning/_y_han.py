"""sgrvinod/a-PyTorch-Tutorial-to-Text-Classification train.py with model.py, shrunk: the
HierarchialAttentionNetwork (WordAttention: embeddings, dropout, a bidirectional GRU with
batch_first=True over the words, tanh attention scored by a word context vector and normalized
after subtracting the max; SentenceAttention: the same over sentences; dropout and an fc on the
document vector), nn.CrossEntropyLoss(), optim.Adam(lr=1e-3) over the parameters requiring grad,
model.train(), adjust_learning_rate(optimizer, 0.1) after each of the 2 epochs, batch 64, dropout
0.3, fine-tuned embeddings. The Yahoo Answers CSVs and word2vec are replaced by synthetic
documents (4 classes, 4 sentences of 8 words from a vocabulary of 300, each sentence holding two
of the class's 10 keywords, randomly initialized embeddings of 32), all of the same length so the
packed sequences of the script are plain padded tensors; word and sentence GRUs of 24, attention
of 32; 2400 training and 400 validation documents, the validation pass (model.eval()) logged after
each epoch and every 10 batches.

`bug`: None only (the script as published; a healthy scenario).
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.optim as optim

import tracelab

SOURCE = ("https://github.com/sgrvinod/a-PyTorch-Tutorial-to-Text-Classification/blob/"
          "ec11e234bbbae2adcd7d665489999410911a9fb4/train.py")
BUGS = (None,)
N_CLASSES, VOCAB, SENTS, WORDS = 4, 300, 4, 8


class WordAttention(nn.Module):
    def __init__(self, vocab_size, emb_size, word_rnn_size, word_rnn_layers, word_att_size,
                 dropout, batch_first=True):
        super().__init__()
        self.embeddings = nn.Embedding(vocab_size, emb_size)
        self.word_rnn = nn.GRU(emb_size, word_rnn_size, num_layers=word_rnn_layers,
                               bidirectional=True, batch_first=batch_first)
        self.word_attention = nn.Linear(2 * word_rnn_size, word_att_size)
        self.word_context_vector = nn.Linear(word_att_size, 1, bias=False)
        self.dropout = nn.Dropout(dropout)

    def fine_tune_embeddings(self, fine_tune=False):
        for p in self.embeddings.parameters():
            p.requires_grad = fine_tune

    def forward(self, sentences):
        sentences = self.dropout(self.embeddings(sentences))
        words, _ = self.word_rnn(sentences)
        att_w = torch.tanh(self.word_attention(words))
        att_w = self.word_context_vector(att_w).squeeze(2)
        att_w = torch.exp(att_w - att_w.max())
        word_alphas = att_w / torch.sum(att_w, dim=1, keepdim=True)
        return (words * word_alphas.unsqueeze(2)).sum(dim=1), word_alphas


class SentenceAttention(nn.Module):
    def __init__(self, vocab_size, emb_size, word_rnn_size, sentence_rnn_size, word_rnn_layers,
                 sentence_rnn_layers, word_att_size, sentence_att_size, dropout,
                 word_batch_first=True):
        super().__init__()
        self.word_attention = WordAttention(vocab_size, emb_size, word_rnn_size, word_rnn_layers,
                                            word_att_size, dropout, word_batch_first)
        self.sentence_rnn = nn.GRU(2 * word_rnn_size, sentence_rnn_size,
                                   num_layers=sentence_rnn_layers, bidirectional=True,
                                   batch_first=True)
        self.sentence_attention = nn.Linear(2 * sentence_rnn_size, sentence_att_size)
        self.sentence_context_vector = nn.Linear(sentence_att_size, 1, bias=False)
        self.dropout = nn.Dropout(dropout)

    def forward(self, documents):
        n_docs, n_sents, n_words = documents.shape
        sentences, word_alphas = self.word_attention(documents.reshape(n_docs * n_sents, n_words))
        sentences = self.dropout(sentences).reshape(n_docs, n_sents, -1)
        sents, _ = self.sentence_rnn(sentences)
        att_s = torch.tanh(self.sentence_attention(sents))
        att_s = self.sentence_context_vector(att_s).squeeze(2)
        att_s = torch.exp(att_s - att_s.max())
        sentence_alphas = att_s / torch.sum(att_s, dim=1, keepdim=True)
        docs = (sents * sentence_alphas.unsqueeze(2)).sum(dim=1)
        return docs, word_alphas.reshape(n_docs, n_sents, n_words), sentence_alphas


class HierarchialAttentionNetwork(nn.Module):
    def __init__(self, n_classes, vocab_size, emb_size, word_rnn_size, sentence_rnn_size,
                 word_rnn_layers, sentence_rnn_layers, word_att_size, sentence_att_size,
                 dropout=0.5, word_batch_first=True):
        super().__init__()
        self.sentence_attention = SentenceAttention(
            vocab_size, emb_size, word_rnn_size, sentence_rnn_size, word_rnn_layers,
            sentence_rnn_layers, word_att_size, sentence_att_size, dropout, word_batch_first)
        self.fc = nn.Linear(2 * sentence_rnn_size, n_classes)
        self.dropout = nn.Dropout(dropout)

    def forward(self, documents):
        document_embeddings, word_alphas, sentence_alphas = self.sentence_attention(documents)
        return self.fc(self.dropout(document_embeddings)), word_alphas, sentence_alphas


def make_documents(seed: int, n: int):
    g = torch.Generator().manual_seed(500 + seed)
    labels = torch.randint(0, N_CLASSES, (n,), generator=g)
    docs = torch.randint(N_CLASSES * 10, VOCAB, (n, SENTS, WORDS), generator=g)
    for i in range(n):
        for s in range(SENTS):
            for w in torch.randperm(WORDS, generator=g)[:2].tolist():
                docs[i, s, w] = int(labels[i]) * 10 + int(torch.randint(0, 10, (1,),
                                                                       generator=g))
    return docs, labels


def adjust_learning_rate(optimizer, scale_factor):
    for param_group in optimizer.param_groups:
        param_group['lr'] = param_group['lr'] * scale_factor


def run(run_dir: str, seed: int = 0, bug: str | None = None, epochs: int = 2) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    docs, labels = make_documents(seed, 2800)
    x_train, y_train, x_val, y_val = docs[:2400], labels[:2400], docs[2400:], labels[2400:]
    model = HierarchialAttentionNetwork(n_classes=N_CLASSES, vocab_size=VOCAB, emb_size=32,
                                        word_rnn_size=24, sentence_rnn_size=24,
                                        word_rnn_layers=1, sentence_rnn_layers=1,
                                        word_att_size=32, sentence_att_size=32, dropout=0.3)
    model.sentence_attention.word_attention.fine_tune_embeddings(True)
    optimizer = optim.Adam(params=filter(lambda p: p.requires_grad, model.parameters()), lr=1e-3)
    criterion = nn.CrossEntropyLoss()

    def validate():
        model.eval()
        with torch.no_grad():
            scores, _, _ = model(x_val)
            loss = criterion(scores, y_val).item()
            acc = scores.argmax(1).eq(y_val).float().mean().item()
        rec.log("val", metrics={"loss": loss, "acc": acc}, inputs=x_val, targets=y_val,
                outputs=scores)
        model.train()

    with tracelab.Recorder(run_dir, model=model, optimizer=optimizer, loss_fn=criterion,
                           config={"lr": 1e-3, "batch_size": 64, "dropout": 0.3,
                                   "epochs": epochs}) as rec:
        for _ in range(epochs):
            model.train()
            for i, idx in enumerate(torch.randperm(len(x_train), generator=gen).split(64)):
                documents, target = x_train[idx], y_train[idx]
                scores, word_alphas, sentence_alphas = model(documents)
                loss = criterion(scores, target)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                rec.step(loss=loss, inputs=documents, targets=target, outputs=scores)
                if i % 10 == 9:
                    validate()
            validate()
            adjust_learning_rate(optimizer, 0.1)
