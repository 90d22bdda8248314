"""TracelabCallback for transformers' Trainer, on a tiny BERT built from a config (no download)."""
from __future__ import annotations

import sys

import pytest

torch = pytest.importorskip("torch", reason="the recorder needs torch (extra 'torch')")
transformers = pytest.importorskip("transformers", reason="transformers is not installed "
                                                          "(extra 'hf')")
pytest.importorskip("accelerate", reason="the Trainer needs accelerate (extra 'hf')")

import tracelab  # noqa: E402
from tracelab import open_run  # noqa: E402
from tracelab.recorders.hf import TracelabCallback, batch_inputs, model_logits  # noqa: E402

from _equivalence import assert_equivalent  # noqa: E402

VOCAB, LENGTH, STEPS, EVAL_EVERY, BATCH = 50, 12, 30, 10, 16
CADENCE = {"activation_every": 5, "input_every": 5}
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


pytestmark = pytest.mark.usefixtures("one_thread")


class Tokens(torch.utils.data.Dataset):
    """Sequences labelled by whether they hold token 7."""

    def __init__(self, n: int, seed: int):
        g = torch.Generator().manual_seed(seed)
        self.ids = torch.randint(1, VOCAB, (n, LENGTH), generator=g)
        self.labels = (self.ids == 7).any(dim=1).long()

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "attention_mask": torch.ones(LENGTH, dtype=torch.long),
                "labels": self.labels[i]}


def _model():
    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=VOCAB, hidden_size=16, num_hidden_layers=1,
                                     num_attention_heads=2, intermediate_size=32,
                                     max_position_embeddings=LENGTH, num_labels=2)
    return transformers.BertForSequenceClassification(config)


def _args(tmp_path, **extra):
    options = dict(output_dir=str(tmp_path / "trainer"), per_device_train_batch_size=BATCH,
                   per_device_eval_batch_size=32, max_steps=STEPS, learning_rate=1e-3,
                   eval_strategy="steps", eval_steps=EVAL_EVERY, save_strategy="no",
                   report_to=[], use_cpu=True, disable_tqdm=True, dataloader_num_workers=0,
                   logging_strategy="no")
    return transformers.TrainingArguments(**{**options, **extra})


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    for key, value in OFFLINE.items():
        monkeypatch.setenv(key, value)


def _train(tmp_path, run_dir, **extra):
    trainer = transformers.Trainer(model=_model(), args=_args(tmp_path, **extra),
                                   train_dataset=Tokens(320, 1), eval_dataset=Tokens(64, 2),
                                   callbacks=[TracelabCallback(str(run_dir), **CADENCE)])
    trainer.train()
    return trainer


def _plain(run_dir):
    """The same model, data and cadences, recorded by a hand-written loop."""
    model = _model()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    train = torch.utils.data.DataLoader(Tokens(320, 1), batch_size=BATCH, shuffle=True,
                                        generator=torch.Generator().manual_seed(0))
    val = next(iter(torch.utils.data.DataLoader(Tokens(64, 2), batch_size=64)))
    with tracelab.Recorder(str(run_dir), model=model, optimizer=opt, **CADENCE) as rec:
        step = 0
        while step < STEPS:
            for batch in rec.iterate(train):
                opt.zero_grad()
                out = model(**batch)
                out.loss.backward()
                opt.step()
                rec.step(loss=out.loss, inputs=batch_inputs(batch), targets=batch["labels"],
                         outputs=out.logits)
                step += 1
                if step % EVAL_EVERY == 0:
                    model.eval()
                    with torch.no_grad():
                        out = model(**val)
                        rec.log("val", metrics={"loss": out.loss}, inputs=batch_inputs(val),
                                targets=val["labels"], outputs=out.logits)
                    model.train()
                if step == STEPS:
                    break


def test_trainer_run_reads_like_the_plain_recorder(tmp_path):
    _train(tmp_path, tmp_path / "hf")
    _plain(tmp_path / "plain")
    assert_equivalent(tmp_path / "hf", tmp_path / "plain")
    run = open_run(tmp_path / "hf")
    assert run.step_range == (0, STEPS - 1)
    assert run.meta["config"]["learning_rate"] == 1e-3
    assert len(run.scalar("loss", "val")) == STEPS // EVAL_EVERY
    assert sorted(run.inputs["feature"].unique()) == ["attention_mask", "input_ids", "labels"]
    # The loss recorded at each step is the model's own loss on that step's batch.
    assert run.loss().between(0.3, 1.0).all()


