"""End to end: diagnoses ranked by the run's recorded facts. A fix the facts contradict is never
first; a run recorded without the facts some rules need still opens, and says what to pass."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Optional

import pytest

torch = pytest.importorskip("torch", reason="the recorder needs torch (extra 'torch')")

from torch import nn  # noqa: E402

import tracelab  # noqa: E402
from tracelab.app.engine import all_rules  # noqa: E402
from tracelab.core.findings import ERROR, NOT_RECORDED, WARNING, Finding  # noqa: E402
from tracelab.core.run import Run  # noqa: E402
from tracelab.core.schema import Needs  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")


def _train(run_dir: Path, *, steps: int = 60, head_in_optimizer: bool = True,
           zero_grad: bool = True, manual_lr: Optional[float] = None,
           outputs: bool = True) -> Path:
    """A 4-class MLP on separable data. `head_in_optimizer=False` builds the optimizer over
    the first layer only (the head trains on no optimizer's step, and optimizer.zero_grad()
    never resets its grads); `manual_lr` updates the weights by hand, with no optimizer."""
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
    g = torch.Generator().manual_seed(0)
    w = torch.randn(16, 4, generator=g)
    opt = None
    if manual_lr is None:
        held = net.parameters() if head_in_optimizer else net[0].parameters()
        opt = torch.optim.SGD(held, lr=0.05)
    loss_fn = nn.CrossEntropyLoss()
    with tracelab.Recorder(str(run_dir), model=net, optimizer=opt,
                           loss_fn=loss_fn if outputs else None, flush_interval=0.5) as rec:
        for _ in range(steps):
            x = torch.randn(64, 16, generator=g)
            y = (x @ w).argmax(1)
            if zero_grad and opt is not None:
                opt.zero_grad()
            out = net(x)
            loss = loss_fn(out, y)
            loss.backward()
            if opt is not None:
                opt.step()
            else:
                with torch.no_grad():
                    for p in net.parameters():
                        p -= manual_lr * p.grad
                        if zero_grad:
                            p.grad = None
            rec.step(loss=loss, inputs=x, targets=y, **({"outputs": out} if outputs else {}))
    return run_dir


def _diagnose(run_dir: Path):
    diagnosis = tracelab.analyze(run_dir)
    assert not diagnosis.errors, diagnosis.errors
    return diagnosis


def test_zero_grad_is_not_the_first_fix_when_the_loop_calls_it(tmp_path):
    """The optimizer leaves the head out: its grads pile up though the loop calls
    optimizer.zero_grad() every step, which looks like a missing zero_grad()."""
    from tracelab.analyzers.missing_zero_grad import ZERO_GRAD_RESETS_IT
    run_dir = _train(tmp_path / "r", head_in_optimizer=False)
    diagnosis = _diagnose(run_dir)
    [leftover] = [f for f in diagnosis.findings if f.rule == "missing-zero-grad"]  # was seen
    # ...but the optimizer's recorded parameters contradict its fix.
    verdict = ZERO_GRAD_RESETS_IT.judge(tracelab.open_run(run_dir), leftover)
    assert "'2.bias' is in no optimizer" in verdict.contradicted
    first = diagnosis.diagnoses[0]
    assert first.finding.rule != "missing-zero-grad" and not first.contradicted
    assert not first.fix.startswith("Call optimizer.zero_grad()"), first.fix
    found = diagnosis.cause_of(leftover)
    if found.finding.id == leftover.id:  # its own diagnosis: last, saying why
        assert found.contradicted and found.fix.startswith("Probably not this:")
        assert any(b.startswith("contradicted by the recorded facts:") for b in found.basis)
    else:  # explained by a cause the facts agree with
        assert not found.contradicted
    # Every uncontradicted diagnosis ranks above every contradicted one.
    flags = [bool(d.contradicted) for d in diagnosis.diagnoses]
    assert flags == sorted(flags)


def test_a_loop_that_never_calls_zero_grad_is_still_named_first(tmp_path):
    diagnosis = _diagnose(_train(tmp_path / "r", zero_grad=False))
    first = diagnosis.diagnoses[0]
    assert first.finding.rule == "missing-zero-grad" and not first.contradicted
    assert first.fix.startswith("Call optimizer.zero_grad()")


def test_a_healthy_loop_gets_no_zero_grad_diagnosis(tmp_path):
    diagnosis = _diagnose(_train(tmp_path / "r"))
    assert "missing-zero-grad" not in {f.rule for f in diagnosis.findings}
    assert not any(d.contradicted for d in diagnosis.diagnoses)


def test_a_run_without_an_optimizer_is_never_told_to_lower_its_learning_rate(tmp_path):
    """Weights updated by hand with too large a step: the loss swings, and the learning rate
    the rules would lower does not exist."""
    diagnosis = _diagnose(_train(tmp_path / "r", manual_lr=8.0))
    assert tracelab.open_run(tmp_path / "r").meta["optimizers"] == {}
    assert diagnosis.diagnoses, "the swinging loss went unnoticed"
    first = diagnosis.diagnoses[0]
    assert not first.fix.startswith("Lower the learning rate"), first.fix
    assert "Recorder(optimizer=...)" in first.fix


def test_no_finding_of_a_run_without_an_optimizer_tells_it_to_lower_its_learning_rate(tmp_path):
    """A hand-written update far too large: the weights blow up (NaN, dead or exploding
    units). Every fix speaks of the step the loop applies, none of a learning rate to lower."""
    fixes = []
    for lr in (30.0, 300.0):  # NaN in an activation, in the loss
        diagnosis = _diagnose(_train(tmp_path / str(lr), manual_lr=lr))
        fixes += [f.fix for f in diagnosis.findings if f.severity in (WARNING, ERROR)]
    assert fixes, "the blown-up run went unnoticed"
    assert not [fix for fix in fixes if "lower the learning rate" in fix.lower()
                or "lower or warm up the learning rate" in fix.lower()], fixes


def test_a_hand_written_update_that_never_resets_its_grads_is_named_with_its_own_fix(tmp_path):
    """No optimizer object: step() marks the end of each step, so grads summed over steps show,
    and the fix speaks of resetting .grad by hand, not of optimizer.zero_grad()."""
    diagnosis = _diagnose(_train(tmp_path / "r", manual_lr=0.05, zero_grad=False))
    first = diagnosis.diagnoses[0]
    assert first.finding.rule == "missing-zero-grad", [d.finding.rule for d in diagnosis.diagnoses]
    assert "p.grad = None" in first.fix and "optimizer.zero_grad()" not in first.fix
    healthy = _diagnose(_train(tmp_path / "h", manual_lr=0.05))
    assert "missing-zero-grad" not in {f.rule for f in healthy.findings}


def test_a_run_without_outputs_or_loss_fn_opens_and_names_what_to_pass(tmp_path):
    run_dir = _train(tmp_path / "r", outputs=False)
    run = tracelab.open_run(run_dir)
    assert "loss_fn" not in run.meta and Needs.OUTPUTS not in run.available
    diagnosis = _diagnose(run_dir)
    skipped = {s.rule: s.reason for s in diagnosis.skipped}
    labels = set()
    for spec in all_rules():
        missing = [r.label for r in spec.requires if r not in run.available]
        if missing:
            assert skipped[spec.name].startswith(NOT_RECORDED), spec.name
            assert all(label in skipped[spec.name] for label in missing), spec.name
            labels.update(missing)
        else:
            assert spec.name not in skipped, spec.name
    assert labels  # (no validation split was logged: at least those rules are skipped)
    if any(Needs.OUTPUTS in s.requires for s in all_rules()):
        assert Needs.OUTPUTS.label in labels
    cli = subprocess.run([sys.executable, "-m", "tracelab", "analyze", str(run_dir),
                          "--no-html", "--fail-on", "never"],
                         capture_output=True, text=True, timeout=120)
    assert cli.returncode == 0, cli.stderr
    assert "Traceback" not in cli.stderr
    line = next(x for x in cli.stdout.splitlines() if "skipped" in x)
    assert all(label in line for label in labels), line


def test_a_run_from_before_the_loop_facts_opens_and_names_what_to_pass(tmp_path):
    """A run recorded before meta.json held the optimizers, the loss function, the outputs and
    the modules' settings, and before the signals table existed."""
    run_dir = _train(tmp_path / "r", zero_grad=False)
    meta = json.loads((run_dir / "meta.json").read_text())
    for key in ("optimizers", "schedulers", "loss_fn", "outputs", "module_shapes",
                "activation_calls"):
        meta.pop(key, None)
    meta["model"]["modules"] = [{"path": m["path"], "type": m["type"]}
                                for m in meta["model"]["modules"]]
    for p in meta["model"]["parameters"]:
        p.pop("in_optimizer", None)
    (run_dir / "meta.json").write_text(json.dumps(meta))
    shutil.rmtree(run_dir / "signals")
    run = tracelab.open_run(run_dir)
    for need in (Needs.GRAD_RESETS, Needs.OPTIMIZERS, Needs.OUTPUTS, Needs.TRAIN_MODES):
        assert need not in run.available, need
    diagnosis = _diagnose(run_dir)
    skipped = {s.rule: s.reason for s in diagnosis.skipped}
    assert skipped["missing-zero-grad"] == NOT_RECORDED + Needs.GRAD_RESETS.label
    for spec in all_rules():
        for need in (Needs.OPTIMIZERS, Needs.OUTPUTS, Needs.TRAIN_MODES):
            if need in spec.requires:
                assert need.label in skipped[spec.name], spec.name
    # The optimizer's summary of the older format and the lr/ scalars still say that its
    # learning rate is known; without them the learning-rate rules' fixes say what to pass.
    from tracelab.analyzers._learning_rate import LR_MOVES_THE_MODEL
    too_fast = Finding("update-ratio", "TL206", WARNING, "0.weight", (0, 59), "too fast.", {},
                       "Lower the learning rate.")
    assert LR_MOVES_THE_MODEL.judge(run, too_fast) == ("", "")
    bare = Run.from_frames({k: v for k, v in run.meta.items() if k != "optimizer"})
    assert "pass Recorder(optimizer=...)" in LR_MOVES_THE_MODEL.judge(bare, too_fast).missing
