"""clip-misuse: a clip far below every gradient, or one after optimizer.step()."""
import numpy as np
import pandas as pd
import pytest

from tracelab.analyzers.clip_misuse import clip_misuse
from tracelab.core.run import Run

pytest.importorskip("torch", reason="the tiny trainings need torch (extra 'torch')")

import _optim_training  # noqa: E402
import torch  # noqa: E402
from _optim_training import train  # noqa: E402

import tracelab  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")


def _found(path):
    return [f for f in tracelab.analyze(path).findings if f.rule == "clip-misuse"]


def test_a_max_norm_far_below_every_gradient_is_named(tmp_path):
    [f] = _found(train(tmp_path / "r", steps=60, clip=1e-4))
    assert f.evidence["kind"] == "too_small" and f.severity.value == "warning"
    assert f.evidence["max_norm"] == pytest.approx(1e-4, rel=1e-3)
    assert f.evidence["clipped_steps"] == f.evidence["steps_observed"] >= 20
    assert "max_norm" in f.fix


def _diagnoses(path):
    return [(d.finding.rule, d.worst.value) for d in tracelab.analyze(path).diagnoses]


def test_a_clip_tens_of_times_below_the_gradients_is_named_where_the_loss_crawls(tmp_path):
    # clip 0.01 against a median norm near 0.27 (about 27x): at lr 0.01 the loss stalls
    path = train(tmp_path / "r", steps=120, clip=0.01,
                 optimizer=lambda p: torch.optim.SGD(p, lr=0.01, momentum=0.9))
    [f] = _found(path)
    assert f.evidence["kind"] == "too_small" and 10 <= f.evidence["factor"] < 100
    reach = f.evidence["update_ratio"]  # too short to move the model; unclipped it would
    assert reach < 10 ** -3.5 <= reach * f.evidence["factor"]
    first = tracelab.analyze(path).diagnoses[0]
    assert first.finding.rule == "clip-misuse" and first.worst.value == "warning"
    assert "loss-plateau" in {e.rule for e in first.explains}


def test_a_loss_flat_for_another_cause_is_not_blamed_on_a_clip_whose_steps_move_the_model(
        tmp_path, monkeypatch):
    # labels shuffled within each batch carry nothing to learn: the loss stays near ln 4
    # whatever the clip; clip 0.01 binds about 20x below the norm, yet at lr 0.5 each clipped
    # step moves the weights by some 3e-3 of their norm, so the clip keeps nothing still
    batches = _optim_training.batches

    def shuffled(steps, seed=0):
        g = torch.Generator().manual_seed(seed + 1)
        for x, y in batches(steps, seed):
            yield x, y[torch.randperm(len(y), generator=g)]
    monkeypatch.setattr(_optim_training, "batches", shuffled)
    path = train(tmp_path / "r", steps=120, clip=0.01,
                 optimizer=lambda p: torch.optim.SGD(p, lr=0.5, momentum=0.9))
    [f] = _found(path)
    assert f.evidence["kind"] == "too_small" and 10 <= f.evidence["factor"] < 100
    assert f.evidence["update_ratio"] > 10 ** -3.5
    diagnoses = tracelab.analyze(path).diagnoses
    assert diagnoses[0].finding.rule == "loss-plateau"
    [note] = [d for d in diagnoses if d.finding.rule == "clip-misuse"]
    assert note.worst.value == "info" and not note.explains


def test_the_same_clip_with_a_learning_rate_tuned_to_it_is_a_note_only(tmp_path):
    # normalized steps at lr 5: the loss falls from 1.38 to 0.15, so nothing crawls
    path = train(tmp_path / "r", steps=120, clip=0.01,
                 optimizer=lambda p: torch.optim.SGD(p, lr=5.0, momentum=0.9))
    [f] = _found(path)
    assert f.evidence["kind"] == "too_small" and f.severity.value == "info"
    assert _diagnoses(path) == [("clip-misuse", "info")]


def test_under_adam_a_tiny_clip_is_information(tmp_path):
    [f] = _found(train(tmp_path / "r", steps=40, clip=1e-4,
                       optimizer=lambda p: torch.optim.Adam(p, lr=1e-2)))
    assert f.severity.value == "info" and f.evidence["optimizer"] == "Adam"


def test_a_clip_after_the_step_is_named(tmp_path):
    [f] = _found(train(tmp_path / "r", steps=60, clip=0.05, clip_after_step=True))
    assert f.evidence["kind"] == "after_step"
    assert f.evidence["max_norm"] == pytest.approx(0.05, rel=1e-3)
    assert "between loss.backward()" in f.fix


def test_a_clip_after_the_step_that_binds_on_some_steps_only_is_named(tmp_path):
    path = train(tmp_path / "r", steps=60, clip=0.3, clip_after_step=True)
    run = tracelab.open_run(path)
    used = run.signal("grad_norm/step")
    assert 2 <= (used > 0.3).sum() < len(used)  # the unclipped norm passes 0.3 now and then
    [f] = _found(path)
    assert f.evidence["kind"] == "after_step" and f.evidence["clipped_steps"] == (used > 0.3).sum()


@pytest.mark.parametrize("clip", [None, 0.3, 1.0])
def test_no_clip_or_a_sane_one_stays_quiet(tmp_path, clip):
    path = train(tmp_path / "r", steps=60, clip=clip)
    if clip == 0.3:  # the clip binds on some steps, as a sane one does
        run = tracelab.open_run(path)
        clipped = run.signal("grad_norm/step") < run.signal("grad_norm/backward") * 0.999
        assert 0 < clipped.sum() < len(clipped)
    assert _found(path) == []


