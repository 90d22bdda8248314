"""weight-decay-too-high: decay that shrinks every layer while the loss stays high."""
import pytest

pytest.importorskip("torch", reason="the tiny trainings need torch (extra 'torch')")

import torch  # noqa: E402
from _optim_training import train  # noqa: E402

import tracelab  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")
O = torch.optim


def _diagnosis(path):
    diagnosis = tracelab.analyze(path)
    assert not diagnosis.errors, diagnosis.errors
    return diagnosis


@pytest.mark.parametrize("optimizer,kind", [
    (lambda p: O.SGD(p, lr=0.1, momentum=0.9, weight_decay=0.1), "SGD"),
    (lambda p: O.AdamW(p, lr=1e-2, weight_decay=50.0), "AdamW"),
    (lambda p: O.Adam(p, lr=1e-3, weight_decay=0.1), "Adam"),  # AdamW's value as Adam's L2
])
def test_decay_that_outweighs_the_gradients_is_named_first(tmp_path, optimizer, kind):
    diagnosis = _diagnosis(train(tmp_path / "r", steps=150, optimizer=optimizer))
    first = diagnosis.diagnoses[0].finding
    assert first.rule == "weight-decay-too-high" and first.evidence["optimizer"] == kind
    assert first.evidence["decay_budget"] >= 0.5 and first.evidence["shrink"] < 0.5
    assert "Lower weight_decay" in first.fix


@pytest.mark.parametrize("optimizer,kind", [
    (lambda p: O.AdamW(p, lr=1e-2, weight_decay=100.0), "AdamW"),  # lr * wd = 1: w <- 0
    (lambda p: O.SGD(p, lr=0.1, weight_decay=5.0), "SGD"),  # lr * wd = 0.5
], ids=["adamw-wiped", "sgd-halved"])
def test_decay_that_halves_the_weights_each_step_is_named_whatever_the_norms_show(
        tmp_path, optimizer, kind):
    # The weights are recorded after each step, already decayed: their norms need not shrink
    # from the first record on, so the per-step factor 1 - lr * wd alone decides.
    diagnosis = _diagnosis(train(tmp_path / "r", steps=40, optimizer=optimizer))
    found = [f for f in diagnosis.findings if f.rule == "weight-decay-too-high"]
    assert len(found) == 1 and found[0].evidence["optimizer"] == kind
    assert found[0].evidence["halves_each_step"] and found[0].evidence["step_factor"] <= 0.5
    assert "1 - lr * weight_decay" in found[0].message
    assert diagnosis.diagnoses[0].finding.rule == "weight-decay-too-high"


def test_decay_above_its_range_that_keeps_most_of_each_weight_is_not_judged_per_step(tmp_path):
    # AdamW's weight_decay 1 at lr 1e-2: 0.99 of each weight kept per step, and the loss falls.
    found = _diagnosis(train(tmp_path / "r", steps=40, optimizer=lambda p: O.AdamW(
        p, lr=1e-2, weight_decay=1.0))).findings
    assert "weight-decay-too-high" not in {f.rule for f in found}


@pytest.mark.parametrize("optimizer", [
    lambda p: O.SGD(p, lr=0.1, momentum=0.9, weight_decay=5e-4),
    lambda p: O.SGD(p, lr=0.1, momentum=0.9, weight_decay=5e-3),
    lambda p: O.AdamW(p, lr=1e-2, weight_decay=0.1),
    lambda p: O.Adam(p, lr=1e-3, weight_decay=1e-4),
])
def test_usual_decay_stays_quiet(tmp_path, optimizer):
    found = _diagnosis(train(tmp_path / "r", steps=150, optimizer=optimizer)).findings
    assert [f.rule for f in found] == []


def test_a_large_budget_under_which_the_loss_falls_stays_quiet(tmp_path):
    path = train(tmp_path / "r", steps=150,
                 optimizer=lambda p: O.SGD(p, lr=0.1, momentum=0.9, weight_decay=0.02))
    run = tracelab.open_run(path)
    assert run.loss().iloc[-10:].median() < 0.5 * run.loss().iloc[0]  # it learns
    found = _diagnosis(path).findings
    assert "weight-decay-too-high" not in {f.rule for f in found}


