"""frozen-parameters on parameters with requires_grad=False: a layer frozen while it still
holds its random initialization is named (Embedding.from_pretrained's freeze=True on random
weights, requires_grad=False on the wrong layers); pretrained weights frozen on purpose and
frozen copies that change (an EMA teacher) stay quiet."""
import copy

import pytest
from dynamics_frames import make_run, model_meta, tensor_rows

from tracelab.analyzers.frozen_parameters import frozen_parameters

torch = pytest.importorskip("torch", reason="the tiny trainings need torch (extra 'torch')")
import tracelab  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")


class Bag(torch.nn.Module):
    """Mean of the embeddings of 6 tokens out of 100, then a linear classifier."""

    def __init__(self, embedding):
        super().__init__()
        self.encoder, self.head = embedding, torch.nn.Linear(16, 3)

    def forward(self, ids):
        return self.head(self.encoder(ids).mean(1))


def _mlp():
    return torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 64),
                               torch.nn.ReLU(), torch.nn.Linear(64, 3))


def _batches(steps, tokens=False, seed=0):
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(100 if tokens else 16, 3, generator=g)
    for _ in range(steps):
        if tokens:
            x = torch.randint(100, (32, 6), generator=g)
            yield x, w[x].sum(1).argmax(1)
        else:
            x = torch.randn(32, 16, generator=g)
            yield x, (x @ w).argmax(1)


def _train(run_dir, model, *, tokens=False, steps=40, teacher=None, record=True):
    opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    rec = tracelab.Recorder(str(run_dir), model=model, optimizer=opt) if record else None
    for x, y in _batches(steps, tokens):
        student = model.student if teacher else model
        loss = torch.nn.functional.cross_entropy(student(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if teacher:  # the mean teacher: an EMA of the student, frozen to the optimizer
            with torch.no_grad():
                for t, s in zip(model.teacher.parameters(), model.student.parameters()):
                    t.mul_(0.9).add_(s, alpha=0.1)
        if rec:
            rec.step(loss=loss, targets=y)
    if rec:
        rec.close()
        return tracelab.open_run(str(run_dir))


def _at_init(run):
    return [f for f in frozen_parameters(run) if f.evidence.get("cause") == "frozen_at_init"]


def test_a_random_embedding_frozen_by_from_pretrained_is_named(tmp_path):
    torch.manual_seed(0)
    weights = torch.empty(100, 16).uniform_(-0.1, 0.1)
    [f] = _at_init(_train(tmp_path / "r", Bag(torch.nn.Embedding.from_pretrained(weights)),
                          tokens=True))
    assert f.subject == "encoder" and f.severity.value == "warning"
    assert "uniform within +-0.1" in f.message and "freeze=False" in f.fix


def test_a_default_embedding_frozen_at_its_normal_init_is_named(tmp_path):
    torch.manual_seed(0)
    embedding = torch.nn.Embedding(100, 16).requires_grad_(False)
    [f] = _at_init(_train(tmp_path / "r", Bag(embedding), tokens=True))
    assert "normal of std 1" in f.message


def test_every_layer_but_the_first_frozen_at_init_is_named(tmp_path):
    torch.manual_seed(0)
    net = _mlp()
    for name, p in net.named_parameters():
        p.requires_grad_(name.startswith("0."))
    [f] = _at_init(_train(tmp_path / "r", net))
    assert f.evidence["subjects"] == ["2"]  # the head's 192 weights are too few to tell
    assert f.evidence["trained_parameters"] == 2


def test_a_pretrained_backbone_frozen_on_purpose_stays_quiet(tmp_path):
    torch.manual_seed(0)
    net = _mlp()
    _train(None, net, steps=300, record=False)  # pretraining
    for p in net[:4].parameters():
        p.requires_grad_(False)
    net[4] = torch.nn.Linear(64, 3)  # a new head, fine-tuned
    assert _at_init(_train(tmp_path / "r", net)) == []


def test_an_ema_teacher_frozen_to_the_optimizer_stays_quiet(tmp_path):
    torch.manual_seed(0)
    pair = torch.nn.Module()
    pair.student = _mlp()
    pair.teacher = copy.deepcopy(pair.student).requires_grad_(False)
    run = _train(tmp_path / "r", pair, teacher=True)
    assert "teacher.2.weight" in run.meta["frozen_at_close"]
    assert _at_init(run) == []


def test_a_run_without_the_frozen_values_at_close_is_not_judged():
    values = {"numel": 4096, "mean": 0.0, "std": 0.0722, "min": -0.125, "max": 0.125,
              "abs_mean": 0.0625}
    meta = model_meta([("a.weight", (64, 64)), ("b.weight", (64, 64), False)])
    meta["model"]["parameters"][1]["values"] = values
    norms = {"a.weight": {"norm": [1.0, 1.1, 1.2, 1.3]}}
    run = make_run(meta, tensors=[tensor_rows("weight", norms)])
    assert frozen_parameters(run) == []
    meta["frozen_at_close"] = {"b.weight": values}
    assert [f.subject for f in frozen_parameters(make_run(
        meta, tensors=[tensor_rows("weight", norms)]))] == ["b"]


def _normal_init(std=0.02):
    """An encoder narrowing 64 -> 32 and a head, given BERT's _init_weights: Linear weights
    N(0, std), biases zero."""
    net = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 32),
                              torch.nn.ReLU(), torch.nn.Linear(32, 3))
    for m in net.modules():
        if isinstance(m, torch.nn.Linear):
            torch.nn.init.normal_(m.weight, 0.0, std)
            torch.nn.init.zeros_(m.bias)
    return net


