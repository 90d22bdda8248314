"""update-ratio on a loop that steps its optimizer several times per recorded step (an inner
loop before Recorder.step(), as spinningup's value function takes 80 Adam steps per epoch): the
recorded update sums those steps, and the high side judges one update's size, the recorded one
divided by the step's backward passes, each of which found the grad reset and was followed by
the weights moving. Targets are noise, so the loss never shows that large steps work."""
import pytest

from tracelab.analyzers.update_ratio import update_ratio
from tracelab.core.run import open_run
from tracelab.core.schema import UPDATE, WEIGHT

torch = pytest.importorskip("torch", reason="the recorder needs torch (extra 'torch')")
nn = torch.nn

pytestmark = pytest.mark.usefixtures("one_thread")

from _contract_runs import inner_loop as _inner_loop  # noqa: E402


def _large(findings):
    return [f for f in findings if f.message.startswith("Updates are too large")]


def test_an_inner_loop_s_summed_updates_are_not_one_large_update(tmp_path):
    run = _inner_loop(tmp_path / "inner", lr=3e-3)
    recorded = (run.stat(UPDATE, "norm") / run.stat(WEIGHT, "norm")).median()
    assert recorded["0.weight"] > 0.1  # one update this large would be named
    assert _large(update_ratio(run)) == []


def test_inner_loop_steps_each_too_large_are_still_named(tmp_path):
    run = _inner_loop(tmp_path / "large", lr=3.0, inner=3)
    [f] = _large(update_ratio(run))
    recorded = (run.stat(UPDATE, "norm") / run.stat(WEIGHT, "norm")).median()
    # Named at one update's size: the recorded ratio spans the three steps.
    assert 0.1 < f.evidence["worst_ratio"] < recorded[f.subject.split()[0]] / 2


def test_a_critic_s_inner_loop_is_counted_per_optimizer(tmp_path):
    """An actor stepped once and a critic stepped 20 times per recorded step, each with its
    own Adam (spinningup's VPG): the critic's count divides the critic's updates only."""
    import tracelab
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    actor, critic = nn.Linear(8, 4), nn.Sequential(nn.Linear(8, 32), nn.Tanh(),
                                                   nn.Linear(32, 1))
    model = nn.ModuleDict({"pi": actor, "v": critic})
    pi_opt = torch.optim.Adam(actor.parameters(), lr=1e-3)
    v_opt = torch.optim.Adam(critic.parameters(), lr=3e-3)
    with tracelab.Recorder(str(tmp_path / "ac"), model=model,
                           optimizer={"pi": pi_opt, "v": v_opt}, every=1,
                           weight_every=1) as rec:
        for _ in range(30):
            x, y = torch.randn(64, 8, generator=g), torch.randn(64, generator=g)
            pi_opt.zero_grad()
            loss = -(torch.log_softmax(actor(x), -1)[:, 0] * y).mean()
            loss.backward()
            pi_opt.step()
            for _ in range(20):
                v_opt.zero_grad()
                ((critic(x)[:, 0] - y) ** 2).mean().backward()
                v_opt.step()
            rec.step(loss=loss)
    run = open_run(tmp_path / "ac")
    assert set(run.signal("optimizer/steps/v")) == {20.0}
    assert run.signal("optimizer/steps/pi").empty
    recorded = (run.stat(UPDATE, "norm") / run.stat(WEIGHT, "norm")).median()
    assert recorded["v.0.weight"] > 0.1
    assert _large(update_ratio(run)) == []
