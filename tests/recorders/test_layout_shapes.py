"""The recorder keeps the layout (batch_first) of modules that read one, leaves or not, and the
distinct input shapes they are called with on the recording steps and in the first two
evaluations off them, with split and step (meta.json's model.modules config and
module_input_shapes); the training steps that record no activations carry no hook."""
import json

import pytest

torch = pytest.importorskip("torch", reason="the recorder needs torch (extra 'torch')")
nn = torch.nn

import tracelab  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.embedding = nn.Embedding(12, 16)
        layer = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 1, enable_nested_tensor=False)
        self.rnn = nn.GRU(16, 16)
        self.head = nn.Linear(16, 2)

    def forward(self, tokens):
        h = self.encoder(self.embedding(tokens))
        out, _ = self.rnn(h.transpose(0, 1))
        return self.head(out[-1])


def _record(path, seen=None, last_val=False):
    g = torch.Generator().manual_seed(0)
    model, ce = Model(), nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with tracelab.Recorder(str(path), model=model, optimizer=opt, loss_fn=ce,
                           activation_every=4) as rec:
        for step in range(13):
            n = 5 if step == 12 else 8  # a smaller batch on a recording step
            x = torch.randint(0, 12, (n, 6), generator=g)
            out = model(x)
            loss = ce(out, x[:, 0] % 2)
            opt.zero_grad()
            loss.backward()
            opt.step()
            rec.step(loss=loss, inputs=x, targets=x[:, 0] % 2, outputs=out)
            if seen is not None:  # the hooks on the batch_first modules for the next step
                seen.append(len(model.rnn._forward_hooks)
                            + len(model.encoder.layers[0]._forward_hooks))
            if step in ((3, 6) if last_val else (3, 6, 9, 10)):  # 4 records activations
                model.eval()
                with torch.no_grad():
                    xv = torch.randint(0, 12, ({3: 7, 10: 14}.get(step, 10), 6), generator=g)
                    ov = model(xv)
                rec.log("val", metrics={"loss": 0.0}, targets=xv[:, 0] % 2, outputs=ov)
                model.train()
        if last_val:  # an evaluation no log() or step() follows: the second off the steps
            model.eval()
            with torch.no_grad():
                model(torch.randint(0, 12, (9, 6), generator=g))
    assert not any(m._forward_hooks for m in model.modules())  # none left after the run
    return json.loads((path / "meta.json").read_text())


def test_layouts_and_the_recording_steps_input_shapes_are_kept(tmp_path):
    seen = []
    meta = _record(tmp_path / "r", seen)
    config = {m["path"]: m.get("config") for m in meta["model"]["modules"]}
    assert config["encoder.layers.0"]["batch_first"] is True  # a layer of children
    assert config["encoder.layers.0.self_attn"]["batch_first"] is True
    assert config["rnn"]["batch_first"] is False and "config" not in \
        [k for m in meta["model"]["modules"] if m["path"] == "encoder" for k in m]
    shapes = meta["module_input_shapes"]
    assert shapes["rnn"] == [{"inputs": [6, 8, 16], "split": "train", "step": 0},
                             {"inputs": [6, 7, 16], "split": "val", "step": 4},
                             {"inputs": [6, 10, 16], "split": "val", "step": 7},
                             {"inputs": [6, 5, 16], "split": "train", "step": 12}]
    assert [s["inputs"] for s in shapes["encoder.layers.0"]] == [[8, 6, 16], [7, 6, 16],
                                                                 [10, 6, 16], [5, 6, 16]]
    # The evaluations off the recording steps: the first two are read (after steps 6 and 9,
    # of the same shape), the third (14 samples) is not.
    # Hooked only for the recording steps (0, 4, 8, 12): armed after steps 3, 7 and 11 (the
    # GRU, a leaf, has its activation hook too).
    assert [i for i, n in enumerate(seen) if n] == [3, 7, 11] and max(seen) == 3


def test_an_evaluation_at_the_end_leaves_no_hook_on_the_model(tmp_path):
    meta = _record(tmp_path / "r", last_val=True)
    assert {"inputs": [6, 10, 16], "split": "val", "step": 7} in meta["module_input_shapes"]["rnn"]


def _train(model, rec, opt, ce, g, n=8):
    x = torch.randint(0, 12, (n, 6), generator=g)
    out = model(x)
    loss = ce(out, x[:, 0] % 2)
    opt.zero_grad()
    loss.backward()
    opt.step()
    rec.step(loss=loss)


def _evaluate(model, g, n):
    model.eval()
    with torch.no_grad():
        model(torch.randint(0, 12, (n, 6), generator=g))
    model.train()


def _run(path, loop):
    g = torch.Generator().manual_seed(0)
    model, ce = Model(), nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with tracelab.Recorder(str(path), model=model, optimizer=opt, loss_fn=ce,
                           activation_every=100) as rec:  # step 0 records activations alone
        loop(model, rec, lambda n=8: _train(model, rec, opt, ce, g, n),
             lambda n: _evaluate(model, g, n))
    assert not any(m._forward_hooks for m in model.modules())
    return json.loads((path / "meta.json").read_text())["module_input_shapes"]["rnn"]


