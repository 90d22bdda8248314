"""target-problems' contract that the targets depend on the inputs, on real tiny trainings: a
model the optimizer moves never beats the best constant prediction (labels shuffled apart from
their inputs), or memorizes train while a matching validation split stays at that level."""
import numpy as np
import pandas as pd
import pytest
from dynamics_frames import scalar_rows

from tracelab.analyzers.target_problems import target_problems
from tracelab.core.findings import Finding
from tracelab.core.run import Run, open_run

torch = pytest.importorskip("torch")
nn = torch.nn

SUBJECT = "targets vs inputs"


def _data(n: int, seed: int, *, classes: int = 4, features: int = 16, regression=False):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, features, generator=g)
    if regression:
        return x, x @ torch.randn(features, generator=g) + 0.1 * torch.randn(n, generator=g)
    centres = torch.randn(classes, features, generator=torch.Generator().manual_seed(99)) * 2
    y = torch.randint(0, classes, (n,), generator=g)
    return centres[y] + x, y


def _train(path, *, shuffle: bool, n: int = 4096, steps: int = 150, lr: float = 1e-2,
           regression: bool = False, val_every: int = 0, val_rows: int = 256,
           loss_fn=None, freeze: bool = False, width: int = 32, epochs_over: int = 0,
           batchnorm: bool = False, eval_mode: bool = False, batch: int = 32,
           accuracy: float = 0.0, perm_seed: int = 2):
    """An MLP trained with Adam; `shuffle`: its train targets permuted apart from the inputs;
    `accuracy`: log the validation accuracy times that (1: a fraction, 100: percent);
    `epochs_over`: train on only that many rows, over and over (room to memorize);
    `batchnorm`: a BatchNorm1d after its hidden layer; `eval_mode`: every step in eval mode."""
    torch.manual_seed(0)
    x, y = _data(n + val_rows, 1, regression=regression)
    x, y, xv, yv = x[:n], y[:n], x[n:], y[n:]
    if shuffle:
        y = y[torch.randperm(n, generator=torch.Generator().manual_seed(perm_seed))]
    rows = epochs_over or n
    model = nn.Sequential(nn.Linear(16, width), *([nn.BatchNorm1d(width)] if batchnorm else []),
                          nn.ReLU(), nn.Linear(width, 1 if regression else 4))
    model.train(not eval_mode)
    if freeze:
        model[0].weight.requires_grad_(False)
    loss_fn = loss_fn or (nn.MSELoss() if regression else nn.CrossEntropyLoss())
    out_of = (lambda o: o[:, 0]) if regression else (lambda o: o)
    opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=lr)
    import tracelab
    with tracelab.Recorder(str(path), model=model, optimizer=opt, loss_fn=loss_fn) as rec:
        for step in range(steps):
            i = (step * batch) % (rows - batch + 1)
            xb, yb = x[i:i + batch], y[i:i + batch]
            opt.zero_grad()
            out = model(xb)
            loss = loss_fn(out_of(out), yb)
            loss.backward()
            opt.step()
            rec.step(loss=loss, inputs=xb, targets=yb, outputs=out_of(out))
            if val_every and (step + 1) % val_every == 0:
                model.eval()
                with torch.no_grad():
                    out = out_of(model(xv))
                    val = loss_fn(out, yv)
                metrics = {"loss": val}
                if accuracy:
                    metrics["acc"] = accuracy * (out.argmax(1) == yv).float().mean().item()
                rec.log("val", metrics=metrics, inputs=xv, targets=yv)
                model.train(not eval_mode)
    return open_run(path)


def _found(run: Run) -> list[Finding]:
    return [f for f in target_problems(run) if f.subject == SUBJECT]


def test_shuffled_labels_keep_a_moving_model_at_the_constant_prediction(tmp_path):
    [f] = _found(_train(tmp_path / "r", shuffle=True, val_every=30))
    assert f.code == "TL604" and f.severity.value == "error"
    assert abs(f.evidence["train_loss_late"] / f.evidence["constant_loss"] - 1) < 0.05
    # Paired with the constant prediction's loss on the very batches profiled: no better.
    assert 0.95 <= f.evidence["late_loss_to_constant"] <= 1.5
    assert "shuffled apart" in f.message
    assert abs(f.evidence["constant_loss"] - np.log(4)) < 0.05  # 4 balanced classes
    assert "shuffle inputs and targets together" in f.fix


def test_aligned_labels_stay_quiet(tmp_path):
    assert _found(_train(tmp_path / "r", shuffle=False, val_every=30)) == []


