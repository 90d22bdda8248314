"""several_players: two or more optimizers are a game's players only where each steps on its
own loss (backward passes between steps: two or more), not where several optimizers step on
one loss (one pass per step: Muon with AdamW, an encoder's and a decoder's optimizer)."""
import pytest

torch = pytest.importorskip("torch", reason="the recorder needs torch (extra 'torch')")
from torch import nn  # noqa: E402

import tracelab  # noqa: E402
from _contract_runs import blobs  # noqa: E402
from tracelab.analyzers._learning_rate import adversarial_game, several_players  # noqa: E402
from tracelab.analyzers.vanishing_gradients import vanishing_gradients  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")


def _split_stack(path, losses: str, steps: int = 40):
    """A deep sigmoid stack whose first three layers an encoder's Adam holds and the rest a
    decoder's. `losses` "one": one backward, then both steps; "two": each optimizer steps
    after its own backward (the second one on a fresh forward), as a game's players do."""
    torch.manual_seed(0)
    layers, width = [], 16
    for _ in range(6):
        layers += [nn.Linear(width, 32), nn.Sigmoid()]
        width = 32
    model = nn.Sequential(*layers, nn.Linear(32, 4))
    x, y = blobs(512)
    enc = [p for n, p in model.named_parameters() if int(n.split(".")[0]) < 6]
    dec = [p for n, p in model.named_parameters() if int(n.split(".")[0]) >= 6]
    opts = {"encoder": torch.optim.Adam(enc, lr=1e-3), "decoder": torch.optim.Adam(dec, lr=1e-3)}
    with tracelab.Recorder(str(path), model=model, optimizer=opts) as rec:
        for step in range(steps):
            i = (step * 32) % (len(x) - 32)
            xb, yb = x[i:i + 32], y[i:i + 32]
            for o in opts.values():
                o.zero_grad()
            loss = nn.functional.cross_entropy(model(xb), yb)
            loss.backward()
            if losses == "one":
                for o in opts.values():
                    o.step()
            else:
                opts["encoder"].step()
                opts["decoder"].zero_grad()
                nn.functional.cross_entropy(model(xb), yb).backward()
                opts["decoder"].step()
            rec.step(loss=loss, inputs=xb, targets=yb)
    return tracelab.open_run(path)


def test_two_optimizers_on_one_loss_are_no_game_and_one_stack(tmp_path):
    run = _split_stack(tmp_path / "one", "one")
    assert not several_players(run) and not adversarial_game(run)
    [f] = vanishing_gradients(run)
    # judged as one stack: the chain reaches down into the encoder's layers
    assert any(int(n.split(".")[0]) < 6 for n in f.evidence["chain"])
    assert any(int(n.split(".")[0]) >= 6 for n in f.evidence["chain"])


def test_two_optimizers_each_on_its_own_backward_are_players(tmp_path):
    run = _split_stack(tmp_path / "two", "two")
    assert several_players(run)
    for f in vanishing_gradients(run):  # split by optimizer: no chain across the two
        chain = f.evidence.get("chain") or []
        assert len({int(n.split(".")[0]) < 6 for n in chain}) <= 1
