"""What enters the loss (step/log outputs=), the modes of every training step, the loss module and
the leaf modules' configuration in meta.json: each checked against plain torch on a real tiny
training."""
import json

import pytest
import torch

import tracelab
from tracelab.core.run import open_run
from tracelab.core.schema import (OUTPUT_BROADCAST, OUTPUT_CLASSES, OUTPUT_LOGSUMEXP, OUTPUT_MAX,
                                  OUTPUT_MIN, OUTPUT_NUMEL, OUTPUT_ROW_SUM, OUTPUT_UNIT_ROWS,
                                  TRAIN_MODE_DROPOUT, TRAIN_MODE_MODEL, TRAIN_MODE_NORM)
from tracelab.recorders.outputs import MAX_ROWS, MAX_VALUES, broadcasts, output_facts


def _model():
    return torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.BatchNorm1d(16),
                               torch.nn.ReLU(), torch.nn.Dropout(0.2), torch.nn.Linear(16, 4))


def _train(run_dir, steps, transform, loss_fn, *, eval_after=None, targets_of=None):
    """A tiny classifier trained for `steps` steps; `transform` maps its logits to what the loss
    is given. Returns each step's outputs as given to step()."""
    torch.manual_seed(0)
    model = _model()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    given = []
    with tracelab.Recorder(str(run_dir), model, opt, loss_fn=loss_fn, input_every=1) as rec:
        for step in range(steps):
            x, y = torch.randn(32, 6), torch.randint(0, 4, (32,))
            y = targets_of(y) if targets_of else y
            out = transform(model(x))
            loss = loss_fn(out, y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            rec.step(loss, x, targets=y, outputs=out)
            given.append((out.detach().clone(), y))
            if eval_after is not None and step == eval_after:
                model.eval()  # and never back: the rest trains in eval mode
    return given


def _signal(run, name, split="train"):
    return run.signal(name, split)


def test_output_facts_match_plain_torch_for_logits(tmp_path):
    given = _train(tmp_path, 3, lambda z: z, torch.nn.CrossEntropyLoss())
    run = open_run(str(tmp_path))
    for step, (out, y) in enumerate(given):
        out = out.double()
        assert _signal(run, OUTPUT_MIN)[step] == pytest.approx(float(out.min()))
        assert _signal(run, OUTPUT_MAX)[step] == pytest.approx(float(out.max()))
        assert _signal(run, OUTPUT_NUMEL)[step] == out.numel()
        assert _signal(run, OUTPUT_CLASSES)[step] == out.shape[1]
        unit = ((out >= 0) & (out <= 1)).all(dim=1).double().mean()
        assert _signal(run, OUTPUT_UNIT_ROWS)[step] == pytest.approx(float(unit))
        assert _signal(run, OUTPUT_ROW_SUM)[step] == pytest.approx(
            float((out.sum(1) - 1).abs().max()))
        assert _signal(run, OUTPUT_LOGSUMEXP)[step] == pytest.approx(
            float(torch.logsumexp(out, 1).abs().max()))
        assert _signal(run, OUTPUT_BROADCAST)[step] == 0
    meta = json.loads((tmp_path / "meta.json").read_text())
    assert meta["outputs"]["train"] == {"shape": [32, 4], "dtype": "float32",
                                        "targets_shape": [32], "targets_dtype": "int64",
                                        "step": 0}
    assert meta["loss_fn"] == {"type": "CrossEntropyLoss", "reduction": "mean",
                               "ignore_index": -100, "label_smoothing": 0.0, "weight": False}


def test_softmax_rows_and_log_probability_rows_are_told_apart(tmp_path):
    _train(tmp_path / "softmax", 2, lambda z: z.softmax(1), torch.nn.CrossEntropyLoss())
    _train(tmp_path / "logsoftmax", 2, lambda z: z.log_softmax(1), torch.nn.NLLLoss())
    soft, logp = open_run(str(tmp_path / "softmax")), open_run(str(tmp_path / "logsoftmax"))
    assert (_signal(soft, OUTPUT_UNIT_ROWS) == 1).all()
    assert (_signal(soft, OUTPUT_ROW_SUM) < 1e-5).all()
    assert (_signal(soft, OUTPUT_LOGSUMEXP) > 0.5).all()  # log(sum(exp(p))) > 0 for p >= 0
    assert (_signal(logp, OUTPUT_UNIT_ROWS) == 0).all()
    assert (_signal(logp, OUTPUT_LOGSUMEXP) < 1e-5).all()
    assert json.loads((tmp_path / "logsoftmax" / "meta.json").read_text())[
        "loss_fn"]["type"] == "NLLLoss"


@pytest.mark.filterwarnings("ignore:Using a target size")  # torch's own warning of the bug
def test_a_column_prediction_against_flat_targets_is_flagged_as_broadcasting(tmp_path):
    head = torch.nn.Linear(4, 1)
    _train(tmp_path, 2, lambda z: head(z), torch.nn.MSELoss(),
           targets_of=lambda y: y.float())  # (32, 1) against (32,): MSE over (32, 32)
    run = open_run(str(tmp_path))
    assert (_signal(run, OUTPUT_BROADCAST) == 1).all()
    assert (_signal(run, OUTPUT_CLASSES) == 1).all()
    assert broadcasts(torch.zeros(8, 1), torch.zeros(8))
    assert not broadcasts(torch.zeros(8), torch.zeros(8))
    assert not broadcasts(torch.zeros(8, 3), torch.zeros(8))  # no common shape: not this case


def test_large_outputs_read_their_first_rows_only():
    x = torch.zeros(MAX_ROWS + 10, 3)
    x[MAX_ROWS:] = 5.0  # beyond the rows read
    facts = output_facts(x)
    assert float(facts[1]) == 0.0 and float(facts[2]) == 1.0


def test_wide_outputs_read_a_bounded_number_of_values():
    """A language model's (tokens, vocabulary) logits: the rows read hold at most MAX_VALUES
    values, whatever the vocabulary, and those rows' facts are exact."""
    vocab = 50_257
    logits = torch.log_softmax(torch.randn(64, vocab), dim=1)
    logits[MAX_VALUES // vocab:] = 3.0  # rows beyond the bound: not log-probabilities
    facts = output_facts(logits)
    assert float(facts[4]) < 1e-5  # the rows read are log-probability rows (float32 exp)
    seq = torch.randn(2, vocab, 40)  # (N, C, T): one sample holds more values than the bound
    seq[1] = 1e6  # the second sample is not read
    seq[0, :, MAX_VALUES // vocab:] = 1e5  # nor the first sample's rows beyond the bound
    facts = output_facts(seq)
    assert float(facts[1]) == float(seq[0, :, :MAX_VALUES // vocab].max())


def test_every_training_step_records_the_modes_of_its_training_pass(tmp_path):
    _train(tmp_path, 6, lambda z: z, torch.nn.CrossEntropyLoss(), eval_after=2)
    run = open_run(str(tmp_path))
    # Steps 0-2 trained in train mode; model.eval() after step 2 left the rest in eval mode.
    assert list(_signal(run, TRAIN_MODE_MODEL)) == [1, 1, 1, 0, 0, 0]
    assert list(_signal(run, TRAIN_MODE_DROPOUT)) == [1, 1, 1, 0, 0, 0]
    assert list(_signal(run, TRAIN_MODE_NORM)) == [1, 1, 1, 0, 0, 0]


def test_log_records_the_evaluation_outputs_beside_the_training_ones(tmp_path):
    torch.manual_seed(0)
    model = _model()
    loss_fn = torch.nn.CrossEntropyLoss()
    with tracelab.Recorder(str(tmp_path), model, torch.optim.SGD(model.parameters(), lr=0.1),
                           loss_fn=loss_fn) as rec:
        x, y = torch.randn(32, 6), torch.randint(0, 4, (32,))
        rec.step(loss_fn(model(x), y), x, targets=y, outputs=model(x))
        model.eval()
        with torch.no_grad():
            out = model(x)
        rec.log("val", {"loss": loss_fn(out, y)}, x, targets=y, outputs=out)
    run = open_run(str(tmp_path))
    assert _signal(run, OUTPUT_MAX, "val")[0] == pytest.approx(float(out.max()))
    assert _signal(run, TRAIN_MODE_MODEL, "val")[0] == 0
    assert json.loads((tmp_path / "meta.json").read_text())["outputs"]["val"]["shape"] == [32, 4]


def test_leaf_modules_keep_their_configuration_in_meta(tmp_path):
    model = torch.nn.ModuleDict({"lstm": torch.nn.LSTM(8, 16, num_layers=2),
                                 "emb": torch.nn.Embedding(10, 8, padding_idx=0),
                                 "norm": torch.nn.BatchNorm1d(8, eps=1e-3, momentum=0.2)})
    with tracelab.Recorder(str(tmp_path), model):
        pass
    modules = {m["path"]: m for m in
               json.loads((tmp_path / "meta.json").read_text())["model"]["modules"]}
    assert modules["lstm"]["config"]["batch_first"] is False
    assert modules["lstm"]["config"]["num_layers"] == 2
    assert modules["lstm"]["extra_repr"] == model["lstm"].extra_repr()
    assert modules["emb"]["config"]["padding_idx"] == 0
    assert modules["norm"]["config"] == {"eps": 1e-3, "momentum": 0.2,
                                         "track_running_stats": True, "affine": True}
    assert "config" not in modules[""]  # the container: no leaf