def test_under_amp_a_clip_after_unscale_that_binds_on_every_step_stays_quiet(tmp_path):
    path = train(tmp_path / "r", steps=40, clip=0.1, amp=True)
    run = tracelab.open_run(path)
    used, backward = run.signal("grad_norm/step"), run.signal("grad_norm/backward")
    assert (used < 0.101).all() and (backward > 1000 * used).all()  # the scaled backward
    assert _found(path) == []


def _frames(backward, used, rows=None, kind="SGD"):
    steps = range(len(backward))
    signals = pd.concat([
        pd.DataFrame({"step": steps, "split": "train", "name": "grad_norm/backward",
                      "value": backward}),
        pd.DataFrame({"step": steps, "split": "train", "name": "grad_norm/step",
                      "value": used})])
    rows = used if rows is None else rows
    tensors = pd.DataFrame({"step": steps, "kind": "grad", "name": "w", "numel": 10,
                            "norm": rows})
    meta = {"optimizers": {"0": {"type": kind, "groups": [{"lr": 0.1, "params": ["w"]}]}}}
    return Run.from_frames(meta, signals=signals, tensors=tensors)


def test_the_bounds_on_frames():
    rng = np.random.default_rng(0)
    grads = rng.uniform(0.5, 3.0, 30)
    assert clip_misuse(_frames(grads, np.full(30, 1e-3)))[0].evidence["kind"] == "too_small"
    # some 40x below is not far enough below to be sure max_norm is wrong: a note, which
    # names the cause only beside a loss that does not move
    [f] = clip_misuse(_frames(grads * 0.02, np.full(30, 1e-3)))
    assert f.evidence["kind"] == "too_small" and f.severity.value == "info"
    # under 10x, a clip that binds on every step is an ordinary one
    assert clip_misuse(_frames(grads * 0.004, np.full(30, 1e-3))) == []
    # Adam cancels a constant rescale: 40x is nothing to note there
    assert clip_misuse(_frames(grads * 0.02, np.full(30, 1e-3), kind="Adam")) == []
    # a norm that merely varies little is no clip
    assert clip_misuse(_frames(grads, 1e-3 * (1 + rng.uniform(0, 0.01, 30)))) == []
    # clipped after the step: the rows sit at max_norm, never above it
    [f] = clip_misuse(_frames(grads, grads, rows=np.minimum(grads, 0.8)))
    assert f.evidence["kind"] == "after_step" and f.evidence["max_norm"] == pytest.approx(0.8)
    # zeroed after the step (zero_grad(set_to_none=False) before step()) is no clip
    assert clip_misuse(_frames(grads, grads, rows=np.zeros(30))) == []


def test_each_kind_explains_its_own_symptoms():
    from tracelab.core.causes import link_between
    from tracelab.core.findings import Finding
    links = clip_misuse.spec.links

    def joins(kind, effect_rule, **evidence):
        cause = Finding("clip-misuse", "TL209", "warning", "gradient clip", (0, 100), "m",
                        {"kind": kind, **evidence})
        effect = Finding(effect_rule, "TL000", "warning", "loss", (10, 90), "m", {})
        return link_between(links, cause, effect) is not None
    stalled = {"update_ratio": 1e-4, "factor": 30.0}
    assert joins("too_small", "loss-plateau", **stalled)
    assert not joins("after_step", "loss-plateau", **stalled)
    assert joins("after_step", "loss-spike") and not joins("too_small", "loss-spike", **stalled)
    # a too-small clip explains a flat loss only where its steps are too short to move the
    # model and would not be unclipped: not with steps that move it, nor with steps too short
    # at any clip (the learning rate's), nor where the update ratio was not recorded
    assert not joins("too_small", "loss-plateau", update_ratio=3e-3, factor=30.0)
    assert not joins("too_small", "loss-plateau", update_ratio=1e-6, factor=30.0)
    assert not joins("too_small", "loss-plateau", factor=30.0)


def test_the_update_ratio_read_or_bounded_from_the_recorded_facts():
    rng = np.random.default_rng(0)
    grads = rng.uniform(0.5, 3.0, 30) * 0.02
    run = _frames(grads, np.full(30, 1e-3))
    steps = range(30)
    tensors = pd.concat([run.tensors, pd.DataFrame(
        {"step": steps, "kind": "weight", "name": "w", "numel": 10, "norm": 2.0})])
    meta = {"optimizers": {"0": {"type": "SGD", "groups": [
        {"lr": 0.1, "momentum": 0.5, "params": ["w"]}]}}}
    # no update rows: plain SGD's bound, lr * max_norm / (1 - momentum) / ||w||
    bounded = Run.from_frames(meta, signals=run.signals, tensors=tensors)
    [f] = clip_misuse(bounded)
    assert f.evidence["update_ratio"] == pytest.approx(0.1 * 1e-3 / 0.5 / 2.0, rel=1e-3)
    # recorded update rows: their ratio, per optimizer step where a step spans several
    updates = pd.DataFrame({"step": steps, "kind": "update", "name": "w", "numel": 10,
                            "norm": 1e-3})
    counts = pd.DataFrame({"step": steps, "split": "train", "name": "optimizer/steps",
                           "value": 2.0})
    read = Run.from_frames(meta, signals=pd.concat([run.signals, counts]),
                           tensors=pd.concat([tensors, updates]))
    [f] = clip_misuse(read)
    assert f.evidence["update_ratio"] == pytest.approx(1e-3 / 2 / 2.0)
    # neither: no ratio, so the note names no cause
    assert "update_ratio" not in clip_misuse(run)[0].evidence