def test_shuffled_regression_targets_sit_at_their_variance(tmp_path):
    [f] = _found(_train(tmp_path / "r", shuffle=True, regression=True, steps=300))
    assert "variance" in f.message
    assert _found(_train(tmp_path / "ok", shuffle=False, regression=True, steps=300)) == []


def test_memorized_train_with_validation_at_the_constant_prediction(tmp_path):
    for scale in (1, 100):  # the accuracy as a fraction or in percent
        # (with 4 tight clusters the validation accuracy is a few draws: a permutation
        # whose clusters' majorities happen to match their true class lands above chance)
        run = _train(tmp_path / f"r{scale}", shuffle=True, epochs_over=96, steps=600,
                     width=256, val_every=60, accuracy=scale, perm_seed=4)
        [f] = _found(run)
        assert f.evidence["split"] == "val" and f.evidence["evaluations"] >= 3
        assert "memorizes train" in f.message
        assert f.evidence["val_acc_best"] <= 0.4  # 4 classes: chance is about 0.25
    # The same memorizing model on aligned labels generalizes: quiet.
    assert _found(_train(tmp_path / "ok", shuffle=False, epochs_over=96, steps=600, width=256,
                         val_every=60, accuracy=1)) == []
    # Without a validation accuracy, a validation loss above the constant prediction's is
    # also healthy overfitting's: not judged.
    assert _found(_train(tmp_path / "none", shuffle=True, epochs_over=96, steps=600,
                         width=256, val_every=60, perm_seed=4)) == []


def _overfit(path, accuracy: float):
    """A wide MLP memorizing 96 rows of noisy but learnable blobs (4 classes): its
    validation accuracy is well above chance while its validation loss, from confident wrong
    answers, ends far above the constant prediction's."""
    import tracelab
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    centres = torch.randn(4, 16, generator=g) * 2
    y = torch.randint(0, 4, (600,), generator=g)
    x = centres[y] + torch.randn(600, 16, generator=g) + 6 * torch.randn(600, 16)
    xt, yt, xv, yv = x[:96], y[:96], x[96:], y[96:]
    model = nn.Sequential(nn.Linear(16, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                          nn.Linear(256, 4))
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    loss_fn = nn.CrossEntropyLoss()
    with tracelab.Recorder(str(path), model=model, optimizer=opt, loss_fn=loss_fn,
                           input_every=5) as rec:
        for step in range(400):
            i = (step * 32) % 65
            opt.zero_grad()
            out = model(xt[i:i + 32])
            loss = loss_fn(out, yt[i:i + 32])
            loss.backward()
            opt.step()
            rec.step(loss=loss, inputs=xt[i:i + 32], targets=yt[i:i + 32], outputs=out)
            if (step + 1) % 20 == 0:
                model.eval()
                with torch.no_grad():
                    out = model(xv)
                metrics = {"loss": loss_fn(out, yv)}
                if accuracy:
                    metrics["acc"] = accuracy * (out.argmax(1) == yv).float().mean().item()
                rec.log("val", metrics=metrics, targets=yv, inputs=xv)
                model.train()
    return open_run(path)


@pytest.mark.parametrize("accuracy", [0, 1, 100])
def test_healthy_overfitting_is_not_memorization(tmp_path, accuracy):
    run = _overfit(tmp_path / "r", accuracy)
    val = run.loss("val")
    assert float(val.iloc[-1]) > 2 * np.log(4)  # the validation loss far above the constant's
    assert _found(run) == []


def test_quiet_when_part_of_the_model_is_frozen_or_the_run_is_short(tmp_path):
    assert _found(_train(tmp_path / "frozen", shuffle=True, freeze=True)) == []
    assert _found(_train(tmp_path / "short", shuffle=True, steps=40)) == []


def _deeper(path, *, shuffle: bool, steps: int = 300):
    """A three-layer MLP trained with Adam at 1e-3 on fresh batches of 4 blobs."""
    import tracelab
    torch.manual_seed(0)
    x, y = _data(20000, 1)
    if shuffle:
        y = y[torch.randperm(len(y), generator=torch.Generator().manual_seed(2))]
    model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(),
                          nn.Linear(64, 4))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    with tracelab.Recorder(str(path), model=model, optimizer=opt, loss_fn=loss_fn,
                           input_every=5) as rec:
        for step in range(steps):
            i = step * 64
            opt.zero_grad()
            out = model(x[i:i + 64])
            loss = loss_fn(out, y[i:i + 64])
            loss.backward()
            opt.step()
            rec.step(loss=loss, inputs=x[i:i + 64], targets=y[i:i + 64], outputs=out)
    return open_run(path)


