"""loss-input-contract: probabilities given where the loss expects logits, logits where it
expects log-probabilities; real tiny trainings, and frames for the case without loss_fn."""
import math

import pandas as pd
import pytest

from tracelab.analyzers.loss_input_contract import cross_entropy_bound, loss_input_contract
from tracelab.core.run import Run

torch = pytest.importorskip("torch", reason="the recorder needs torch (extra 'torch')")
nn = torch.nn
F = torch.nn.functional

import tracelab  # noqa: E402
from _contract_runs import blobs, train  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")


def _mlp(out: int = 4, last: nn.Module | None = None) -> nn.Module:
    torch.manual_seed(0)
    layers = [nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, out)]
    return nn.Sequential(*layers, *([last] if last is not None else []))


def _findings(path, rule="loss-input-contract"):
    diagnosis = tracelab.analyze(path)
    assert not diagnosis.errors, diagnosis.errors
    return [f for f in diagnosis.findings if f.rule == rule]


def test_the_bound_is_the_cross_entropy_of_a_one_hot_row_read_as_logits():
    one_hot = torch.tensor([[1.0, 0, 0, 0]])
    assert cross_entropy_bound(4) == pytest.approx(F.cross_entropy(one_hot, torch.tensor([0])))
    assert cross_entropy_bound(10) == pytest.approx(math.log(1 + 9 / math.e))


def test_softmax_rows_given_to_cross_entropy_fire(tmp_path):
    ce = nn.CrossEntropyLoss()
    path = train(tmp_path / "r", _mlp(last=nn.Softmax(dim=1)), blobs(2048), ce, loss_fn=ce)
    [f] = _findings(path)
    assert f.code == "TL607" and f.severity.value == "error" and f.subject == "CrossEntropyLoss"
    assert "probabilities" in f.message and "ln(1 + 3/e) = 0.744" in f.message
    assert f.evidence["lowest_loss"] >= f.evidence["bound"] and "remove the softmax" in f.fix


@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_logits_given_to_cross_entropy_stay_quiet(tmp_path, smoothing):
    ce = nn.CrossEntropyLoss(label_smoothing=smoothing)
    assert _findings(train(tmp_path / "r", _mlp(), blobs(2048), ce, loss_fn=ce)) == []


def test_log_softmax_rows_given_to_cross_entropy_stay_quiet(tmp_path):
    ce = nn.CrossEntropyLoss()
    path = train(tmp_path / "r", _mlp(last=nn.LogSoftmax(dim=1)), blobs(2048), ce, loss_fn=ce)
    assert _findings(path) == []


def test_logits_given_to_nll_loss_fire_and_explain_the_negative_loss(tmp_path):
    nll = nn.NLLLoss()
    path = train(tmp_path / "r", _mlp(), blobs(2048), nll, loss_fn=nll)
    [f] = _findings(path)
    assert "NLLLoss were not log-probabilities" in f.message and "log_softmax" in f.fix
    first = tracelab.analyze(path).diagnoses[0]
    assert first.finding.rule == "loss-input-contract"
    assert "loss-below-bound" in {f.rule for f in first.explains}


def test_log_softmax_rows_given_to_nll_loss_stay_quiet(tmp_path):
    nll = nn.NLLLoss()
    path = train(tmp_path / "r", _mlp(last=nn.LogSoftmax(dim=1)), blobs(2048), nll, loss_fn=nll)
    assert _findings(path) == []


def _binary(n=2048):
    x, y = blobs(n, classes=2)
    return x, y.float()


def test_a_sigmoid_before_bce_with_logits_fires(tmp_path):
    bce = nn.BCEWithLogitsLoss()
    path = train(tmp_path / "r", _mlp(1, nn.Sigmoid()), _binary(),
                 lambda out, y: bce(out.squeeze(1), y), loss_fn=bce)
    [f] = _findings(path)
    assert "BCEWithLogitsLoss lay in [0, 1]" in f.message and "remove the sigmoid" in f.fix


def test_logits_given_to_bce_with_logits_stay_quiet(tmp_path):
    bce = nn.BCEWithLogitsLoss()
    path = train(tmp_path / "r", _mlp(1), _binary(), lambda out, y: bce(out.squeeze(1), y),
                 loss_fn=bce)
    assert _findings(path) == []