def test_accumulated_steps_record_the_loss_the_trainer_optimizes(tmp_path):
    trainer = _train(tmp_path, tmp_path / "acc", gradient_accumulation_steps=2,
                     logging_strategy="steps", logging_steps=1)
    run = open_run(tmp_path / "acc")
    assert run.step_range == (0, STEPS - 1)
    logged = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    assert len(logged) == STEPS
    assert run.loss().to_numpy() == pytest.approx(logged, abs=1e-4)
    grads = run.stat("grad", "norm")
    assert len(grads) == STEPS and (grads.fillna(0).sum(axis=1) > 0).all()


def test_trainer_passes_logits_labels_and_evaluation_activations(tmp_path):
    """What entered the loss at each profiled step, and the first evaluation batch's logits
    and activations, checked against the logits the model returned."""
    model = _model()
    seen = []  # (training, logits) of every model call, in order
    model.register_forward_hook(lambda m, a, out: seen.append((m.training, out.logits.detach())))
    trainer = transformers.Trainer(model=model, args=_args(tmp_path),
                                   train_dataset=Tokens(320, 1), eval_dataset=Tokens(64, 2),
                                   callbacks=[TracelabCallback(str(tmp_path / "run"),
                                                               **CADENCE)])
    trainer.train()
    train = [out for training, out in seen if training]
    evals = [out for training, out in seen if not training]
    run = open_run(tmp_path / "run")
    assert run.meta["outputs"]["train"]["shape"] == [BATCH, 2]
    assert run.meta["outputs"]["train"]["targets_shape"] == [BATCH]
    assert run.meta["outputs"]["val"]["shape"] == [32, 2]  # the first evaluation batch
    signals = run.signals
    for split, step, logits in (("train", 0, train[0]), ("train", 25, train[25]),
                                ("val", 9, evals[0]), ("val", 19, evals[2])):
        rows = signals[(signals.split == split) & (signals.step == step)].set_index("name")
        assert rows.loc["outputs/numel", "value"] == logits.numel()
        assert rows.loc["outputs/min", "value"] == pytest.approx(float(logits.min()), rel=1e-5)
        assert rows.loc["outputs/max", "value"] == pytest.approx(float(logits.max()), rel=1e-5)
    # Each evaluation ran in the window of a recording step (10, 20): its first batch's
    # classifier output is the logits the model returned.
    val = run.tensors_of("val")
    head = val[val["name"] == "classifier"].set_index("step")
    assert list(head.index) == [10, 20, 30]
    for step, logits in ((10, evals[0]), (20, evals[2])):
        assert head.loc[step, "max"] == pytest.approx(float(logits.max()), rel=1e-5)
        assert head.loc[step, "numel"] == logits.numel()


class Text(Tokens):
    """Token sequences for a causal language model: its labels are its inputs."""

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


def test_a_language_model_gives_its_logits_as_rows_of_the_vocabulary(tmp_path):
    torch.manual_seed(0)
    config = transformers.GPT2Config(vocab_size=VOCAB, n_positions=LENGTH, n_embd=16,
                                      n_layer=1, n_head=2)
    model = transformers.GPT2LMHeadModel(config)
    seen = []
    model.register_forward_hook(lambda m, a, out: seen.append(out.logits.detach()))
    trainer = transformers.Trainer(model=model, args=_args(tmp_path, max_steps=3,
                                                           eval_strategy="no"),
                                   train_dataset=Text(64, 1),
                                   callbacks=[TracelabCallback(str(tmp_path / "run"))])
    trainer.train()
    run = open_run(tmp_path / "run")
    # (batch, sequence, vocabulary) logits read as the loss reads them: (-1, vocabulary).
    assert run.meta["outputs"]["train"]["shape"] == [BATCH * LENGTH, VOCAB]
    assert run.meta["outputs"]["train"]["targets_shape"] == [BATCH, LENGTH]
    rows = run.signals[run.signals.step == 0].set_index("name")["value"]
    assert rows["outputs/classes"] == VOCAB
    assert rows["outputs/max"] == pytest.approx(float(seen[0].max()), rel=1e-5)
    assert rows["outputs/broadcast"] == 0