def test_an_encoder_frozen_at_a_small_normal_init_with_zero_biases_is_named(tmp_path):
    # "freeze BERT, train the classifier" on a model whose weights were never loaded: the
    # encoder still holds N(0, 0.02) weights and exactly zero biases.
    torch.manual_seed(0)
    net = _normal_init()
    for p in net[:4].parameters():
        p.requires_grad_(False)
    [f] = [f for f in _at_init(_train(tmp_path / "r", net)) if f.severity.value == "warning"]
    assert "2.weight" in f.message and "normal of std 0.02" in f.message


def test_a_pretrained_encoder_from_a_small_normal_init_stays_quiet(tmp_path):
    # The same init, pretrained before freezing: its biases left zero, so nothing is said.
    torch.manual_seed(0)
    net = _normal_init()
    _train(None, net, steps=300, record=False)  # pretraining
    for p in net[:4].parameters():
        p.requires_grad_(False)
    net[4] = torch.nn.Linear(32, 3)  # a new head, fine-tuned
    assert _at_init(_train(tmp_path / "r", net)) == []


def test_a_small_normal_init_without_a_zero_bias_is_not_judged(tmp_path):
    torch.manual_seed(0)
    net = _normal_init()
    for m in net[:4]:
        if isinstance(m, torch.nn.Linear):
            torch.nn.init.uniform_(m.bias, -0.1, 0.1)
        m.requires_grad_(False)
    assert _at_init(_train(tmp_path / "r", net)) == []


def _rnd(run_dir, gain):
    """Random Network Distillation (CleanRL's layer_init: orthogonal weights, zero biases): a
    target network frozen on purpose and a predictor regressing onto its output, the targets."""
    def layer(i, o):
        lin = torch.nn.Linear(i, o)
        torch.nn.init.orthogonal_(lin.weight, gain)
        torch.nn.init.constant_(lin.bias, 0.0)
        return lin

    torch.manual_seed(0)
    model = torch.nn.ModuleDict({
        "target": torch.nn.Sequential(layer(16, 64), torch.nn.ReLU(), layer(64, 64)),
        "predictor": torch.nn.Sequential(layer(16, 64), torch.nn.ReLU(), layer(64, 64))})
    model["target"].requires_grad_(False)
    opt = torch.optim.Adam(model["predictor"].parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(0)
    with tracelab.Recorder(str(run_dir), model=model, optimizer=opt,
                           loss_fn=torch.nn.MSELoss()) as rec:
        for _ in range(60):
            x = torch.randn(64, 16, generator=g)
            pred, target = model["predictor"](x), model["target"](x)
            loss = torch.nn.functional.mse_loss(pred, target)
            opt.zero_grad()
            loss.backward()
            opt.step()
            rec.step(loss=loss, inputs=x, targets=target, outputs=pred)
    return tracelab.open_run(str(run_dir))


@pytest.mark.parametrize("gain", [2 ** 0.5, 1.0])
def test_a_random_target_network_frozen_on_purpose_stays_quiet(tmp_path, gain):
    # Its weights look normal and its biases are zero, but no named scale fits gain sqrt(2)
    # and, whatever the gain, its output is the recorded targets: a target network.
    assert _at_init(_rnd(tmp_path / "r", gain)) == []


def test_a_bottleneck_frozen_at_lecun_normal_with_zero_biases_is_named(tmp_path):
    # N(0, 1/fan_in) weights and zero biases: a named init scale, not an output's targets.
    torch.manual_seed(0)
    net = _normal_init()
    for m in net[:4]:
        if isinstance(m, torch.nn.Linear):
            torch.nn.init.normal_(m.weight, 0.0, m.in_features ** -0.5)
        m.requires_grad_(False)
    [f] = [f for f in _at_init(_train(tmp_path / "r", net)) if f.severity.value == "warning"]
    assert "2.weight" in f.message
