"""A run's status: what its metadata says, corrected for writers that are gone.

A writer that was killed never wrote its end status, so its metadata still says "running".
Whether it still runs is probed twice: its process (when it ran on this host) and the age of
its heartbeat file. With several ranks the run's status is that of the rank that stopped it.
"""
from __future__ import annotations

import math
import os
import re
import socket
import time
from pathlib import Path
from typing import Any, Callable, Mapping

from tracelab.core.schema import heartbeat_filename

# A live writer touches its heartbeat every flush; this much silence means it is gone.
KILLED_AFTER_S = 60.0
# A rank that stops takes the others down: their collectives fail (errors like these) or the
# launcher kills them. A distributed run's status is that of the rank that stopped first.
_COLLECTIVE_ERROR = re.compile(r"DistBackendError|DistNetworkError|DistStoreError|NCCL|gloo|"
                               r"connection (closed|reset) by peer|timed? ?out", re.I)
_STOP_ORDER = {"failed": 0, "killed": 1, "collective-failed": 2, "running": 3, "completed": 4}
UNKNOWN = {"state": "unknown"}  # a rank that left data but no metadata


def recording_stopped(status: Mapping[str, Any]) -> str | None:
    """"recording stopped after step N (reason)" when the writer failed while training went on
    (a full disk, ...); the run itself ended as its state says."""
    stopped = status.get("recording_stopped")
    if not isinstance(stopped, Mapping):
        return None
    after = stopped.get("after_step")
    where = f"after step {after}" if after is not None else "before the first step reached disk"
    return f"recording stopped {where} ({stopped.get('reason') or 'a write failed'})"


def heartbeat_time(path: Path | None, rank: int) -> float:
    """When the rank's writer last flushed (epoch seconds; 0 when unknown)."""
    try:
        return (path / heartbeat_filename(rank)).stat().st_mtime if path else 0.0
    except OSError:
        return 0.0


def writer_gone(path: Path | None, meta: Mapping[str, Any], rank: int) -> bool:
    """Whether the rank's writer is no longer running; an in-memory run's never is."""
    if path is None:
        return False
    writer = meta.get("writer") or {}
    # On Windows os.kill(pid, 0) is no probe: signal 0 is CTRL_C_EVENT there. The heartbeat decides.
    if os.name != "nt" and writer.get("hostname") == socket.gethostname() \
            and isinstance(writer.get("pid"), int):
        try:
            os.kill(writer["pid"], 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            pass
    return time.time() - heartbeat_time(path, rank) > KILLED_AFTER_S


def rank_status(path: Path | None, rank: int, meta: Mapping[str, Any],
                last_step: Callable[[], int | None]) -> dict[str, Any]:
    """One rank's status, from its own metadata and its own writer's liveness; a killed
    rank's status adds `last_step`, the last step it left data of."""
    status = dict(meta.get("status") or {"state": "running"})
    if status.get("state") == "running" and writer_gone(path, meta, rank):
        status["state"] = "killed"
        status["last_step"] = last_step()
    return status


def run_status(path: Path | None, states: Mapping[int, Mapping[str, Any]],
               rank_meta: Mapping[int, Mapping[str, Any]]) -> dict[str, Any]:
    """The status of a distributed run, from each rank's (`states`).

    It is the status of the rank that most likely stopped the run, plus `rank` (that rank) and
    `ranks` (every rank's state): a rank that raised, else one that was killed, else one whose
    collective failed (a consequence), each the earliest to stop; then running, completed.
    """
    def stop_order(rank: int) -> tuple:
        status = states[rank]
        state = status["state"]
        if state == "failed" and _COLLECTIVE_ERROR.search(
                f"{status.get('exception_type', '')} {status.get('exception_message', '')}"):
            state = "collective-failed"
        when = rank_meta.get(rank, {}).get("end_time") or heartbeat_time(path, rank)
        return _STOP_ORDER.get(state, len(_STOP_ORDER)), when or math.inf, rank

    first = min(states, key=stop_order)
    return {**states[first], "rank": first, "ranks": {r: st["state"] for r, st in states.items()}}