def test_model_logits_of_each_output_form():
    logits = torch.randn(4, 3)
    assert model_logits({"loss": torch.tensor(1.0), "logits": logits}) is not None
    assert torch.equal(model_logits((torch.tensor(1.0), logits)), logits)
    assert torch.equal(model_logits((logits,)), logits)
    assert model_logits((torch.tensor(1.0),)) is None and model_logits(None) is None
    assert model_logits({"logits": torch.zeros(2, 5, 7)}).shape == (10, 7)


class Broken(Tokens):
    """Fails on its 40th record, in the third batch."""
    calls = 0

    def __getitem__(self, i):
        self.calls += 1
        if self.calls == 40:
            raise ValueError("corrupt record 5")
        return super().__getitem__(i)


def test_uncaught_exception_marks_the_run_failed(tmp_path, capsys):
    # The Trainer has no exception hook; the exception reaching sys.excepthook (a script
    # ending with a traceback) closes the run as failed.
    before = sys.excepthook
    trainer = transformers.Trainer(model=_model(), args=_args(tmp_path, eval_strategy="no"),
                                   train_dataset=Broken(320, 1),
                                   callbacks=[TracelabCallback(str(tmp_path / "boom"))])
    with pytest.raises(ValueError, match="corrupt record 5") as caught:
        trainer.train()
    assert open_run(tmp_path / "boom").rank_status(0)["state"] == "running"
    sys.excepthook(caught.type, caught.value, caught.tb)
    assert sys.excepthook is before
    assert "corrupt record 5" in capsys.readouterr().err  # the user's traceback still shows
    status = open_run(tmp_path / "boom").status
    assert status["state"] == "failed"
    assert (status["exception_type"], status["exception_message"]) == ("ValueError",
                                                                        "corrupt record 5")
    assert "Broken" in status["traceback"] or "__getitem__" in status["traceback"]


def test_callback_errors_never_stop_training(tmp_path, monkeypatch):
    def broken(kwargs):
        raise TypeError("unexpected batch layout")
    monkeypatch.setattr("tracelab.recorders.hf.batch_inputs", broken)
    before = sys.excepthook
    trainer = transformers.Trainer(model=_model(), args=_args(tmp_path, eval_strategy="no"),
                                   train_dataset=Tokens(320, 1),
                                   callbacks=[TracelabCallback(str(tmp_path / "broken"))])
    with pytest.warns(RuntimeWarning, match="Trainer callback stopped recording"):
        trainer.train()
    assert trainer.state.global_step == STEPS
    assert sys.excepthook is before
    status = open_run(tmp_path / "broken").status
    assert status["state"] == "completed" and "unexpected batch layout" in status["note"]


def test_the_gradscaler_of_an_fp16_trainer_is_found(tmp_path):
    """Under fp16 the Trainer steps through accelerate's optimizer wrapper, which holds the
    GradScaler; the callback records its scale and the steps it skipped."""
    from accelerate import Accelerator
    from accelerate.optimizer import AcceleratedOptimizer
    from accelerate.state import AcceleratorState
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 10)
    args = _args(tmp_path)  # before the Accelerator: TrainingArguments set up their own state
    args.device  # noqa: B018
    Accelerator(cpu=True)  # the state the wrapper reads; reset below for the other tests
    try:
        opt = AcceleratedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   device_placement=False, scaler=scaler)
        signals = _train_with_scaler(tmp_path, args, model, opt, scaler)
    finally:
        AcceleratorState._reset_state(reset_partial_state=True)
    scale = signals[signals.name == "amp/scale"].set_index("step")["value"]
    skipped = signals[signals.name == "amp/skipped"].set_index("step")["value"]
    assert list(skipped) == [0.0, 0.0, 1.0, 0.0]
    assert scale[1] == 2.0 ** 10 and scale[2] == 2.0 ** 9


def _train_with_scaler(tmp_path, args, model, opt, scaler):
    callback = TracelabCallback(str(tmp_path / "run"))
    state, control = transformers.TrainerState(), transformers.TrainerControl()
    callback.on_train_begin(args, state, control, model=model, optimizer=opt)
    assert callback.recorder.scaler is scaler
    for step in range(4):
        opt.zero_grad()
        loss = model(torch.randn(8, 4)).pow(2).mean()
        if step == 2:
            loss = loss * float("inf")  # the scaler skips this step and halves its scale
        scaler.scale(loss).backward()
        opt.step()  # scaler.step, then scaler.update
        callback.on_optimizer_step(args, state, control)
    callback.on_train_end(args, state, control)
    return open_run(tmp_path / "run").signals