def test_an_evaluation_after_the_last_recording_step_reaches_meta(tmp_path):
    def loop(model, rec, train, evaluate):
        for _ in range(4):
            train()
        evaluate(7)  # the final evaluation, named by its log()
        rec.log("val", metrics={"loss": 0.0})
    assert {"inputs": [6, 7, 16], "split": "val", "step": 4} in _run(tmp_path / "r", loop)

    def unnamed(model, rec, train, evaluate):
        for _ in range(4):
            train()
        evaluate(9)  # no log() nor step() after it: "eval" at close
    assert {"inputs": [6, 9, 16], "split": "eval", "step": 4} in _run(tmp_path / "u", unnamed)


def test_an_evaluation_logged_after_the_next_step_keeps_its_split(tmp_path):
    hooked = []

    def loop(model, rec, train, evaluate):
        train()
        evaluate(7)
        hooked.append(len(model.rnn._forward_hooks))  # on until the training pass
        train()  # evaluate -> step -> log: the log() names the evaluation's split
        hooked.append(len(model.rnn._forward_hooks))
        rec.log("val", metrics={"loss": 0.0})
        train()
        train()
    shapes = _run(tmp_path / "r", loop)
    assert hooked == [1, 0]
    assert {"inputs": [6, 7, 16], "split": "val", "step": 1} in shapes
    assert all(s["split"] != "eval" for s in shapes)


def test_a_no_grad_rollout_in_train_mode_is_no_evaluation(tmp_path):
    hooked = []

    def loop(model, rec, train, evaluate):
        train()
        for _ in range(3):  # a rollout without autograd, the model in train mode
            with torch.no_grad():
                model(torch.randint(0, 12, (3, 6)))
            hooked.append(len(model.rnn._forward_hooks))
            train()
        evaluate(7)  # the two evaluations read all the same
        rec.log("val", metrics={"loss": 0.0})
        train()
        evaluate(10)
        rec.log("val", metrics={"loss": 0.0})
    shapes = _run(tmp_path / "r", loop)
    assert hooked == [0, 0, 0]
    assert [s["inputs"][1] for s in shapes] == [8, 7, 10]
    assert [s["split"] for s in shapes] == ["train", "val", "val"]


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(16, 16, batch_first=True)

    def forward(self, x):
        out, _ = self.lstm(x)
        return out


class Scripted(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.embedding = nn.Embedding(12, 16)
        self.encoder = torch.jit.script(Encoder())  # a scripted LSTM inside: batch_first
        self.gru = nn.GRU(16, 16, batch_first=True)
        self.head = nn.Linear(16, 2)

    def forward(self, tokens):
        out, _ = self.gru(self.encoder(self.embedding(tokens)))
        return self.head(out[:, -1])


@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated")
def test_a_scripted_lstm_inside_the_model_never_raises(tmp_path):
    g = torch.Generator().manual_seed(0)
    model, ce = Scripted(), nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with tracelab.Recorder(str(tmp_path / "r"), model=model, optimizer=opt, loss_fn=ce,
                           activation_every=4) as rec:
        for step in range(6):
            x = torch.randint(0, 12, (8, 6), generator=g)
            out = model(x)
            loss = ce(out, x[:, 0] % 2)
            opt.zero_grad()
            loss.backward()
            opt.step()
            rec.step(loss=loss)
            if step in (1, 3):  # off the recording steps, and on one (4)
                model.eval()
                with torch.no_grad():
                    model(torch.randint(0, 12, (5, 6), generator=g))
                rec.log("val", metrics={"loss": 0.0})
                model.train()
    meta = json.loads((tmp_path / "r" / "meta.json").read_text())
    shapes = meta["module_input_shapes"]
    assert isinstance(model.encoder.lstm, torch.jit.ScriptModule)
    assert "encoder.lstm" not in shapes  # a scripted module takes no hook
    assert [(s["inputs"], s["split"]) for s in shapes["gru"]] == [([8, 6, 16], "train"),
                                                                 ([5, 6, 16], "val")]
    assert not any(m._forward_hooks for m in model.modules()
                   if not isinstance(m, torch.jit.ScriptModule))


def test_a_module_refusing_the_evaluations_hook_stops_the_capture_not_training(tmp_path):
    def refuse(*args, **kwargs):
        raise RuntimeError("no hooks here")

    def loop(model, rec, train, evaluate):
        train()
        model.rnn.register_forward_hook = refuse  # (as a ScriptModule does)
        evaluate(7)  # the evaluation's pre-hook finds it: the pass runs all the same
        rec.log("val", metrics={"loss": 0.0})
        train()
        evaluate(10)
        rec.log("val", metrics={"loss": 0.0})
    shapes = _run(tmp_path / "r", loop)
    assert [s["split"] for s in shapes] == ["train"]
