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
    del meta["module_input_shapes"]  # the recording steps' shapes would tell all the same
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


class Encoder(nn.Module):
    """Token embedding + a Transformer encoder (layers of no leaf: the layout is the layers'
    and their attention's) + a head on the first token; fed (batch, length) token tables."""

    def __init__(self, batch_first: bool):
        super().__init__()
        torch.manual_seed(0)
        self.embedding = nn.Embedding(12, 16)
        layer = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=batch_first)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.head = nn.Linear(16, 2)

    def forward(self, tokens):
        return self.head(self.encoder(self.embedding(tokens))[:, 0])


def _train_encoder(path, batch_first: bool, batch: int = 16, length: int = 8,
                   val_batch: int | None = None, steps: int = 24, val_after: int = 5,
                   val_chunk: int | None = None):
    """Classify (batch, length) token tables by their first token's parity; with `val_batch`,
    an evaluation of that many samples after steps `val_after` + 6k (5: the hooks of the next,
    recording, step read it; else the first evaluations are read as they begin). With
    `val_chunk`, the model reads them in batches of that many and log() gets the whole
    validation set's targets and outputs, concatenated."""
    g = torch.Generator().manual_seed(0)
    model, ce = Encoder(batch_first), nn.CrossEntropyLoss()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    with tracelab.Recorder(str(path), model=model, optimizer=opt, loss_fn=ce,
                           config={"batch_size": batch}, activation_every=6,
                           input_every=6) as rec:
        for step in range(steps):
            x = torch.randint(0, 12, (batch, length), generator=g)
            y = x[:, 0] % 2
            opt.zero_grad()
            out = model(x)
            loss = ce(out, y)
            loss.backward()
            opt.step()
            rec.step(loss=loss, inputs=x, targets=y, outputs=out)
            if val_batch and step % 6 == val_after:
                model.eval()
                xv = torch.randint(0, 12, (val_batch, length), generator=g)
                with torch.no_grad():
                    ov = torch.cat([model(c) for c in xv.split(val_chunk or val_batch)])
                rec.log("val", metrics={"loss": ce(ov, xv[:, 0] % 2).item()}, inputs=xv,
                        targets=xv[:, 0] % 2, outputs=ov)
                model.train()
    return path


def test_a_transformer_layer_built_sequence_first_and_fed_the_batch_first_fires(tmp_path):
    # The layers are no leaves: their config and input shapes are kept all the same; the
    # finding names the layer, not the attention inside it.
    found = _findings(_train_encoder(tmp_path / "r", False))
    assert sorted(f.subject for f in found) == ["encoder.layers.0", "encoder.layers.1"]
    assert "TransformerEncoderLayer 'encoder.layers.0' (batch_first=False) read inputs of " \
        "shape [16, 8, 16] while the batch held 16" in found[0].message


def test_a_batch_first_transformer_layer_stays_quiet(tmp_path):
    assert _findings(_train_encoder(tmp_path / "r", True, val_batch=12)) == []


@pytest.mark.parametrize("val_after", [5, 2])
def test_a_batch_equal_to_the_length_is_told_by_an_evaluation_of_another_size(tmp_path,
                                                                              val_after):
    # Training batches of 8 sentences of 8 tokens cannot tell the axes apart; the evaluation
    # of 12 sentences, read on a recording step or off them, holds its 12 on the sequence axis.
    [f, _] = _findings(_train_encoder(tmp_path / "r", False, batch=8, val_batch=12,
                                      val_after=val_after))
    assert "read inputs of shape [12, 8, 16] while the batch held 12" in f.message
    assert f.evidence["batch_from"] == ["the 1-D targets of that call's batch"]


def test_a_batch_equal_to_the_length_without_another_size_stays_quiet(tmp_path):
    assert _findings(_train_encoder(tmp_path / "r", False, batch=8)) == []
    assert _findings(_train_encoder(tmp_path / "q", True, batch=8, val_batch=12)) == []
    assert _findings(_train_encoder(tmp_path / "p", True, batch=8, val_batch=12,
                                    val_after=2)) == []


