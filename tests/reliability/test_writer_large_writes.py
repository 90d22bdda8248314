"""Large writes: a flush whose string column passes 64 MiB as a numpy array (pyarrow then
returns it in chunks) is written whole, and recording goes on."""
from __future__ import annotations

import warnings

import numpy as np
import pyarrow.parquet as pq

from tracelab.core.schema import TENSORS
from tracelab.core.writer import RunWriter

# Each write alone converts to one array; the two together (one flush) pass 64 MiB as numpy
# strings of 64 characters (256 bytes a value), where pyarrow starts chunking.
ROWS = 140_000
NAME = "encoder.layers.11.self_attention.query_key_value.weight.shard.0000"


def _write(writer: RunWriter, first: int) -> None:
    steps = np.arange(first, first + ROWS, dtype=np.int64)
    writer.write((TENSORS, {"step": steps, "kind": np.asarray(["grad"] * ROWS),
                            "name": np.asarray([NAME] * ROWS), "norm": steps * 0.5}))


def test_a_flush_past_pyarrows_chunk_size_is_written_whole(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a writer failure is a warning: make it fail the test
        writer = RunWriter(tmp_path / "run", flush_interval=3600.0)
        _write(writer, 0)
        _write(writer, ROWS)
        assert writer.flush()
        _write(writer, 2 * ROWS)  # recording goes on after the large flush
        writer.close()
    assert not writer.failed and writer.stopped is None
    table = pq.read_table(tmp_path / "run" / TENSORS).sort_by("step")
    assert table.num_rows == 3 * ROWS
    assert table.column("step").to_pylist() == list(range(3 * ROWS))
    assert set(table.column("name").unique().to_pylist()) == {NAME}
    assert table.column("norm").to_numpy().tolist() == (np.arange(3 * ROWS) * 0.5).tolist()
