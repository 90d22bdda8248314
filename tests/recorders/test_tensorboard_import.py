"""TensorBoard import: event files written by torch's SummaryWriter during the test."""
import math
import os
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

pytest.importorskip("tensorboard")
from torch.utils.tensorboard import SummaryWriter  # noqa: E402

import tracelab  # noqa: E402
from tracelab.app.cli import main  # noqa: E402
from tracelab.core.errors import ConfigError, RunExistsError, TraceError  # noqa: E402
from tracelab.recorders.importers.common import TagMap, default_histogram, default_scalar  # noqa: E402
from tracelab.recorders.importers.tensorboard import import_tensorboard, read_tensorboard  # noqa: E402

sys.path.insert(0, str(Path(__file__).parents[1] / "core"))
from _archive_runs import tensorboard_log, tree_state  # noqa: E402


@pytest.fixture(scope="module")
def tb_log(tmp_path_factory):
    return tensorboard_log(tmp_path_factory.mktemp("tb") / "exp1", steps=30)


@pytest.mark.parametrize("tag, split, name", [
    ("train/loss", "train", "loss"), ("loss/train", "train", "loss"),
    ("Loss/train", "train", "loss"), ("val/acc", "val", "acc"), ("acc/val", "val", "acc"),
    ("validation/accuracy", "val", "accuracy"), ("train_loss", "train", "loss"),
    ("val_loss", "val", "loss"), ("loss_val", "val", "loss"), ("val_acc_epoch", "val", "acc"),
    ("train_loss_step", "train", "loss"), ("test/f1", "test", "f1"), ("loss", "train", "loss"),
    ("accuracy", "train", "accuracy"), ("lr-Adam", "train", "lr/0"),
    ("lr-SGD/pg2", "train", "lr/1"), ("train/lr", "train", "lr/0"),
    ("learning_rate", "train", "lr/0"), ("validation/epoch_loss", "val", "loss"),
])
def test_default_scalar_names(tag, split, name):
    key = default_scalar(tag)
    assert (key.split, key.name) == (split, name)


@pytest.mark.parametrize("tag", ["epoch", "step", "global_step", "_hparams_/experiment"])
def test_bookkeeping_tags_are_left_out(tag):
    assert default_scalar(tag) is None


@pytest.mark.parametrize("tag, kind, name", [
    ("fc.weight", "weight", "fc.weight"), ("weights/fc.weight", "weight", "fc.weight"),
    ("fc.weight.grad", "grad", "fc.weight"), ("fc.weight/grad", "grad", "fc.weight"),
    ("grads/fc.weight", "grad", "fc.weight"), ("gradients/0.bias", "grad", "0.bias"),
    ("activations/encoder.relu", "activation", "encoder.relu"),
    ("dense/kernel", "weight", "dense/kernel"), ("fc.weight_grad", "grad", "fc.weight"),
])
def test_default_histogram_kinds(tag, kind, name):
    assert default_histogram(tag) == (kind, name)


def test_scalars_and_histograms_of_a_real_training(tb_log):
    run = read_tensorboard(tb_log).as_run(tb_log)
    assert run.loss().index.tolist() == list(range(30))
    assert run.scalar("acc", "val").index.tolist() == [9, 19, 29]
    assert run.scalar("lr/0").tolist() == pytest.approx([0.01] * 30)  # stored as float32
    assert run.names("weight") == ["0.weight", "0.bias", "2.weight", "2.bias"]
    assert run.names("grad") == run.names("weight")
    assert run.meta["source"] == {"format": "tensorboard", "path": str(tb_log.resolve())}
    assert run.status["state"] == "completed" and run.name == "exp1"
    keys = {r.key for r in run.available}
    assert {"loss", "eval", "weights", "grads"} <= keys and "activations" not in keys


def test_histogram_stats_match_plain_torch(tmp_path):
    torch.manual_seed(3)
    t = torch.randn(40, 25)
    t[t.abs() < 0.3] = 0.0  # exact zeros, as ReLU gradients have
    writer = SummaryWriter(str(tmp_path))
    writer.add_histogram("layer.weight", t, 0)
    writer.add_histogram("layer.weight/grad", t * 1e-4, 0)
    writer.close()
    tn = read_tensorboard(tmp_path).as_run(tmp_path).tensors
    for kind, tensor in (("weight", t), ("grad", t * 1e-4)):
        row = tn[tn["kind"] == kind].iloc[0]
        ref = tensor.double()
        assert row["numel"] == ref.numel()
        # exact: from the histogram's count, sum and sum of squares
        for stat, want in (("mean", ref.mean()), ("std", ref.std()), ("norm", ref.norm()),
                           ("min", ref.min()), ("max", ref.max())):
            assert row[stat] == pytest.approx(want.item(), rel=1e-5, abs=1e-12), (kind, stat)
        # approximate: from bucket midpoints, and the buckets that resolve zero
        assert row["abs_mean"] == pytest.approx(ref.abs().mean().item(), rel=0.05)
        assert row["zero_frac"] == pytest.approx((ref == 0).double().mean().item(), abs=1e-9)
        assert math.isnan(row["nan_count"]) and math.isnan(row["dead_frac"])


