"""frozen-parameters on what never changes yet costs the run nothing: a frozen random draw that
keeps its input's information (an Embedding with no more rows than dimensions, a Linear at
least as wide as its input) with trained layers after it is a random feature map they learn
from, and a head whose output never reaches a falling loss is left unread: info notes. A
bottleneck frozen at random, a frozen output layer and an output layer whose result enters the
loss detached stay warnings."""
import pytest

from tracelab.analyzers._init_draw import keeps_information
from tracelab.analyzers.frozen_parameters import frozen_parameters
from tracelab.core.findings import INFO, WARNING

torch = pytest.importorskip("torch", reason="the tiny trainings need torch (extra 'torch')")
import tracelab  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")


class Bag(torch.nn.Module):
    """Mean of the embeddings of 6 tokens out of `vocab`, then an MLP classifier."""

    def __init__(self, embedding, dim):
        super().__init__()
        self.encoder = embedding
        self.head = torch.nn.Sequential(torch.nn.Linear(dim, 64), torch.nn.ReLU(),
                                        torch.nn.Linear(64, 3))

    def forward(self, ids):
        return self.head(self.encoder(ids).mean(1))


class TwoHeads(torch.nn.Module):
    """A trunk and a classifier; `aux` is computed from the trunk too."""

    def __init__(self):
        super().__init__()
        self.trunk = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU())
        self.head, self.aux = torch.nn.Linear(64, 3), torch.nn.Linear(64, 10)

    def forward(self, x):
        h = self.trunk(x)
        return self.head(h), self.aux(h)


def _batches(steps, vocab=None, seed=0):
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(vocab or 16, 3, generator=g)
    for _ in range(steps):
        if vocab:
            x = torch.randint(vocab, (32, 6), generator=g)
            yield x, w[x].sum(1).argmax(1)
        else:
            x = torch.randn(32, 16, generator=g)
            yield x, (x @ w).argmax(1)


def _train(run_dir, model, *, vocab=None, steps=60):
    opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    with tracelab.Recorder(str(run_dir), model=model, optimizer=opt) as rec:
        for x, y in _batches(steps, vocab):
            logits = model(x)
            loss = torch.nn.functional.cross_entropy(logits, y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            rec.step(loss=loss, outputs=logits, targets=y)
    return tracelab.open_run(str(run_dir))


def _train_heads(run_dir, *, detach_aux, steps=60, last_rows=None):
    """The classifier's loss trains trunk and head; `aux` either never reaches the loss (its
    output dropped) or is the output given to the recorder and enters the loss detached.
    `last_rows`: the last batch holds only that many rows (an epoch's remainder)."""
    torch.manual_seed(0)
    model = TwoHeads()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    with tracelab.Recorder(str(run_dir), model=model, optimizer=opt) as rec:
        for i, (x, y) in enumerate(_batches(steps)):
            if last_rows and i == steps - 1:
                x, y = x[:last_rows], y[:last_rows]
            logits, aux = model(x)
            loss = torch.nn.functional.cross_entropy(logits, y)
            if detach_aux:  # a value head detached by mistake: its own loss trains nothing
                loss = loss + (aux.detach() ** 2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            rec.step(loss=loss, outputs=aux if detach_aux else logits, targets=y)
    return tracelab.open_run(str(run_dir))


def _by_severity(run, subject):
    return [f.severity for f in frozen_parameters(run) if f.subject == subject]


def test_a_frozen_random_embedding_wider_than_its_vocabulary_is_a_note(tmp_path):
    torch.manual_seed(0)
    embedding = torch.nn.Embedding(30, 64).requires_grad_(False)  # 30 rows in 64 dimensions
    run = _train(tmp_path / "r", Bag(embedding, 64), vocab=30)
    [f] = [f for f in frozen_parameters(run) if f.subject == "encoder"]
    assert f.severity is INFO and f.evidence["keeps_information"] is True
    assert "feature map" in f.message


def test_a_frozen_random_embedding_narrower_than_its_vocabulary_stays_a_warning(tmp_path):
    torch.manual_seed(0)
    embedding = torch.nn.Embedding(100, 16).requires_grad_(False)  # 100 rows in 16 dimensions
    run = _train(tmp_path / "r", Bag(embedding, 16), vocab=100)
    assert _by_severity(run, "encoder") == [WARNING]


def test_a_wide_first_layer_frozen_at_random_is_a_note_and_the_output_layer_is_not(tmp_path):
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(16, 128), torch.nn.ReLU(),
                              torch.nn.Linear(128, 3))
    net[0].requires_grad_(False)
    assert _by_severity(_train(tmp_path / "first", net), "0") == [INFO]
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(),
                              torch.nn.Linear(64, 64))  # 64 "classes", 3 used
    net[2].requires_grad_(False)  # wide, yet nothing learns after it
    assert _by_severity(_train(tmp_path / "last", net), "2") == [WARNING]


def test_a_head_computed_but_left_out_of_a_falling_loss_is_a_note(tmp_path):
    [f] = [f for f in frozen_parameters(_train_heads(tmp_path / "r", detach_aux=False))
           if f.subject == "aux"]
    assert f.severity is INFO and "left unread" in f.message


def test_an_output_layer_whose_result_enters_the_loss_detached_stays_a_warning(tmp_path):
    [f] = [f for f in frozen_parameters(_train_heads(tmp_path / "r", detach_aux=True))
           if f.subject == "aux"]
    assert f.severity is WARNING and "None" in f.message


def test_an_output_layer_read_detached_in_a_smaller_last_batch_stays_a_warning(tmp_path):
    """meta.json keeps the outputs' latest shape, [20, 10] here, and the forward pass's
    recorded shape is of the first recording step, [32, 10]: the output layer is still read."""
    run = _train_heads(tmp_path / "r", detach_aux=True, steps=51, last_rows=20)  # step 50 profiled
    assert [o.get("shape") for o in run.meta["outputs"].values()] == [[20, 10]]
    [f] = [f for f in frozen_parameters(run) if f.subject == "aux"]
    assert f.severity is WARNING and "None" in f.message


@pytest.mark.parametrize("kind, shape, keeps", [
    ("Embedding", [50, 64], True), ("Embedding", [50, 32], False),
    ("Linear", [128, 16], True), ("Linear", [3, 64], False), ("Linear", [64], True),
    ("NonDynamicallyQuantizableLinear", [64, 64], True),
    ("Conv2d", [16, 1, 3, 3], True), ("Conv2d", [16, 8, 3, 3], False),
    ("LSTM", [256, 64], False), ("Linear", None, False), ("Linear", ["a", 2], False)])
def test_what_keeps_its_inputs_information(kind, shape, keeps):
    assert keeps_information(kind, shape) is keeps