@pytest.mark.parametrize("twice", [True, False])
def test_a_sigmoid_applied_twice_before_bce_fires(tmp_path, twice):
    bce = nn.BCELoss()

    def probabilities(out):
        return torch.sigmoid(out) if twice else out
    path = train(tmp_path / "r", _mlp(1, nn.Sigmoid()), _binary(),
                 lambda out, y: bce(probabilities(out).squeeze(1), y), loss_fn=bce,
                 outputs_of=probabilities)
    found = _findings(path)
    assert len(found) == twice
    if twice:
        assert "a sigmoid applied twice" in found[0].message


def test_outputs_other_than_what_the_loss_read_are_caught_by_the_bound(tmp_path):
    # softmax rows passed as outputs, the loss on the logits: it goes below the bound.
    ce = nn.CrossEntropyLoss()
    path = train(tmp_path / "r", _mlp(), blobs(2048), ce, loss_fn=ce,
                 outputs_of=lambda out: out.softmax(dim=1))
    assert _findings(path) == []


# -- without loss_fn: the facts alone, and a loss settled at the bound --------------------------
def _frames(losses, *, classes=10, unit=1.0, row_sum=0.0):
    steps = range(len(losses))
    scalars = pd.DataFrame({"step": list(steps), "split": "train", "name": "loss",
                            "value": losses})
    rows = []
    for step in steps[::5]:
        for name, value in (("outputs/numel", 320.0), ("outputs/classes", classes),
                            ("outputs/min", 0.0), ("outputs/max", 0.9),
                            ("outputs/unit_rows", unit), ("outputs/row_sum_error", row_sum),
                            ("outputs/logsumexp_error", 2.0)):
            rows.append({"step": step, "split": "train", "name": name, "value": value})
    return Run.from_frames(scalars=scalars, signals=pd.DataFrame(rows))


def test_without_loss_fn_softmax_rows_whose_loss_settles_at_the_bound_fire():
    bound = cross_entropy_bound(10)
    losses = [2.3 - (2.3 - bound - 0.01) * (1 - math.exp(-i / 10)) for i in range(100)]
    [f] = loss_input_contract(_frames(losses))
    assert f.severity.value == "warning" and "if the loss is a cross-entropy" in f.message


def test_without_loss_fn_a_loss_below_the_bound_or_above_it_stays_quiet():
    bound = cross_entropy_bound(10)
    assert loss_input_contract(_frames([2.3 - 2.2 * i / 99 for i in range(100)])) == []
    assert loss_input_contract(_frames([bound + 0.5] * 100)) == []
    # rows that do not sum to 1 are not probabilities
    assert loss_input_contract(_frames([bound + 0.001] * 100, row_sum=0.3)) == []


def test_a_run_without_its_outputs_skips_the_rule_naming_what_to_pass(tmp_path):
    ce = nn.CrossEntropyLoss()
    path = train(tmp_path / "r", _mlp(last=nn.Softmax(dim=1)), blobs(512), ce, loss_fn=ce,
                 outputs_of=lambda out: None, steps=20)
    skipped = {s.rule: s.reason for s in tracelab.analyze(path).skipped}
    assert skipped["loss-input-contract"] == \
        "not recorded: what enters the loss (step(outputs=...))"
    assert "shape-broadcast" in skipped


def _ten_class_run(path, last, lr):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 10),
                          *([last] if last is not None else []))
    ce = nn.CrossEntropyLoss()
    return train(path, model, blobs(2048, classes=10), ce, loss_fn=ce,
                 optimizer=torch.optim.SGD(model.parameters(), lr=lr))


def test_softmax_rows_explain_the_tiny_updates_they_starve(tmp_path):
    # Softmax rows into cross-entropy pass back the gradient through the softmax's slope:
    # the updates are tiny and their rule's "raise the learning rate" is not the fix.
    path = _ten_class_run(tmp_path / "r", nn.Softmax(dim=1), lr=1e-3)
    first = tracelab.analyze(path).diagnoses[0]
    assert first.finding.rule == "loss-input-contract"
    assert "update-ratio" in {f.rule for f in first.explains}


