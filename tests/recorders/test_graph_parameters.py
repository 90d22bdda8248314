"""The unregistered-parameter check (recorders/graph_parameters.py) on real tiny trainings:
its values against plain torch, the memory it takes, what it keeps alive."""
import gc
import json
import weakref

import pytest

torch = pytest.importorskip("torch", reason="the tiny trainings need torch (extra 'torch')")

import tracelab  # noqa: E402
from tracelab.recorders import graph_parameters as gp  # noqa: E402
from tracelab.recorders.graph_parameters import UnregisteredParameters  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")


class _Side(torch.nn.Module):
    """A head registered, a side parameter kept in a plain list (not the model's)."""

    def __init__(self, side: torch.Tensor):
        super().__init__()
        self.head = torch.nn.Linear(4, 1)
        self.side = [torch.nn.Parameter(side)]

    def forward(self, x):
        w = self.side[0]
        w = torch.view_as_real(w).sum(-1) if w.is_complex() else w
        return self.head(x @ w[:4, :4]).pow(2).mean()


def _first_step(side: torch.Tensor):
    torch.manual_seed(0)
    m = _Side(side)
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    loss = m(torch.randn(8, 4))
    loss.backward()
    opt.step()
    return m, opt, loss


@pytest.mark.parametrize("side", [
    lambda: torch.randn(6, 5),                       # small
    lambda: torch.randn(5, 6).t(),                   # not contiguous
    lambda: torch.randn(1100, 1000),                 # larger than a piece
    lambda: torch.randn(3000, 700).t(),              # larger, rows of several pieces' views
    lambda: torch.randn(1, 4, 2_200_000)[0].t(),     # a row larger than a piece, strided
    lambda: torch.randn(6, 6, dtype=torch.complex64),  # complex: magnitudes
], ids=["small", "transposed", "large", "large-transposed", "strided-rows", "complex"])
def test_the_summary_matches_plain_torch(side):
    m, opt, loss = _first_step(side())
    check = UnregisteredParameters()
    [summary] = check.check(loss, m, [opt])
    p = m.side[0]
    assert summary["shape"] == list(p.shape) and summary["in_optimizer"] is False
    grad = p.grad.to(torch.complex128).abs() if p.is_complex() else p.grad.double()
    assert summary["grad_norm"] == pytest.approx(float(grad.norm()), rel=1e-12)
    real = torch.view_as_real(p.detach()) if p.is_complex() else p.detach()
    l1, squares = gp._fingerprint(p)
    assert l1 == pytest.approx(float(real.double().abs().sum()), rel=1e-12)
    assert squares == pytest.approx(float(real.double().square().sum()), rel=1e-12)
    assert check.at_close()[0]["changed"] is False
    with torch.no_grad():
        p.add_(1e-3)
    assert check.at_close()[0]["changed"] is True


def test_a_large_parameter_is_summarized_without_a_float64_copy():
    """A float64 copy of a parameter (or of its grad) doubles its memory at the first step;
    the check reads it a piece at a time."""
    m, opt, loss = _first_step(torch.randn(4096, 2048))  # 32 MB of float32
    size = m.side[0].numel() * 4
    check = UnregisteredParameters()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU],
                                profile_memory=True) as prof:
        assert check.check(loss, m, [opt])
        check.at_close()
    largest = max(e.cpu_memory_usage for e in prof.events())
    assert 0 < largest < size / 2, largest


def test_a_parameter_made_afresh_each_step_is_not_kept_alive(tmp_path):
    """An adversarial perturbation made as an nn.Parameter each step (FreeLB / PGD style) is a
    leaf of the first loss's graph: the check keeps a weak reference and its summary, so the
    perturbation is freed with its step; at close whether it changed is unknown (null), and
    param-not-in-optimizer does not name it."""
    torch.manual_seed(0)
    m = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(m.parameters(), lr=1e-2)
    refs = []
    with tracelab.Recorder(str(tmp_path / "r"), model=m, optimizer=opt) as rec:
        for _ in range(4):
            x = torch.randn(64, 8)
            delta = torch.nn.Parameter(torch.zeros_like(x))
            refs.append(weakref.ref(delta))
            opt.zero_grad()
            loss = m(x + delta).pow(2).mean()
            loss.backward()
            opt.step()
            rec.step(loss=loss)
            del delta, loss
        gc.collect()
        assert [r() is not None for r in refs] == [False] * 4
    [summary] = json.loads((tmp_path / "r" / "meta.json").read_text())["unregistered_parameters"]
    assert summary["shape"] == [64, 8] and summary["in_optimizer"] is False
    assert summary["grad_norm"] > 0 and summary["changed"] is None
    diagnosis = tracelab.analyze(str(tmp_path / "r"))
    assert not diagnosis.errors
    assert [f for f in diagnosis.findings if f.rule == "param-not-in-optimizer"] == []
