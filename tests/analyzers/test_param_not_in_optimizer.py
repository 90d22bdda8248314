"""param-not-in-optimizer: parameters that get gradients but are in no optimizer."""
import pytest

pytest.importorskip("torch", reason="the tiny trainings need torch (extra 'torch')")

import torch  # noqa: E402
from torch import nn  # noqa: E402
from _optim_training import model, train  # noqa: E402

import tracelab  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")


def _diagnosis(path):
    diagnosis = tracelab.analyze(path)
    assert not diagnosis.errors, diagnosis.errors
    return diagnosis


def test_a_head_left_out_of_the_optimizer_is_named_not_a_missing_zero_grad(tmp_path):
    diagnosis = _diagnosis(train(tmp_path / "r", steps=60,
                                 params=lambda m: [*m[0].parameters(), *m[2].parameters()]))
    found = {f.rule: f for f in diagnosis.findings}
    f = found["param-not-in-optimizer"]
    assert f.severity.value == "warning" and f.evidence["subjects"] == ["4"]
    assert f.evidence["holds_watched"] is True and "add_param_group" in f.fix
    # the leftover gradients are its doing, and zero_grad() is not the fix
    first = diagnosis.diagnoses[0]
    assert first.finding.rule == "param-not-in-optimizer"
    assert {e.rule for e in first.explains} >= {"missing-zero-grad", "frozen-parameters"}


def test_a_backbone_left_out_under_a_trained_head_is_information(tmp_path):
    [f] = [f for f in _diagnosis(train(tmp_path / "r", steps=40,
                                       params=lambda m: m[4].parameters())).findings
           if f.rule == "param-not-in-optimizer"]
    assert f.severity.value == "info" and "requires_grad_(False)" in f.fix


def test_a_backbone_frozen_with_requires_grad_stays_quiet(tmp_path):
    net = model()
    net[0].requires_grad_(False)
    path = train(tmp_path / "r", steps=40, net=net,
                 params=lambda m: [p for p in m.parameters() if p.requires_grad])
    assert [f.rule for f in _diagnosis(path).findings] == []


def test_a_gan_with_two_optimizers_given_as_a_list_stays_quiet(tmp_path):
    torch.manual_seed(0)
    gan = nn.ModuleDict({"g": nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 2)),
                         "d": nn.Sequential(nn.Linear(2, 16), nn.ReLU(), nn.Linear(16, 1))})
    opt_g = torch.optim.Adam(gan["g"].parameters(), lr=1e-3)
    opt_d = torch.optim.Adam(gan["d"].parameters(), lr=1e-3)
    bce = nn.BCEWithLogitsLoss()
    with tracelab.Recorder(str(tmp_path / "r"), model=gan, optimizer=[opt_g, opt_d],
                           flush_interval=0.5) as rec:
        for _ in range(60):
            real = torch.randn(32, 2) * 0.5 + 2.0
            fake = gan["g"](torch.randn(32, 4))
            opt_d.zero_grad()
            loss_d = bce(gan["d"](real), torch.ones(32, 1)) + \
                bce(gan["d"](fake.detach()), torch.zeros(32, 1))
            loss_d.backward()
            opt_d.step()
            opt_g.zero_grad()
            loss_g = bce(gan["d"](fake), torch.ones(32, 1))
            loss_g.backward()  # also leaves grads in D, which its next zero_grad resets
            opt_g.step()
            rec.step(loss=loss_g, metrics={"loss_d": loss_d})
    rules = {f.rule for f in _diagnosis(tmp_path / "r").findings}
    assert not rules & {"param-not-in-optimizer", "optimizer-step-missing", "missing-zero-grad"}


def test_it_explains_a_missing_zero_grad_only_when_it_holds_the_watched_parameter():
    from tracelab.analyzers.param_not_in_optimizer import param_not_in_optimizer
    from tracelab.core.causes import link_between
    from tracelab.core.findings import Finding

    def cause(watched):
        return Finding("param-not-in-optimizer", "TL213", "warning", "4", (0, 50), "m",
                       {"holds_watched": watched, "subjects": ["4"]})
    effect = Finding("missing-zero-grad", "TL602", "error", "optimizer", (1, 59), "m", {})
    links = param_not_in_optimizer.spec.links
    assert link_between(links, cause(True), effect) is not None
    assert link_between(links, cause(False), effect) is None
