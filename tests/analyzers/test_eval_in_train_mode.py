"""eval-in-train-mode: Dropout or BatchNorm active while a validation split was evaluated."""
import pandas as pd
import pytest

from tracelab.analyzers.eval_in_train_mode import eval_in_train_mode
from tracelab.core.run import Run


def _run(dropout, norm, *, n_drop=2, n_norm=1, model=None, split="val"):
    rows = []
    for i, (d, b) in enumerate(zip(dropout, norm)):
        step = 25 * (i + 1)
        for name, value in (("train_mode/model", 1 if model is None else model),
                            ("train_mode/dropout", d), ("train_mode/batchnorm", b),
                            ("modules/dropout", n_drop), ("modules/batchnorm", n_norm)):
            rows.append({"step": step, "split": split, "name": name, "value": float(value)})
    return Run.from_frames(signals=pd.DataFrame(rows))


def test_fires_when_dropout_and_batchnorm_stay_on_during_validation():
    [f] = eval_in_train_mode(_run([2, 2, 2, 2], [1, 1, 1, 1]))
    assert f.code == "TL603" and f.subject == "val" and f.severity.value == "warning"
    assert "2 of 2 Dropout and 1 of 1 BatchNorm" in f.message and "running statistics" in f.message
    assert "model.eval()" in f.fix


def test_dropout_alone_is_named_without_batchnorm_effects():
    [f] = eval_in_train_mode(_run([1, 1, 1], [0, 0, 0], n_norm=0))
    assert "1 of 2 Dropout modules" in f.message and "BatchNorm" not in f.message


def test_quiet_in_eval_mode_and_for_models_without_dropout_or_batchnorm():
    assert eval_in_train_mode(_run([0, 0, 0], [0, 0, 0], model=0)) == []
    # The model's own flag means nothing without Dropout or BatchNorm modules.
    assert eval_in_train_mode(_run([0, 0, 0], [0, 0, 0], n_drop=0, n_norm=0, model=1)) == []
    # One evaluation of five in training mode (a slip, not the loop): below min_share.
    assert eval_in_train_mode(_run([0, 0, 1, 0, 0], [0, 0, 0, 0, 0])) == []


def test_train_split_signals_are_not_evaluations():
    assert eval_in_train_mode(_run([2, 2], [1, 1], split="train")) == []


