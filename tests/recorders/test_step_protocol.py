"""The per-step protocol: each producer gets back what it packed; the callbacks' public API."""
import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the recorder needs torch (extra 'torch')")

import tracelab  # noqa: E402
from tracelab.recorders.transfer import StepRecord  # noqa: E402


def test_each_producer_receives_the_values_of_its_own_tensors():
    record, seen = StepRecord(), {}

    def producer(name):
        def rows(values):
            seen[name] = [v.tolist() for v in values]
            return []
        return rows
    record.add(producer("none"))
    record.add(producer("two"), [torch.tensor([1.0, 2.0]), torch.tensor([[3.0]])])
    record.add(producer("one"), (torch.tensor([4, 5, 6]),))
    assert record.seal()() == []
    assert seen == {"none": [], "two": [[1.0, 2.0], [3.0]], "one": [[4.0, 5.0, 6.0]]}


def test_accumulated_micro_batch_losses_make_the_step_loss(tmp_path):
    rec = tracelab.Recorder(tmp_path / "run", input_every=2)
    assert (rec.step_index, rec.records_inputs) == (0, True)
    for value in (1.0, 3.0):
        rec.accumulate_loss(torch.tensor(value))
    rec.step()  # step 0: the mean
    assert (rec.step_index, rec.records_inputs) == (1, False)
    for value in (1.0, 3.0):
        rec.accumulate_loss(torch.tensor(value), summed=True)
    rec.step()  # step 1: the sum
    rec.accumulate_loss(torch.tensor(0.5, dtype=torch.float16), scale=4)
    rec.step()  # step 2: undone division
    rec.accumulate_loss(torch.tensor(9.0))
    rec.step(loss=7.0)  # step 3: a given loss wins, and the accumulated one is dropped
    rec.step()  # step 4: nothing left over
    rec.close()
    loss = tracelab.open_run(tmp_path / "run").loss()
    assert loss.to_dict() == {0: 2.0, 1: 4.0, 2: 2.0, 3: 7.0}
    assert np.dtype(loss.dtype) == np.float64