def test_tiny_updates_on_logits_stay_their_own_diagnosis(tmp_path):
    path = _ten_class_run(tmp_path / "r", None, lr=1e-5)
    ranked = tracelab.analyze(path).diagnoses
    assert [d.finding.rule for d in ranked][:1] == ["update-ratio"]
    assert "loss-input-contract" not in {d.finding.rule for d in ranked}


def test_only_bounded_rows_explain_small_updates():
    from tracelab.analyzers.loss_input_contract import _squashed_inputs_starve
    from tracelab.core.findings import ERROR, WARNING, Finding

    def cause(bound):
        return Finding("loss-input-contract", "TL607", ERROR, "NLLLoss", (0, 9), "",
                       {"bound": bound})

    def updates(ratio, layers=2, of=2):
        return Finding("update-ratio", "TL206", WARNING, "0.weight", (0, 9), "",
                       {"worst_ratio": ratio, "layers": layers, "of_layers": of})

    small, large = updates(1e-6), updates(0.5)
    # The squashing scales every layer's gradient alike: one layer's tiny updates (a first
    # layer saturated by unscaled inputs) are not its doing.
    assert not _squashed_inputs_starve(cause(0.744), updates(1e-6, layers=1))
    assert _squashed_inputs_starve(cause(0.744), small)
    # Logits given to NLLLoss (floor 0) make the loss unbounded and the updates grow.
    assert not _squashed_inputs_starve(cause(0.0), small)
    assert not _squashed_inputs_starve(cause(0.744), large)
    assert not _squashed_inputs_starve(cause(None), small)


# -- a short run: one profiled training step, the evaluation splits' outputs corroborate it -----
def _short_run(path, last, val_outputs, data, steps=20):
    """20 steps (one profiled at the default input_every), the held-out outputs logged with
    log(outputs=...) every other step, as an evaluation loop does."""
    torch.manual_seed(0)
    model = _mlp(1, last)
    bce = nn.BCEWithLogitsLoss()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    x, y = data
    with tracelab.Recorder(str(path), model=model, optimizer=opt, loss_fn=bce) as rec:
        for step in range(steps):
            xb, yb = x[step * 32:(step + 1) * 32], y[step * 32:(step + 1) * 32].view(-1, 1)
            opt.zero_grad()
            out = model(xb)
            loss = bce(out, yb)
            loss.backward()
            opt.step()
            rec.step(loss=loss, inputs=xb, targets=yb, outputs=out)
            if step % 2:
                with torch.no_grad():
                    out = model(x[-256:])
                    val = bce(out, y[-256:].view(-1, 1))
                rec.log("val", metrics={"loss": val}, outputs=val_outputs(out))
    return path


def test_a_sigmoid_before_bce_with_logits_fires_on_a_short_run_with_held_out_outputs(tmp_path):
    path = _short_run(tmp_path / "r", nn.Sigmoid(), lambda out: out, _binary())
    [f] = _findings(path)
    assert "BCEWithLogitsLoss lay in [0, 1]" in f.message
    assert f.evidence["profiled_steps"] == 11  # 1 training step + 10 evaluations


def test_a_short_run_on_logits_stays_quiet(tmp_path):
    path = _short_run(tmp_path / "r", None, lambda out: out, _binary())
    assert _findings(path) == []


def test_held_out_probabilities_do_not_speak_for_the_training_steps(tmp_path):
    # Random labels keep the loss near ln 2, above the bound; the evaluation logs the sigmoid's
    # probabilities (for its metrics) while the loss read logits: training's facts decide.
    x, _ = _binary()
    y = torch.randint(0, 2, (len(x),), generator=torch.Generator().manual_seed(1)).float()
    path = _short_run(tmp_path / "r", None, torch.sigmoid, (x, y))
    from tracelab.analyzers._loss_contracts import output_facts
    from tracelab.core.run import open_run
    run = open_run(path)
    # 10 of the 11 profiles lie in [0, 1]: pooled, they would pass the 0.9 share.
    assert (output_facts(run, "val")["outputs/min"] >= 0).all()
    assert not (output_facts(run)["outputs/min"] >= 0).all()
    assert _findings(path) == []
