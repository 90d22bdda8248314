"""wrong-batch-axis: an LSTM whose batch_first does not match where the batch is; real tiny
trainings of a sequence classifier."""
import pytest

torch = pytest.importorskip("torch", reason="the recorder needs torch (extra 'torch')")
nn = torch.nn

import tracelab  # noqa: E402
from _contract_runs import train  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")


class Classifier(nn.Module):
    """An LSTM over (batch, time, features) data; `transpose` feeds it (time, batch, features)."""

    def __init__(self, batch_first: bool, transpose: bool = False):
        super().__init__()
        torch.manual_seed(0)
        self.lstm = nn.LSTM(8, 16, batch_first=batch_first)
        self.head = nn.Linear(16, 3)
        self.transpose = transpose

    def forward(self, x):
        if self.transpose:
            out, _ = self.lstm(x.transpose(0, 1))
            return self.head(out[-1])
        out, _ = self.lstm(x)
        return self.head(out[:, -1])  # the last time step when the batch comes first


def _sequences(n=1024, steps=12):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, steps, 8, generator=g)
    return x, (x[:, :, 0].sum(1) > 0).long() + (x[:, :, 1].sum(1) > 2).long()


def _findings(path):
    diagnosis = tracelab.analyze(path)
    assert not diagnosis.errors, diagnosis.errors
    return [f for f in diagnosis.findings if f.rule == "wrong-batch-axis"]


def test_batch_first_data_given_to_a_sequence_first_lstm_fires(tmp_path):
    ce = nn.CrossEntropyLoss()
    [f] = _findings(train(tmp_path / "r", Classifier(False), _sequences(), ce, steps=30))
    assert f.code == "TL611" and f.severity.value == "error" and f.subject == "lstm"
    assert "(batch_first=False) read inputs of shape [32, 12, 8] while the batch held 32" \
        in f.message and "32 time steps of 12 sequences" in f.message
    assert "batch_first=True" in f.fix


def test_sequence_first_data_given_to_a_batch_first_lstm_fires(tmp_path):
    ce = nn.CrossEntropyLoss()
    [f] = _findings(train(tmp_path / "r", Classifier(True, transpose=True), _sequences(), ce,
                          steps=30))
    assert "(batch_first=True) read inputs of shape [12, 32, 8]" in f.message


@pytest.mark.parametrize("batch_first,transpose", [(True, False), (False, True)])
def test_layouts_that_match_stay_quiet(tmp_path, batch_first, transpose):
    ce = nn.CrossEntropyLoss()
    path = train(tmp_path / "r", Classifier(batch_first, transpose), _sequences(), ce, steps=30)
    assert _findings(path) == []


def test_the_input_shapes_of_odd_calls_are_left_out():
    from tracelab.analyzers._batches import input_shapes
    odd = [{"inputs": [[32, 12, 8]]}, {"inputs": 5}, {"inputs": []}, {"inputs": "x"},
           {"inputs": ["32x12"]}, {"inputs": [[32, "12", 8]]}, {"inputs": [[True, 2, 3]]},
           {"inputs": {"0": [1, 2, 3]}}, {}, 7, "call", None, {"inputs": [[], [4]]},
           {"inputs": [[12, 32, 8], [1]]}]
    assert input_shapes(odd) == [[32, 12, 8], [], [12, 32, 8]]
    assert [input_shapes(c) for c in (None, 3, "abc", {"inputs": [[1, 2]]}, [])] == [[]] * 5


def test_odd_recorded_shapes_leave_the_rule_quiet_without_raising(tmp_path):
    import json
    ce = nn.CrossEntropyLoss()
    path = train(tmp_path / "r", Classifier(False), _sequences(), ce, steps=30)
    meta = json.loads((path / "meta.json").read_text())
    for odd in ({"lstm": [{"inputs": 32}, {"inputs": [[]]}, "x"]}, {"lstm": "x"}, ["lstm"], 5):
        meta["module_shapes"] = odd
        (path / "meta.json").write_text(json.dumps(meta))
        assert _findings(path) == []


class Tagger(nn.Module):
    """Embedding + sequence-first LSTM + a per-token head: a token model whose loss reads every
    token (flattened 1-D targets, whose length is no batch size)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.embedding = nn.Embedding(12, 16)
        self.rnn = nn.LSTM(16, 32)
        self.head = nn.Linear(32, 12)

    def forward(self, tokens):
        out, _ = self.rnn(self.embedding(tokens))
        return self.head(out)


def _train_tagger(path, batch_first_data: bool, config: dict | None, steps: int = 24,
                  batch: int = 16, length: int = 6):
    """Tag each token with its successor mod 12 on (length, batch) token tables, or on
    (batch, length) ones when `batch_first_data` (the layout the LSTM does not expect)."""
    g = torch.Generator().manual_seed(0)
    model, ce = Tagger(), nn.CrossEntropyLoss()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    with tracelab.Recorder(str(path), model=model, optimizer=opt, loss_fn=ce,
                           config=config, input_every=4) as rec:
        for _ in range(steps):
            x = torch.randint(0, 12, (batch, length) if batch_first_data else (length, batch),
                              generator=g)
            y = (x + 1) % 12
            opt.zero_grad()
            out = model(x).reshape(-1, 12)
            loss = ce(out, y.reshape(-1))
            loss.backward()
            opt.step()
            rec.step(loss=loss, inputs=x, targets=y.reshape(-1), outputs=out)
    return path


def test_batch_first_token_tables_fire_when_the_config_and_the_inputs_agree_on_the_batch(
        tmp_path):
    # The flattened targets (96 tokens) name no batch; the config's batch_size and the
    # inputs' rows (16 each) do, and the LSTM runs over those 16 samples as time.
    [f] = _findings(_train_tagger(tmp_path / "r", True, {"batch_size": 16}))
    assert f.subject == "rnn" and "read inputs of shape [16, 6, 16] while the batch held 16" \
        in f.message and f.evidence["batch_from"] == ["config batch_size", "the inputs' rows"]


def test_sequence_first_token_tables_stay_quiet(tmp_path):
    # (6, 16) tables: the inputs' rows (6) are the sequence length, and the LSTM reads them as
    # such; the config's batch_size (16) sits on its batch axis.
    assert _findings(_train_tagger(tmp_path / "r", False, {"batch_size": 16})) == []


@pytest.mark.parametrize("batch_first_data", [True, False])
def test_the_inputs_rows_alone_name_no_batch(tmp_path, batch_first_data):
    # Without a config, (batch, length) and (length, batch) tables of fixed sizes look alike:
    # the rows may be either axis, and the flattened targets contradict both.
    path = _train_tagger(tmp_path / "r", batch_first_data, None)
    assert _findings(path) == []