def _bn_run(path, eval_mode: bool):
    """A BatchNorm classifier validated in batches of one class each (the split sorted by
    label), with or without model.eval(): in training mode BatchNorm subtracts each batch's
    own mean, which removes what tells the classes apart."""
    torch = pytest.importorskip("torch", reason="the recorder needs torch (extra 'torch')")
    import tracelab
    from _contract_runs import blobs
    nn = torch.nn
    torch.manual_seed(0)
    x, y = blobs(2560, classes=2)
    x, y, xv, yv = x[:2048], y[:2048], x[2048:], y[2048:]
    order = torch.argsort(yv)
    xv, yv = xv[order], yv[order]
    model = nn.Sequential(nn.Linear(16, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Linear(32, 2))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    ce = nn.CrossEntropyLoss()
    with tracelab.Recorder(str(path), model=model, optimizer=opt, loss_fn=ce) as rec:
        for step in range(60):
            i = (step * 32) % (len(x) - 31)
            xb, yb = x[i:i + 32], y[i:i + 32]
            opt.zero_grad()
            out = model(xb)
            loss = ce(out, yb)
            loss.backward()
            opt.step()
            rec.step(loss=loss, inputs=xb, targets=yb, outputs=out)
            if (step + 1) % 6 == 0:
                if eval_mode:
                    model.eval()
                with torch.no_grad():
                    outs = torch.cat([model(xv[j:j + 64]) for j in range(0, len(xv), 64)])
                rec.log("val", metrics={"loss": ce(outs, yv),
                                        "acc": (outs.argmax(1) == yv).float().mean()},
                        targets=yv)
                model.train()
    return tracelab.analyze(str(path))


@pytest.mark.usefixtures("one_thread")
def test_validation_in_train_mode_explains_its_accuracy_at_chance(tmp_path):
    first = _bn_run(tmp_path / "r", eval_mode=False).diagnoses[0]
    assert first.finding.rule == "eval-in-train-mode"
    assert "metric-stagnation" in {f.rule for f in first.explains}


@pytest.mark.usefixtures("one_thread")
def test_validation_in_eval_mode_is_quiet(tmp_path):
    assert _bn_run(tmp_path / "r", eval_mode=True).diagnoses == []


def test_a_split_in_train_mode_explains_only_its_own_metrics():
    from tracelab.app.diagnose import diagnose
    from tracelab.core.findings import ERROR
    from tracelab.analyzers.metric_stagnation import metric_stagnation
    run = _run([2, 2, 2], [0, 0, 0])
    [mode] = eval_in_train_mode(run)
    test_acc = metric_stagnation.finding(ERROR, "test/acc", (50, 75), "at chance", {}, "")
    val_acc = metric_stagnation.finding(ERROR, "val/acc", (25, 75), "at chance", {}, "")
    ranked = diagnose(run, [mode, test_acc, val_acc])[1]
    by_root = {d.finding.subject: [f.subject for f in d.explains] for d in ranked}
    assert by_root["val"] == ["val/acc"] and by_root["test/acc"] == []


def _declared(config=None, modules=None, model=1.0, n=4):
    rows = [{"step": 10 * (i + 1), "split": "val", "name": name, "value": value}
            for i in range(n)
            for name, value in (("train_mode/model", model), ("train_mode/dropout", 0.0),
                                ("train_mode/batchnorm", 0.0), ("modules/dropout", 0.0),
                                ("modules/batchnorm", 0.0))]
    meta = {"config": config or {}, "model": {"modules": modules or []}}
    return Run.from_frames(meta, signals=pd.DataFrame(rows))


def test_declared_dropout_without_dropout_modules_is_judged_by_the_models_flag():
    [f] = eval_in_train_mode(_declared({"hidden": 16, "dropout": 0.5}))
    assert f.subject == "val" and "config dropout=0.5" in f.message
    assert f.evidence["declared_dropout"] == 0.5
    [f] = eval_in_train_mode(_declared({"model": {"hidden_dropout_prob": 0.1}}))
    assert "hidden_dropout_prob=0.1" in f.message
    lstm = [{"path": "rnn", "type": "LSTM", "extra_repr": "8, 16, num_layers=2, dropout=0.3"}]
    [f] = eval_in_train_mode(_declared(modules=lstm))
    assert "LSTM 'rnn' dropout=0.3" in f.message


def test_declared_dropout_quiet_in_eval_mode_or_when_nothing_drops():
    assert eval_in_train_mode(_declared({"dropout": 0.5}, model=0.0)) == []
    # drop_last is the loader's, a dropout of 0 drops nothing, a flag is no probability.
    for config in ({"drop_last": True}, {"dropout": 0.0}, {"use_dropout": True},
                   {"dropout": "none"}, {"dropout": 1.5}):
        assert eval_in_train_mode(_declared(config)) == []
    assert eval_in_train_mode(_declared()) == []


def _train_validating(path, model, x, y, *, held_out: int, eval_mode: bool,
                      config: dict | None = None):
    """Train `model` 40 Adam steps on batches of 32 of x[:-held_out], validating on the last
    `held_out` rows under torch.no_grad() every 5 steps, after model.eval() only where
    `eval_mode`; the recorded run."""
    import torch
    import tracelab
    x, y, xv, yv = x[:-held_out], y[:-held_out], x[-held_out:], y[-held_out:]
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    ce = torch.nn.CrossEntropyLoss()
    with tracelab.Recorder(str(path), model=model, optimizer=opt, loss_fn=ce,
                           config=config) as rec:
        for step in range(40):
            i = (step * 32) % (len(x) - 31)
            model.train()
            opt.zero_grad()
            out = model(x[i:i + 32])
            loss = ce(out, y[i:i + 32])
            loss.backward()
            opt.step()
            rec.step(loss=loss, inputs=x[i:i + 32], targets=y[i:i + 32], outputs=out)
            if (step + 1) % 5 == 0:
                if eval_mode:
                    model.eval()
                with torch.no_grad():
                    outs = model(xv)
                rec.log("val", metrics={"loss": ce(outs, yv)}, targets=yv)
    return tracelab.open_run(str(path))


def _functional_dropout_run(path, eval_mode: bool, config: dict):
    """A classifier whose forward applies F.dropout(x, 0.5, training=self.training) (no
    Dropout module: pygcn's GCN), validated on rows it never trained on every 5 steps, with
    or without model.eval() before the validation forward."""
    torch = pytest.importorskip("torch", reason="the recorder needs torch (extra 'torch')")
    from _contract_runs import blobs
    nn, F = torch.nn, torch.nn.functional

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Linear(16, 32), nn.Linear(32, 4)

        def forward(self, x):
            return self.b(F.dropout(F.relu(self.a(x)), 0.5, training=self.training))

    torch.manual_seed(0)
    x, y = blobs(640)
    return _train_validating(path, Net(), x, y, held_out=128, eval_mode=eval_mode, config=config)


@pytest.mark.usefixtures("one_thread")
def test_functional_dropout_left_on_at_validation_fires(tmp_path):
    run = _functional_dropout_run(tmp_path / "r", False, {"dropout": 0.5, "lr": 1e-2})
    [f] = eval_in_train_mode(run)
    assert f.evidence["in_train_mode"] == f.evidence["evaluations"] == 8
    assert "config dropout=0.5" in f.message


@pytest.mark.usefixtures("one_thread")
def test_functional_dropout_quiet_in_eval_mode_or_undeclared(tmp_path):
    declared = {"dropout": 0.5, "lr": 1e-2}
    assert eval_in_train_mode(_functional_dropout_run(tmp_path / "a", True, declared)) == []
    # Nothing recorded says this forward drops units: the model's flag alone stays quiet.
    assert eval_in_train_mode(_functional_dropout_run(tmp_path / "b", False, {"lr": 1e-2})) == []


def test_a_single_layer_recurrent_dropout_declares_nothing():
    # PyTorch drops units only between stacked recurrent layers, and nn.LSTM's summary omits
    # num_layers=1: its dropout=0.5 is inert, and so is the config value passed to it.
    lstm = [{"path": "rnn", "type": "LSTM", "extra_repr": "8, 16, dropout=0.5"}]
    assert eval_in_train_mode(_declared(modules=lstm)) == []
    assert eval_in_train_mode(_declared({"dropout": 0.5}, modules=lstm)) == []
    recorded = [dict(lstm[0], config={"num_layers": 1, "hidden_size": 16})]
    assert eval_in_train_mode(_declared(modules=recorded)) == []
    # Another dropout in the config is a different one, and a recorded stack of two drops.
    [f] = eval_in_train_mode(_declared({"dropout": 0.2}, modules=lstm))
    assert "config dropout=0.2" in f.message
    stacked = [dict(lstm[0], config={"num_layers": 2})]
    [f] = eval_in_train_mode(_declared(modules=stacked))
    assert "LSTM 'rnn' dropout=0.5" in f.message


def _lstm_run(path, layers: int):
    """A sequence classifier whose nn.LSTM(..., num_layers=layers, dropout=0.5) is its only
    dropout, validated under torch.no_grad() every 5 steps without model.eval()."""
    torch = pytest.importorskip("torch", reason="the recorder needs torch (extra 'torch')")
    import warnings
    nn = torch.nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            with warnings.catch_warnings():  # PyTorch warns of dropout with one layer
                warnings.simplefilter("ignore")
                self.rnn = nn.LSTM(3, 16, num_layers=layers, dropout=0.5, batch_first=True)
            self.head = nn.Linear(16, 2)

        def forward(self, x):
            return self.head(self.rnn(x)[0][:, -1])

    torch.manual_seed(0)
    x = torch.randn(320, 6, 3)
    y = (x.sum((1, 2)) > 0).long()
    return _train_validating(path, Net(), x, y, held_out=64, eval_mode=False)


@pytest.mark.usefixtures("one_thread")
def test_stacked_recurrent_dropout_left_on_at_validation_fires(tmp_path):
    [f] = eval_in_train_mode(_lstm_run(tmp_path / "r", layers=2))
    assert f.evidence["in_train_mode"] == f.evidence["evaluations"] == 8
    assert "LSTM 'rnn' dropout=0.5" in f.message


@pytest.mark.usefixtures("one_thread")
def test_single_layer_recurrent_dropout_is_quiet_in_train_mode(tmp_path):
    # One layer: the outputs are the same in both modes, so there is nothing to flag.
    assert eval_in_train_mode(_lstm_run(tmp_path / "r", layers=1)) == []
