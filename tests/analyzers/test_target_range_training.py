"""target-problems' class-index range on real tiny trainings: the output layer's size comes from
the recorded shapes of what enters the loss, so a head tied to the input embedding (listed once,
as the embedding) is not mistaken for a smaller layer, while indices past the outputs still
fire."""
import pytest

from tracelab.analyzers.target_problems import target_problems
from tracelab.core.run import open_run

torch = pytest.importorskip("torch")
nn = torch.nn
F = torch.nn.functional

import tracelab  # noqa: E402

VOCAB, WIDTH = 40, 16


class TiedLM(nn.Module):
    """Embedding -> hidden Linear -> head whose weight is the embedding's (tied): the model's
    last listed weight matrix is the hidden layer's (WIDTH rows), not the head's VOCAB."""

    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(VOCAB, WIDTH)
        self.hidden = nn.Linear(WIDTH, WIDTH)
        self.head = nn.Linear(WIDTH, VOCAB, bias=False)
        self.head.weight = self.wte.weight

    def forward(self, idx):
        return self.head(torch.tanh(self.hidden(self.wte(idx))))


def _lm(path):
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    data = torch.randint(0, VOCAB, (4000,), generator=g)
    model = TiedLM()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    with tracelab.Recorder(str(path), model=model, optimizer=opt) as rec:
        for _ in range(40):
            ix = torch.randint(len(data) - 9, (8,), generator=g)
            x = torch.stack([data[i:i + 8] for i in ix])
            y = torch.stack([data[i + 1:i + 9] for i in ix])
            logits = model(x)
            loss = F.cross_entropy(logits.view(-1, VOCAB), y.view(-1))
            opt.zero_grad()
            loss.backward()
            opt.step()
            rec.step(loss=loss, inputs=x, targets=y, outputs=logits)
    return path


def _classifier(path, classes: int):
    """An MLP of 4 outputs given labels 0..classes-1; the loss silently drops the rows whose
    label is past the outputs (as a clamp or an ignore mask somewhere would)."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(2048, 8, generator=g)
    y = torch.randint(0, classes, (2048,), generator=g)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    with tracelab.Recorder(str(path), model=model, optimizer=opt) as rec:
        for step in range(40):
            xb, yb = x[32 * step:32 * step + 32], y[32 * step:32 * step + 32]
            out = model(xb)
            keep = yb < 4
            loss = F.cross_entropy(out[keep], yb[keep])
            opt.zero_grad()
            loss.backward()
            opt.step()
            rec.step(loss=loss, inputs=xb, targets=yb, outputs=out)
    return path


def _range_findings(path):
    return [f for f in target_problems(open_run(path)) if "output layer has" in f.message]


def test_a_tied_language_model_head_is_sized_by_its_outputs(tmp_path):
    run = open_run(_lm(tmp_path / "lm"))
    shapes = [p["shape"] for p in run.parameters().values() if len(p["shape"]) >= 2]
    assert shapes[-1][0] == WIDTH < VOCAB - 1  # the last listed matrix is not the head
    assert _range_findings(tmp_path / "lm") == []


def test_labels_past_the_outputs_fire_and_labels_within_stay_quiet(tmp_path):
    [f] = _range_findings(_classifier(tmp_path / "past", classes=6))
    assert f.severity.value == "error" and "4 outputs (valid indices 0..3)" in f.message
    assert _range_findings(_classifier(tmp_path / "within", classes=4)) == []