def test_a_whole_validation_set_as_long_as_the_sequence_logged_at_once_stays_quiet(tmp_path):
    # Batches of 12 sentences of 12 tokens cannot tell the axes apart; 12 validation sentences
    # read in batches of 4 ([4, 12, 16], the batch where the layer reads it), their targets
    # and outputs given to log() concatenated: the 12 logged are the set, not that call's
    # batch (the training calls hold another number where it would put the batch).
    path = _train_encoder(tmp_path / "r", True, batch=12, length=12, val_batch=12, val_chunk=4)
    import json
    calls = json.loads((path / "meta.json").read_text())["module_input_shapes"]
    assert {"inputs": [4, 12, 16], "split": "val", "step": 6} in calls["encoder.layers.0"]
    assert _findings(path) == []


def test_runs_without_the_recording_steps_shapes_analyze_as_before(tmp_path):
    import json
    path = _train_encoder(tmp_path / "r", False, batch=8, val_batch=12)
    meta = json.loads((path / "meta.json").read_text())
    assert meta["module_input_shapes"]["encoder.layers.0"][-1]["split"] == "val"
    for odd in ({"encoder.layers.0": [{"inputs": [12, 8, 16], "split": "val"}, 5, "x",
                                      {"inputs": [[12, 8, 16]], "split": "val", "step": 6},
                                      {"inputs": [12, 8], "split": "val", "step": 6}]},
                {"encoder.layers.0": "x"}, ["x"], 3):
        meta["module_input_shapes"] = odd
        (path / "meta.json").write_text(json.dumps(meta))
        assert _findings(path) == []
    del meta["module_input_shapes"]
    (path / "meta.json").write_text(json.dumps(meta))
    assert _findings(path) == []


class NextToken(nn.Module):
    """A sequence-first Transformer language model (pytorch-book's poetry model, shrunk):
    token embedding, nn.TransformerEncoder(batch_first=False), a head over the vocabulary."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.embedding = nn.Embedding(12, 16)
        layer = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.head = nn.Linear(16, 12)

    def forward(self, tokens):
        return self.head(self.encoder(self.embedding(tokens)))


def _train_next_token(path, transpose: bool, batch: int = 16, length: int = 8,
                      steps: int = 24):
    """Predict each token's successor (x + 1 mod 12) on (batch, length) token tables; the
    loop transposes them to (length, batch) when `transpose`, then shifts by one along the
    first axis (input x[:-1], target x[1:]): without the transpose the shift cuts a sample."""
    g = torch.Generator().manual_seed(0)
    model, ce = NextToken(), nn.CrossEntropyLoss()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    with tracelab.Recorder(str(path), model=model, optimizer=opt, loss_fn=ce,
                           config={"batch_size": batch}, activation_every=6,
                           input_every=6) as rec:
        for _ in range(steps):
            start = torch.randint(0, 12, (batch, 1), generator=g)
            data = (start + torch.arange(length)) % 12
            if transpose:
                data = data.transpose(1, 0).contiguous()
            x, y = data[:-1], data[1:]
            opt.zero_grad()
            out = model(x).flatten(0, 1)
            loss = ce(out, y.reshape(-1))
            loss.backward()
            opt.step()
            rec.step(loss=loss, inputs=x, targets=y.reshape(-1), outputs=out)
    return path


def test_a_batch_first_table_shifted_along_its_batch_fires(tmp_path):
    # (16, 8) tables never transposed: x[:-1] leaves 15 samples on the axis the encoder reads
    # as the sequence, and 8 tokens where it reads the batch. 16 is on no axis; the config's
    # 16 and the inputs' 15 rows at every step (no column of 16) tell the shift.
    found = _findings(_train_next_token(tmp_path / "r", transpose=False))
    assert sorted(f.subject for f in found) == ["encoder.layers.0", "encoder.layers.1"]
    assert "read inputs of shape [15, 8, 16] while the batch held 16 samples, 15 after the " \
        "next-token shift" in found[0].message


@pytest.mark.parametrize("batch,length", [(16, 8), (16, 16)])
def test_a_sequence_first_table_shifted_along_its_sequence_stays_quiet(tmp_path, batch,
                                                                       length):
    # Transposed first: [7, 16, 16], the batch where the encoder reads it. A sequence as long
    # as the batch ([15, 16, 16]: rows one fewer than the config's batch size) holds that
    # batch size on its columns, where the encoder reads the batch: no shift cut a sample.
    assert _findings(_train_next_token(tmp_path / "r", True, batch, length)) == []