def test_shuffled_labels_are_found_before_every_matrix_travelled_its_own_norm(tmp_path):
    from tracelab.analyzers._dynamics import update_ratios
    run = _deeper(tmp_path / "r", shuffle=True)
    # The first layer moved a fraction of its norm, ample to leave the constant prediction.
    assert 0.1 <= float(update_ratios(run)["0.weight"]) * 300 < 1
    [f] = _found(run)
    assert abs(f.evidence["train_loss_late"] / f.evidence["constant_loss"] - 1) < 0.05
    assert _found(_deeper(tmp_path / "ok", shuffle=False)) == []


def test_quiet_with_a_learning_rate_too_small_to_move_the_weights(tmp_path):
    assert _found(_train(tmp_path / "r", shuffle=True, lr=1e-5)) == []


def test_class_balance_information_explains_nothing():
    """A language model's Zipf targets are information: they claim no loss spike."""
    from tracelab.app.diagnose import diagnose
    steps = 10
    cl = pd.DataFrame([{"step": 10 * i, "split": "train", "target": "target", "label": k,
                        "count": n} for i in range(steps)
                       for k, n in {0: 60, 1: 20, 2: 15, 3: 4, 4: 1}.items()])
    run = Run.from_frames(None, classes=cl, scalars=scalar_rows("loss", np.ones(100)))
    [info] = target_problems(run)
    spike = Finding(rule="loss-spike", code="TL102", severity="warning", subject="loss",
                    steps=(50, 50), message="Train loss jumped.", evidence={"cause": "unknown"})
    _, diagnoses = diagnose(run, [info, spike])
    first = next(d for d in diagnoses if d.worst.value != "info")
    assert first.finding.rule == "loss-spike" and info.severity.value == "info"


def test_label_smoothing_raises_the_constant_prediction_it_is_judged_against(tmp_path):
    smooth = nn.CrossEntropyLoss(label_smoothing=0.2)
    [f] = _found(_train(tmp_path / "r", shuffle=True, loss_fn=smooth))
    assert f.evidence["constant_loss"] > np.log(4) - 0.05  # smoothing keeps it near log(4)
    assert _found(_train(tmp_path / "ok", shuffle=False, loss_fn=smooth)) == []


def test_a_game_of_two_optimizers_is_not_judged(tmp_path):
    """A GAN's discriminator sits at chance by design: with several optimizers, quiet."""
    import tracelab
    torch.manual_seed(0)
    x, y = _data(4096, 1)
    y = y[torch.randperm(4096, generator=torch.Generator().manual_seed(2))]
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
    first = torch.optim.Adam(model[0].parameters(), lr=1e-2)
    second = torch.optim.Adam(model[2].parameters(), lr=1e-2)
    loss_fn = nn.CrossEntropyLoss()
    with tracelab.Recorder(str(tmp_path / "r"), model=model, optimizer=[first, second],
                           loss_fn=loss_fn) as rec:
        for step in range(150):
            xb, yb = x[step * 16:step * 16 + 32], y[step * 16:step * 16 + 32]
            for opt in (first, second):
                opt.zero_grad()
            out = model(xb)
            loss = loss_fn(out, yb)
            loss.backward()
            for opt in (first, second):
                opt.step()
            rec.step(loss=loss, inputs=xb, targets=yb, outputs=out)
    run = open_run(tmp_path / "r")
    assert len(run.meta["optimizers"]) == 2 and _found(run) == []


def test_a_malformed_summary_is_quiet_without_raising(tmp_path):
    from tracelab.core.schema import ARROW_SCHEMAS
    run = _train(tmp_path / "r", shuffle=True)
    frames = {t: getattr(run, t) for t in ARROW_SCHEMAS}
    for bad in ({"model": {"parameters": [None, 3, {"name": "0.weight"}]}},
                {"optimizers": ["a", "b"]}, {"loss_fn": "CrossEntropyLoss"}, {"model": None}):
        assert _found(Run.from_frames({**run.meta, **bad}, **frames)) == []
    assert len(_found(Run.from_frames(run.meta, **frames))) == 1


def test_a_model_trained_in_eval_mode_or_on_tiny_batchnorm_batches_is_not_judged(tmp_path):
    """BatchNorm in eval mode, or normalizing a few rows, keeps a model near the constant
    prediction with learnable targets: train-in-eval-mode and batchnorm-small-batch name it."""
    assert len(_found(_train(tmp_path / "bn", shuffle=True, batchnorm=True))) == 1
    assert _found(_train(tmp_path / "eval", shuffle=True, batchnorm=True, eval_mode=True)) == []
    assert _found(_train(tmp_path / "tiny", shuffle=True, batchnorm=True, batch=4,
                         steps=300)) == []


