"""frozen-parameters on real tiny trainings where a parameter's gradient is exactly zero, not
None: the backward pass reaches it. When other parameters of its module train, the loss is
invariant to it (a Siamese network's output bias cancels in the distance between the two
branches; a bidirectional GRU's last-layer forward direction is discarded when only hidden[-1]
is used): only info. A whole module with zero gradients (dead units downstream, an output
multiplied by zero), or a weight with zero gradients beside a training bias (its input is
zero), is still a warning."""
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="the tiny trainings need torch (extra 'torch')")
from torch import nn  # noqa: E402

import tracelab  # noqa: E402
from tracelab.analyzers.frozen_parameters import frozen_parameters  # noqa: E402
from tracelab.core.run import open_run  # noqa: E402


def _siamese(run_dir: Path, steps: int = 40) -> Path:
    """A shared embedding net and a contrastive loss on the two branches' distance."""
    torch.manual_seed(0)
    x = torch.randn(256, 8)
    y = (x[:, 0] > 0).long()
    net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)
    with tracelab.Recorder(str(run_dir), model=net, optimizer=opt) as rec:
        for _ in range(steps):
            i, j = torch.randint(0, 256, (32,)), torch.randint(0, 256, (32,))
            same = (y[i] == y[j]).float()
            d = (net(x[i]) - net(x[j])).pow(2).sum(1)
            loss = 0.5 * (same * d + (1 - same) * torch.relu(1 - (d + 1e-9).sqrt()).pow(2))
            opt.zero_grad()
            loss.mean().backward()
            opt.step()
            rec.step(loss=loss.mean())
    return run_dir


class _Names(nn.Module):
    """Embedding, 2-layer bidirectional GRU, a classifier on hidden[-1] (scaled by `keep`)."""

    def __init__(self, keep: float = 1.0):
        super().__init__()
        self.keep = keep
        self.embedding = nn.Embedding(20, 8)
        self.gru = nn.GRU(8, 8, 2, bidirectional=True)
        self.fc = nn.Linear(8, 3)

    def forward(self, tokens):
        _, hidden = self.gru(self.embedding(tokens.t()))
        return self.fc(hidden[-1] * self.keep)


def _rnn(run_dir: Path, keep: float = 1.0, steps: int = 30) -> Path:
    torch.manual_seed(0)
    tokens = torch.randint(0, 20, (128, 6))
    labels = tokens[:, 0] % 3
    model = _Names(keep)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    with tracelab.Recorder(str(run_dir), model=model, optimizer=opt) as rec:
        for step in range(steps):
            i = torch.arange(step * 16, step * 16 + 16) % 128
            loss = nn.functional.cross_entropy(model(tokens[i]), labels[i])
            opt.zero_grad()
            loss.backward()
            opt.step()
            rec.step(loss=loss)
    return run_dir


def _warnings(findings):
    return [f for f in findings if f.severity.value == "warning"]


def test_a_bias_that_cancels_between_siamese_branches_is_only_info(tmp_path):
    findings = frozen_parameters(open_run(_siamese(tmp_path / "siamese")))
    [f] = findings
    assert f.severity.value == "info" and "Parameter 2.bias requires grad" in f.message
    assert "exactly zero, not None" in f.message


def test_a_discarded_gru_direction_is_only_info(tmp_path):
    findings = frozen_parameters(open_run(_rnn(tmp_path / "gru")))
    [f] = findings
    assert f.severity.value == "info" and f.subject == "gru"
    assert "gru.weight_ih_l1, gru.weight_hh_l1" in f.message and "hidden[-1]" in f.message
    assert "reverse" not in f.message  # the direction whose output is used trains


def test_a_module_whose_output_is_multiplied_by_zero_is_a_warning(tmp_path):
    [f] = _warnings(frozen_parameters(open_run(_rnn(tmp_path / "zero", keep=0.0))))
    assert "embedding.weight" in f.message and "are zero" in f.message
    assert f.evidence["grad_norm_max"] == 0


def test_dead_units_upstream_stay_a_warning_with_the_dead_input_weight(tmp_path):
    from _contract_runs import blobs, train
    net = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
    with torch.no_grad():
        net[0].bias.fill_(-1e3)  # every unit dead: no gradient reaches layer 0
    run = open_run(train(tmp_path / "dead", net, blobs(512), nn.functional.cross_entropy,
                         steps=30))
    [f] = _warnings(frozen_parameters(run))
    assert "0.weight, 0.bias, 2.weight require grad" in f.message and "are zero" in f.message


def test_a_weight_whose_inputs_are_all_zero_stays_a_warning(tmp_path):
    # Features cast with .long() truncate to 0: layer 0's weight gets an exact zero gradient
    # beside a training bias. That is a zero input, not an invariance of the loss.
    from _contract_runs import blobs, train
    from tracelab.analyzers._unread import unread_parameters
    torch.manual_seed(0)
    x, y = blobs(512)
    net = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
    run = open_run(train(tmp_path / "zero_in", net, (torch.sigmoid(x).long().float(), y),
                         nn.functional.cross_entropy, steps=30))
    [f] = _warnings(frozen_parameters(run))
    assert "Parameter 0.weight requires grad" in f.message and "input is zero" in f.message
    assert unread_parameters(run) == set()


def test_the_cancelling_bias_is_the_only_invariant_parameter_of_the_siamese_net(tmp_path):
    from tracelab.analyzers._unread import unread_parameters
    assert unread_parameters(open_run(_siamese(tmp_path / "siamese"))) == {"2.bias"}