def test_add_scalars_children_and_hparams(tmp_path):
    writer = SummaryWriter(str(tmp_path))
    for step in range(5):
        writer.add_scalars("loss", {"train": 1.0 / (step + 1), "val": 1.2 / (step + 1)}, step)
    writer.add_hparams({"lr": 0.01, "optimizer": "adam"}, {"hparam/acc": 0.9})
    writer.close()
    run = read_tensorboard(tmp_path).as_run(tmp_path)
    assert run.loss("train").tolist() == pytest.approx([1.0 / (s + 1) for s in range(5)])
    assert run.loss("val").tolist() == pytest.approx([1.2 / (s + 1) for s in range(5)])
    assert run.meta["config"] == {"lr": 0.01, "optimizer": "adam"}
    assert set(run.scalars["name"]) == {"loss"}  # the hparams metric copies are not series


def test_tf2_style_tensor_summaries(tmp_path):
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.compat.proto.summary_pb2 import Summary, SummaryMetadata
    from tensorboard.summary.writer.event_file_writer import EventFileWriter
    from tensorboard.util import tensor_util
    writer = EventFileWriter(str(tmp_path))
    for step in range(3):
        scalar = Summary.Value(tag="epoch_loss", tensor=tensor_util.make_tensor_proto(
            np.float32(2.0 - step)), metadata=SummaryMetadata(
            plugin_data=SummaryMetadata.PluginData(plugin_name="scalars")))
        buckets = np.array([[-1.0, 0.0, 3.0], [0.0, 1.0, 1.0]])
        hist = Summary.Value(tag="dense/kernel_0", tensor=tensor_util.make_tensor_proto(buckets),
                             metadata=SummaryMetadata(plugin_data=SummaryMetadata.PluginData(
                                 plugin_name="histograms")))
        writer.add_event(Event(step=step, wall_time=1.7e9 + step,
                               summary=Summary(value=[scalar, hist])))
    writer.close()
    run = read_tensorboard(tmp_path).as_run(tmp_path)
    assert run.loss().tolist() == [2.0, 1.0, 0.0]
    row = run.tensors.iloc[0]
    assert (row["kind"], row["name"], row["numel"]) == ("weight", "dense/kernel_0", 4)
    assert row["mean"] == pytest.approx((3 * -0.5 + 0.5) / 4)


def test_custom_tag_rules_come_first(tb_log):
    tags = TagMap(scalars=[r"val/(acc)=holdout/\1_top1", "lr-Adam=skip"],
                  histograms=[r"(2\..*)\.grad=skip", r"(0\..*)=activation:\1"])
    run = read_tensorboard(tb_log, tags).as_run(tb_log)
    assert "holdout" in run.splits() and len(run.scalar("acc_top1", "holdout")) == 3
    assert "lr/0" not in set(run.scalars["name"])
    assert "2.weight" not in run.names("grad") and "0.weight" in run.names("activation")


@pytest.mark.parametrize("rule", ["no-equals-sign", "(unclosed=val/x", "x=nosplit"])
def test_bad_tag_rules_are_one_line_errors(rule):
    with pytest.raises(ConfigError, match="rule"):
        TagMap(scalars=[rule])
    with pytest.raises(ConfigError):
        TagMap(histograms=["x=neuron"])


def test_import_writes_a_run_and_never_overwrites(tb_log, tmp_path):
    before = tree_state(tb_log)
    target = import_tensorboard(tb_log, tmp_path / "imported")
    run = tracelab.open_run(target)
    assert run.status["state"] == "completed"
    assert run.meta["source"]["format"] == "tensorboard"
    assert len(run.scalars) == len(read_tensorboard(tb_log).tables["scalars"])
    assert run.meta["end_time"] >= run.meta["start_time"] > 1e9
    with pytest.raises(RunExistsError):
        import_tensorboard(tb_log, target)
    assert tree_state(tb_log) == before


def test_not_a_log_is_a_clear_error(tmp_path):
    with pytest.raises(TraceError, match="no TensorBoard event files"):
        read_tensorboard(tmp_path)
    with pytest.raises(TraceError, match="no such directory"):
        read_tensorboard(tmp_path / "missing")