def test_a_model_trained_in_eval_mode_is_named_before_its_targets(tmp_path):
    import tracelab
    diagnosis = tracelab.analyze(_train(tmp_path / "r", shuffle=False, batchnorm=True,
                                        eval_mode=True, lr=1e-2).path)
    assert diagnosis.diagnoses[0].finding.rule == "train-in-eval-mode"
    assert "target-problems" not in {f.rule for f in diagnosis.findings
                                     if f.subject == SUBJECT}


def _sequences(path, *, shuffle: bool, steps: int = 150, length: int = 4):
    """A per-position classifier over sequences padded with the loss's ignore_index -1 (a
    language model's layout: targets (batch, length), outputs (batch * length, classes));
    `shuffle`: each batch's target rows drawn apart from its input rows."""
    import tracelab
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(3)
    centres = torch.randn(4, 16, generator=torch.Generator().manual_seed(99)) * 2
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
    loss_fn = nn.CrossEntropyLoss(ignore_index=-1)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    with tracelab.Recorder(str(path), model=model, optimizer=opt, loss_fn=loss_fn) as rec:
        for _ in range(steps):
            y = torch.randint(0, 4, (32, length), generator=g)
            x = centres[y] + torch.randn(32, length, 16, generator=g)
            ends = torch.randint(1, length + 1, (32, 1), generator=g)
            y = torch.where(torch.arange(length) < ends, y, -1)  # padding past each end
            if shuffle:
                y = y[torch.randperm(32, generator=g)]
            opt.zero_grad()
            out = model(x).view(-1, 4)
            loss = loss_fn(out, y.view(-1))
            loss.backward()
            opt.step()
            rec.step(loss=loss, inputs=x.view(-1, 16), targets=y, outputs=out)
    return open_run(path)


def test_padding_the_loss_ignores_is_left_out_of_the_constant_prediction(tmp_path):
    [f] = _found(_sequences(tmp_path / "r", shuffle=True))
    assert abs(f.evidence["constant_loss"] - np.log(4)) < 0.05  # 4 classes, -1 left out
    assert _found(_sequences(tmp_path / "ok", shuffle=False)) == []


def test_memorized_regression_whose_validation_never_beats_its_variance(tmp_path):
    # A squared error has no confident wrong answers: a model that learned anything real
    # beats the validation targets' variance at some evaluation. Shuffled targets: train
    # is memorized below its variance while no evaluation beats val's.
    run = _train(tmp_path / "r", shuffle=True, regression=True, epochs_over=96, steps=600,
                 width=256, val_every=60)
    [f] = _found(run)
    assert f.evidence["split"] == "val" and f.evidence["evaluations"] >= 3
    assert f.evidence["val_loss_best"] >= 0.95 * f.evidence["val_constant_loss"]
    assert f.evidence["best_explained"] > 0.05 and "memorizes train" in f.message
    # The same memorizing model on aligned targets beats val's variance: quiet.
    assert _found(_train(tmp_path / "ok", shuffle=False, regression=True, epochs_over=96,
                         steps=600, width=256, val_every=60)) == []


def _sparse_full_batch(path, *, shuffle: bool, n: int = 140, val_rows: int = 300,
                       words: int = 300, classes: int = 5, steps: int = 200,
                       batch: int | None = None):
    """pygcn's recipe without the graph: sparse bag-of-words rows (a few class-dependent
    words each, row-normalized), a small training set of `n` rows read whole at every step
    (full batch) and a fixed validation set evaluated whole, with its accuracy logged;
    `shuffle`: the training rows' labels permuted among themselves. A few nonzero values per
    column make the two sets' ranges and spreads differ by chance alone. `batch`: minibatches
    of that many rows in turn instead of the full batch."""
    import tracelab
    g = np.random.default_rng(100)
    y = g.integers(0, classes, n + val_rows)
    vocab = g.random((classes, words)) < 0.08
    x = (g.random((n + val_rows, words)) < np.where(vocab[y], 0.15, 0.02)).astype(np.float32)
    x /= np.maximum(x.sum(1, keepdims=True), 1)
    x, y = torch.from_numpy(x), torch.from_numpy(y).long()
    xt, yt, xv, yv = x[:n], y[:n].clone(), x[n:], y[n:]
    if shuffle:
        yt = yt[torch.randperm(n, generator=torch.Generator().manual_seed(0))]
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(words, 16), nn.ReLU(), nn.Linear(16, classes),
                          nn.LogSoftmax(dim=1))
    opt = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)
    loss_fn = nn.NLLLoss()
    with tracelab.Recorder(str(path), model=model, optimizer=opt, loss_fn=loss_fn) as rec:
        for step in range(steps):
            rows = slice(None) if batch is None else \
                slice(step * batch % n, step * batch % n + batch)
            opt.zero_grad()
            out = model(xt[rows])
            loss = loss_fn(out, yt[rows])
            loss.backward()
            opt.step()
            rec.step(loss=loss, inputs=xt[rows], targets=yt[rows], outputs=out)
            model.eval()
            with torch.no_grad():
                out = model(xv)
            rec.log("val", metrics={"loss": loss_fn(out, yv),
                                    "acc": (out.argmax(1) == yv).float().mean().item()},
                    inputs=xv, targets=yv, outputs=out)
            model.train()
    return open_run(path)