def _wide():
    torch.manual_seed(0)
    nn = torch.nn
    return nn.Sequential(nn.Linear(16, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                         nn.Linear(256, 4))


def test_adamw_s_decay_given_to_adam_is_named_while_the_loss_still_falls(tmp_path):
    # Adam's L2 term 0.1, 100x its usual top, outweighs the hidden layers' small gradients:
    # they collapse while the output layer grows and the loss falls, to 5x where AdamW ends.
    path = train(tmp_path / "r", steps=300, net=_wide(),
                 optimizer=lambda p: O.Adam(p, lr=1e-3, weight_decay=0.1))
    first = _diagnosis(path).diagnoses[0].finding
    assert first.rule == "weight-decay-too-high" and first.evidence["optimizer"] == "Adam"
    assert first.evidence["l2_outweighs_gradient"] and first.evidence["above_usual_range"]
    assert first.evidence["loss_end"] < 0.5 * first.evidence["loss_start"]
    assert first.evidence["layers"] == 2 and first.evidence["shrink"] < 0.5
    assert "Adam's L2 term" in first.message and "switch to AdamW" in first.fix


@pytest.mark.parametrize("optimizer", [
    lambda p: O.Adam(p, lr=1e-3, weight_decay=1e-3),  # the top of Adam's usual L2 range
    lambda p: O.AdamW(p, lr=1e-3, weight_decay=0.1),  # 0.1 where it is meant: decoupled
], ids=["adam-1e-3", "adamw-0.1"])
def test_the_same_net_with_its_optimizer_s_usual_decay_stays_quiet(tmp_path, optimizer):
    found = _diagnosis(train(tmp_path / "r", steps=300, net=_wide(),
                             optimizer=optimizer)).findings
    assert [f.rule for f in found] == []


def test_odd_optimizer_facts_leave_the_rule_quiet_without_raising(tmp_path):
    import json
    path = train(tmp_path / "r", steps=60,
                 optimizer=lambda p: O.Adam(p, lr=1e-2, weight_decay=0.1))
    assert "weight-decay-too-high" in {f.rule for f in _diagnosis(path).findings}
    meta = json.loads((path / "meta.json").read_text())
    group = meta["optimizers"]["0"]["groups"][0]
    for odd in (["Adam"], {"0": "Adam"}, {"0": {"type": "Adam", "groups": "all"}},
                {"0": {"type": "Adam", "groups": [dict(group, weight_decay=True)]}},
                {"0": {"type": "Adam", "groups": [dict(group, params="all")]}},
                {"0": {"type": "Adadelta", "groups": [group]}}):
        meta["optimizers"] = odd
        (path / "meta.json").write_text(json.dumps(meta))
        diagnosis = tracelab.analyze(path)
        assert "weight-decay-too-high" not in {f.rule for f in diagnosis.findings}
        assert "weight-decay-too-high" not in {e.rule for e in diagnosis.errors}


class _WithIds(torch.nn.Module):
    """Dense features plus a learned vector per id (an N(0,1) embedding of 1000 ids, a few of
    them in each batch: its rows get sparse gradients); the labels depend on the features."""

    def __init__(self):
        super().__init__()
        nn = torch.nn
        self.emb = nn.Embedding(1000, 32)
        self.inp = nn.Linear(16, 32)
        self.head = nn.Sequential(nn.ReLU(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 4))

    def forward(self, x, ids):
        return self.head(self.inp(x) + self.emb(ids))


def _with_ids(path, weight_decay: float, steps: int = 600):
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    w = torch.randn(16, 4, generator=g)
    net, loss_fn = _WithIds(), torch.nn.CrossEntropyLoss()
    opt = O.Adam(net.parameters(), lr=3e-3, weight_decay=weight_decay)
    with tracelab.Recorder(str(path), model=net, optimizer=opt, loss_fn=loss_fn,
                           input_every=5) as rec:
        for _ in range(steps):
            x, ids = torch.randn(64, 16, generator=g), torch.randint(0, 1000, (64,), generator=g)
            y = (x @ w).argmax(1)
            opt.zero_grad()
            out = net(x, ids)
            loss = loss_fn(out, y)
            loss.backward()
            opt.step()
            rec.step(loss=loss, inputs=x, targets=y, outputs=out)
    return path


def test_an_l2_term_that_outweighs_only_an_embedding_while_the_loss_falls_is_quiet(tmp_path):
    # Adam's L2 term 1e-2 outweighs the embedding's sparse gradients (1 of 4 matrices), which
    # shrinks, while the rest of the model learns: the loss falls as far as without decay.
    from tracelab.analyzers.weight_decay_too_high import _outweighed
    from tracelab.core.run import open_run
    path = _with_ids(tmp_path / "r", 1e-2)
    run = open_run(path)
    norms = run.stat("weight", "norm")
    assert _outweighed(run, norms, ["emb.weight", "inp.weight", "head.1.weight",
                                    "head.3.weight"], 1e-2) == ["emb.weight"]
    assert float(norms["emb.weight"].iloc[-1] / norms["emb.weight"].iloc[0]) < 0.5
    assert float(run.loss().iloc[-30:].median()) < 0.5 * float(run.loss().iloc[:10].median())
    assert "weight-decay-too-high" not in {f.rule for f in _diagnosis(path).findings}
    # Ten times that holds the whole model near zero and the loss stalls: named first.
    first = _diagnosis(_with_ids(tmp_path / "high", 0.1)).diagnoses[0].finding
    assert first.rule == "weight-decay-too-high" and first.evidence["layers"] == 4


def _normed():
    torch.manual_seed(0)
    nn = torch.nn
    return nn.Sequential(nn.Linear(16, 64, bias=False), nn.BatchNorm1d(64), nn.ReLU(),
                         nn.Linear(64, 64, bias=False), nn.BatchNorm1d(64), nn.ReLU(),
                         nn.Linear(64, 4))


def test_sgd_decay_far_above_its_range_is_named_while_the_loss_falls(tmp_path):
    # kuangliu's cifar main.py with weight_decay 5e-2 for 5e-4: the matrices and the
    # normalization scales shrink overall (the scales most) while the output layer grows
    # and the loss still falls.
    path = train(tmp_path / "r", steps=150, net=_normed(),
                 optimizer=lambda p: O.SGD(p, lr=0.1, momentum=0.9, weight_decay=0.05))
    run = tracelab.open_run(path)
    assert run.loss().iloc[-10:].median() < 0.5 * run.loss().iloc[:5].median()  # it learns
    [f] = [f for f in _diagnosis(path).findings if f.rule == "weight-decay-too-high"]
    assert f.evidence["optimizer"] == "SGD" and f.evidence["above_usual_range"]
    assert f.evidence["layers"] == 5 and f.evidence["shrink"] <= 0.5
    assert "above SGD's usual range" in f.message and "5e-4 is common" in f.fix


@pytest.mark.parametrize("weight_decay", [5e-4, 5e-3])
def test_the_normalized_net_with_usual_sgd_decay_stays_quiet(tmp_path, weight_decay):
    path = train(tmp_path / "r", steps=150, net=_normed(), optimizer=lambda p: O.SGD(
        p, lr=0.1, momentum=0.9, weight_decay=weight_decay))
    assert "weight-decay-too-high" not in {f.rule for f in _diagnosis(path).findings}
