"""A stacked bidirectional GRU whose code reads only `hidden[-1]` (the last layer's backward
direction, as in PyTorchZeroToAll's name classifier): the weights of the last layer's forward
direction get exactly zero gradients from the fused GRU node. That is an unread part of the
module, not dead units (dead-units stays quiet, while a dead ReLU before a GRU is still named),
and it does not keep target-problems from seeing labels shuffled apart from their inputs (nor
does an embedding whose unused rows never move)."""
import pytest

pytest.importorskip("torch", reason="the tiny trainings need torch (extra 'torch')")

import torch  # noqa: E402
from torch import nn  # noqa: E402

import tracelab  # noqa: E402
from tracelab.analyzers._dynamics import update_ratios  # noqa: E402
from tracelab.analyzers._unread import unread_parameters  # noqa: E402
from tracelab.analyzers.dead_units import dead_units  # noqa: E402
from tracelab.analyzers.target_problems import target_problems  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")

VOCAB, CLASSES, LENGTH = 128, 4, 6
LAST_FORWARD = {"gru.weight_ih_l1", "gru.weight_hh_l1", "gru.bias_ih_l1", "gru.bias_hh_l1"}


class Names(nn.Module):
    """Embedding over 128 codes (a few used), a 2-layer bidirectional GRU, fc(hidden[-1])."""

    def __init__(self, hidden: int = 16):
        super().__init__()
        self.embedding = nn.Embedding(VOCAB, hidden)
        self.gru = nn.GRU(hidden, hidden, 2, bidirectional=True)
        self.fc = nn.Linear(hidden, CLASSES)

    def forward(self, tokens):
        _, hidden = self.gru(self.embedding(tokens.t()))
        return self.fc(hidden[-1])


class DeadBeforeGru(nn.Module):
    """A linear layer and a hand-written ReLU whose bias kills every unit, before a GRU."""

    def __init__(self, hidden: int = 16):
        super().__init__()
        self.proj = nn.Linear(8, hidden)
        with torch.no_grad():
            self.proj.bias.fill_(-50.0)
        self.gru = nn.GRU(hidden, hidden, 1, bidirectional=True)
        self.fc = nn.Linear(2 * hidden, CLASSES)

    def forward(self, x):
        h = torch.clamp(self.proj(x), min=0.0)
        _, hidden = self.gru(h.transpose(0, 1))
        return self.fc(torch.cat([hidden[0], hidden[1]], 1))  # both directions read


def _batch(g: torch.Generator, batch: int, floats: bool = False):
    """Each class draws its tokens from its own 5 codes (65 + 5 * class ...)."""
    y = torch.randint(0, CLASSES, (batch,), generator=g)
    tokens = 65 + 5 * y[:, None] + torch.randint(0, 5, (batch, LENGTH), generator=g)
    if floats:
        return torch.nn.functional.one_hot(tokens - 65, 20)[..., :8].float() + \
            0.1 * torch.randn(batch, LENGTH, 8, generator=g), y
    return tokens, y


def _train(path, model: nn.Module, *, shuffle: bool = False, steps: int = 100,
           lr: float = 2e-3, floats: bool = False, activations: bool = True):
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    loss_fn = nn.CrossEntropyLoss()
    with tracelab.Recorder(str(path), model=model, optimizer=opt, loss_fn=loss_fn,
                           activations=activations, input_every=5) as rec:
        for _ in range(steps):
            x, y = _batch(g, 32, floats)
            if shuffle:  # the targets left in another order than their inputs
                y = y[torch.randperm(len(y), generator=g)]
            out = model(x)
            loss = loss_fn(out, y)
            model.zero_grad()
            loss.backward()
            opt.step()
            rec.step(loss=loss, inputs=x, targets=y, outputs=out)
    return tracelab.open_run(str(path))


def test_an_unread_gru_direction_is_not_dead_units(tmp_path):
    run = _train(tmp_path / "r", Names())
    assert unread_parameters(run) == LAST_FORWARD
    assert dead_units(run) == []


def test_a_dead_relu_before_a_gru_is_still_named_from_the_gradients(tmp_path):
    run = _train(tmp_path / "r", DeadBeforeGru(), floats=True, steps=40, lr=1e-2)
    # the GRU's input weights get no gradient, its biases do: not an unread part
    assert unread_parameters(run) == set()
    [f] = dead_units(run)
    assert f.evidence["source"] == "gradients"
    zero = set(f.evidence["zero_grad_parameters"])
    assert {"proj.weight", "proj.bias", "gru.weight_ih_l0", "gru.weight_ih_l0_reverse"} <= zero
    assert not zero & {"gru.bias_ih_l0", "gru.weight_hh_l0"}


def test_labels_shuffled_apart_from_a_gru_classifiers_inputs(tmp_path):
    run = _train(tmp_path / "r", Names(), shuffle=True)
    # the premises this case stands on: an unread direction, an embedding that barely moves
    assert unread_parameters(run) == LAST_FORWARD
    steps = run.step_range[1] - run.step_range[0] + 1
    assert update_ratios(run)["embedding.weight"] * steps < 0.1
    found = [f for f in target_problems(run) if f.subject == "targets vs inputs"]
    assert len(found) == 1 and found[0].severity.value == "error"


def test_a_gru_classifier_with_its_own_labels_is_quiet(tmp_path):
    run = _train(tmp_path / "r", Names())
    assert [f for f in target_problems(run) if f.subject == "targets vs inputs"] == []
    assert float(run.loss().iloc[-20:].mean()) < 0.5 * float(run.loss().iloc[:5].mean())
