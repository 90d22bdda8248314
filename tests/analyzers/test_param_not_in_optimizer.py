"""param-not-in-optimizer: parameters that get gradients but are in no optimizer."""
import json

import pytest

pytest.importorskip("torch", reason="the tiny trainings need torch (extra 'torch')")

import torch  # noqa: E402
from torch import nn  # noqa: E402
from _optim_training import batches, model, train, train_gan  # noqa: E402

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


def _pretrained() -> nn.Module:
    """The MLP after 30 Adam steps: its weights no longer read as a fresh default draw."""
    torch.manual_seed(0)
    net = model()
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)
    for x, y in batches(30, seed=1):
        opt.zero_grad()
        nn.functional.cross_entropy(net(x), y).backward()
        opt.step()
    return net


def test_a_backbone_left_out_under_a_trained_head_is_information(tmp_path):
    [f] = [f for f in _diagnosis(train(tmp_path / "r", steps=40, net=_pretrained(),
                                       params=lambda m: m[4].parameters())).findings
           if f.rule == "param-not-in-optimizer"]
    assert f.severity.value == "info" and "requires_grad_(False)" in f.fix


def test_a_backbone_left_out_at_its_random_init_is_a_warning(tmp_path):
    # An optimizer built from the head only, the layers before it never trained: forgotten.
    [f] = [f for f in _diagnosis(train(tmp_path / "r", steps=40,
                                       params=lambda m: m[4].parameters())).findings
           if f.rule == "param-not-in-optimizer"]
    assert f.severity.value == "warning" and f.evidence["subjects"] == ["0", "2"]


def test_a_backbone_frozen_with_requires_grad_stays_quiet(tmp_path):
    net = model()
    net[0].requires_grad_(False)
    path = train(tmp_path / "r", steps=40, net=net,
                 params=lambda m: [p for p in m.parameters() if p.requires_grad])
    assert [f.rule for f in _diagnosis(path).findings] == []


def test_a_gan_with_two_optimizers_given_as_a_list_stays_quiet(tmp_path):
    rules = {f.rule for f in _diagnosis(train_gan(tmp_path / "r")).findings}
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


class _ActorCritic(nn.Module):
    def __init__(self):
        super().__init__()
        self.critic = nn.Linear(16, 1)  # defined first, called after the actor
        self.actor = nn.Linear(16, 4)

    def forward(self, x):
        return self.actor(x) * (1 + torch.tanh(self.critic(x)))


def test_a_critic_left_out_beside_its_actor_is_a_warning(tmp_path):
    torch.manual_seed(0)
    path = train(tmp_path / "r", steps=40, net=_ActorCritic(),
                 params=lambda m: m.actor.parameters())
    [f] = [f for f in _diagnosis(path).findings if f.rule == "param-not-in-optimizer"]
    assert f.severity.value == "warning" and f.evidence["subjects"] == ["critic"]


class _Embedded(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(8, 4)  # runs first, a small part of the model
        self.body = nn.Sequential(nn.Linear(16 + 4, 64), nn.ReLU(), nn.Linear(64, 4))

    def forward(self, x):
        position = self.embed(torch.zeros(len(x), dtype=torch.long))
        return self.body(torch.cat([x, position], dim=1))


def test_an_embedding_left_out_is_a_warning_though_it_runs_first(tmp_path):
    torch.manual_seed(0)
    path = train(tmp_path / "r", steps=40, net=_Embedded(),
                 params=lambda m: m.body.parameters())
    [f] = [f for f in _diagnosis(path).findings if f.rule == "param-not-in-optimizer"]
    assert f.severity.value == "warning" and f.evidence["subjects"] == ["embed"]


class _Listed(nn.Module):
    """A layer kept in a plain Python list (`registered=False`): not the model's parameter."""

    def __init__(self, registered: bool):
        super().__init__()
        self.first = nn.Linear(16, 32)
        layers = [nn.ReLU(), nn.Linear(32, 4)]
        self.rest = nn.Sequential(*layers) if registered else layers

    def forward(self, x):
        out = self.first(x)
        for layer in self.rest:
            out = layer(out)
        return out


def _listed(run_dir, registered: bool, own_optimizer: bool = False, steps: int = 30):
    from _optim_training import batches
    torch.manual_seed(0)
    net = _Listed(registered)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    # a second optimizer, not given to the Recorder, over the listed layer's parameters
    extra = torch.optim.SGD([p for m in net.rest for p in m.parameters()], lr=0.1) \
        if own_optimizer else None
    loss_fn = nn.CrossEntropyLoss()
    with tracelab.Recorder(str(run_dir), model=net, optimizer=opt, loss_fn=loss_fn,
                           flush_interval=0.5) as rec:
        for x, y in batches(steps):
            opt.zero_grad()
            loss = loss_fn(net(x), y)
            loss.backward()
            opt.step()
            if extra:
                extra.step()
                extra.zero_grad()
            rec.step(loss=loss, inputs=x, targets=y)
    return run_dir


def test_a_layer_kept_in_a_plain_list_is_named(tmp_path):
    [f] = [f for f in _diagnosis(_listed(tmp_path / "r", registered=False)).findings
           if f.rule == "param-not-in-optimizer"]
    assert f.severity.value == "warning" and f.evidence["unregistered"] is True
    assert f.evidence["parameters"] == 2 and f.evidence["elements"] == 32 * 4 + 4
    assert "nn.ModuleList" in f.fix


@pytest.mark.parametrize("registered,own_optimizer", [(True, False), (False, True)])
def test_registered_layers_and_ones_another_optimizer_updates_stay_quiet(
        tmp_path, registered, own_optimizer):
    found = _diagnosis(_listed(tmp_path / "r", registered, own_optimizer)).findings
    assert [f for f in found if f.rule == "param-not-in-optimizer"] == []


def _edit_meta(path, edit):
    meta_path = path / "meta.json"
    meta = json.loads(meta_path.read_text())
    edit(meta)
    meta_path.write_text(json.dumps(meta))
    return path


@pytest.mark.parametrize("bad", [
    {"shape": ["a"]}, {"shape": [[2]]}, {"shape": [1e200, 1e200]}, {"shape": [2 ** 40] * 3},
    {"shape": [-1, 4]}, {"shape": [True]}, {"shape": None}, {"grad_norm": True},
    {"grad_norm": float("inf")},
], ids=["str", "nested", "floats", "overflow", "negative", "bool", "none", "bool-norm",
        "inf-norm"])
def test_a_malformed_unregistered_entry_is_ignored(tmp_path, bad):
    """A meta.json edited by hand or written by another version: an entry whose shape is not a
    list of non-negative ints with a product that fits (or whose grad norm is not a positive
    number) is left out; the well-formed ones are still named."""
    path = _listed(tmp_path / "r", registered=False, steps=10)

    def edit(meta):
        found = meta["unregistered_parameters"]
        meta["unregistered_parameters"] = found + [{**found[0], **bad}]
    [f] = [f for f in _diagnosis(_edit_meta(path, edit)).findings
           if f.rule == "param-not-in-optimizer"]
    assert f.evidence["parameters"] == 2 and f.evidence["elements"] == 32 * 4 + 4

    def only_bad(meta):
        meta["unregistered_parameters"] = [{**p, **bad} for p in meta["unregistered_parameters"]]
    found = _diagnosis(_edit_meta(path, only_bad)).findings
    assert [f for f in found if f.rule == "param-not-in-optimizer"] == []