def test_memorized_small_sparse_set_whose_features_differ_only_by_chance(tmp_path):
    from tracelab.analyzers._inputs import spread_matches
    from tracelab.analyzers._profiles import feature_profiles
    run = _sparse_full_batch(tmp_path / "r", shuffle=True)
    # The few nonzero values per column give the two sets other extremes and spreads: most
    # features fail a fixed tolerance, and only the sampling noise of the rows behind each
    # split (train-val-mismatch's test) says the splits match.
    pairs = [(p.get("train"), p.get("val")) for _, _, p in feature_profiles(run.inputs)]
    same = [spread_matches(a, b, tolerance=0.5) for a, b in pairs
            if a is not None and b is not None and a.std > 0]
    assert np.mean(same) < 0.8
    [f] = _found(run)
    assert "memorizes train" in f.message and f.evidence["split"] == "val"
    assert f.evidence["val_acc_best"] <= f.evidence["chance_acc"] + 0.05


def test_train_val_mismatch_s_silence_stands_for_a_match_in_full_batch_training_only(tmp_path):
    # With minibatches, train-val-mismatch's silence may be one of its abstentions (a
    # chronological split, a changing validation set, token ids), not a match: the fixed
    # tolerance alone decides, and the features that fail it leave the split unjudged.
    from tracelab.analyzers._splits import repeated_rows
    from tracelab.analyzers.target_problems import _splits_match
    run = _sparse_full_batch(tmp_path / "r", shuffle=True, batch=35)
    assert repeated_rows(run.inputs, "train") is None
    assert not _splits_match(run, "val", 0.8)
    assert _found(run) == []


def test_small_sparse_set_with_its_own_labels_overfits_quietly(tmp_path):
    run = _sparse_full_batch(tmp_path / "r", shuffle=False)
    assert _found(run) == []


def _full_batch_at_constant(path, *, shuffle: bool, n: int = 120, steps: int = 50):
    """mlflow's Iris recipe on blobs: one full batch of `n` rows at every step (SGD with
    momentum), 50 steps, so the recorder profiles the batch twice (every 25 steps);
    `shuffle`: the rows permuted apart from their labels."""
    import tracelab
    x, y = _data(n, 1, classes=3, features=4)
    if shuffle:
        x = x[torch.randperm(n, generator=torch.Generator().manual_seed(3))]
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 10), nn.ReLU(), nn.Linear(10, 10), nn.ReLU(),
                          nn.Linear(10, 3))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    with tracelab.Recorder(str(path), model=model, optimizer=opt, loss_fn=loss_fn) as rec:
        for _ in range(steps):
            out = model(x)
            loss = loss_fn(out, y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            rec.step(loss=loss, inputs=x, targets=y, outputs=out)
    return open_run(path)


def test_full_batch_at_the_constant_prediction_pairs_every_step_with_its_batch(tmp_path):
    from tracelab.analyzers._loss_contracts import constant_losses
    run = _full_batch_at_constant(tmp_path / "r", shuffle=True)
    # Two profiled batches only; the same rows at every step make each step's batch theirs.
    assert len(constant_losses(run)) == 2
    [f] = _found(run)
    assert "settles at" in f.message and 0.95 <= f.evidence["late_loss_to_constant"] <= 1.5


def test_full_batch_with_its_own_labels_stays_quiet(tmp_path):
    assert _found(_full_batch_at_constant(tmp_path / "r", shuffle=False)) == []