def test_cli_import_and_analyze_a_logdir_in_place(tb_log, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    before = tree_state(tb_log)
    assert main(["analyze", str(tb_log), "--fail-on", "never"]) == 0
    out = capsys.readouterr().out
    assert "skipped" in out and "activations" in out  # rules the import cannot feed
    assert (tmp_path / "exp1-report.html").is_file()
    assert tree_state(tb_log) == before  # nothing written next to the logs
    assert main(["import", "tensorboard", str(tb_log), "run1", "--map", "lr-Adam=skip"]) == 0
    assert "imported" in capsys.readouterr().out
    assert "lr/0" not in set(tracelab.open_run("run1").scalars["name"])
    assert main(["import", "tensorboard", str(tb_log), "run1"]) == 2
    assert "already holds a run" in capsys.readouterr().err
    assert main(["analyze", str(tmp_path)]) == 2
    assert "holds runs in subdirectories" in capsys.readouterr().err
    os.remove(tmp_path / "exp1-report.html")


def test_cli_import_refuses_a_run_in_the_log_around_it_or_inside_another_run(
        tb_log, tmp_path, capsys):
    before = tree_state(tb_log)
    with tracelab.Recorder(tmp_path / "run") as rec:
        rec.step(loss=1.0)
    for target in (tb_log, tb_log / "sub", tb_log.parent, tmp_path / "run" / "scalars" / "x"):
        assert main(["import", "tensorboard", str(tb_log), str(target)]) == 2, target
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and ("RUN must lie outside" in err or "inside the run" in err)
    assert tree_state(tb_log) == before
    assert not (tmp_path / "run" / "scalars" / "x").exists()


def test_an_interrupted_import_leaves_nothing_a_second_one_trips_over(tb_log, tmp_path,
                                                                       monkeypatch):
    from tracelab.core.writer import RunWriter
    imported = read_tensorboard(tb_log)
    real_close = RunWriter.close

    def interrupted(self, status=None):
        real_close(self, status)
        raise KeyboardInterrupt

    monkeypatch.setattr(RunWriter, "close", interrupted)
    with pytest.raises(KeyboardInterrupt):
        imported.write(tmp_path / "run")
    assert os.listdir(tmp_path) == []  # neither the run nor the folder it was built in
    monkeypatch.setattr(RunWriter, "close", real_close)
    imported.write(tmp_path / "run")
    assert tracelab.open_run(tmp_path / "run").status["state"] == "completed"


def test_cli_import_into_a_linked_empty_folder_beside_another_tools_meta_json(
        tb_log, tmp_path, capsys):
    project = tmp_path / "proj"
    (project / "runs" / "empty").mkdir(parents=True)
    (project / "meta.json").write_text('{"name": "not a tracelab run"}')  # another tool's
    os.symlink(project / "runs" / "empty", tmp_path / "link")
    os.umask(umask := os.umask(0o022))
    assert main(["import", "tensorboard", str(tb_log), str(tmp_path / "link")]) == 0, \
        capsys.readouterr().err
    run_dir = project / "runs" / "empty"
    assert (tmp_path / "link").is_symlink() and (run_dir / "meta.json").is_file()
    assert run_dir.stat().st_mode & 0o777 == 0o777 & ~umask  # readable as mkdir makes it
    assert main(["import", "tensorboard", str(tb_log), str(project / "runs" / "b")]) == 0


def test_steps_no_trace_holds_are_left_out_at_import_and_said(tmp_path):
    """SummaryWriter takes any int64 step; the import leaves out those a trace cannot hold
    (negative, from 2**62 on), and says so, rather than write rows the reader must skip."""
    log = tmp_path / "log"
    with SummaryWriter(str(log)) as writer:
        for step in [-1, 0, 1, 2, -100, 3, 2**62 + 5]:
            writer.add_scalar("train/loss", 1.0, step)
        writer.add_histogram("grads/fc.weight", np.ones(10), -3)
        writer.add_histogram("grads/fc.weight", np.ones(10), 4)
    import_tensorboard(log, tmp_path / "run")
    run = tracelab.open_run(tmp_path / "run")
    assert run.loss().index.tolist() == [0, 1, 2, 3]
    assert run.tensors.step.tolist() == [4]
    assert [p.split(":")[0] for p in run.problems] == ["scalars", "tensors"], run.problems
    assert run.problems[0] == "scalars: 3 of 7 rows with a step outside 0..2**62 skipped"


def test_tags_mapping_to_one_series_are_not_merged(tmp_path):
    """train/loss, loss/train and train_loss all name the train loss: the series keeps the
    tag named as it, and the import says which it left out (merged, the loss would take three
    values a step)."""
    log = tmp_path / "log"
    with SummaryWriter(str(log)) as writer:
        for step in range(30):
            writer.add_scalar("train/loss", 1.0, step)
            writer.add_scalar("loss/train", 100.0, step)
            writer.add_scalar("train_loss", 5.0, step)
    run = read_tensorboard(log).as_run(log)
    assert run.loss().tolist() == [1.0] * 30
    assert run.problems == ["tags 'loss/train', 'train_loss' left out: they map to train/loss "
                            "as 'train/loss' does (give them a series of their own with --map)"]
    mapped = read_tensorboard(log, TagMap(scalars=[r"loss/train=train/loss_b"])).as_run(log)
    assert mapped.scalar("loss_b").tolist() == [100.0] * 30 and len(mapped.problems) == 1
