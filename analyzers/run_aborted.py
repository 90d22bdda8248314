"""run-aborted: the run ended abnormally, with an exception or killed.

What it detects
    A run whose metadata records an exception raised inside the recorded training loop, or a run
    left in the "running" state whose writer is gone (killed by the OOM killer, a scheduler, a
    SIGKILL, a crashed node).

Why it matters
    The runs that died are the ones a post-mortem starts from. The other findings describe the
    run up to its last recorded step; this one says where and how it stopped.

Example
    ``RuntimeError: CUDA out of memory`` raised at step 1840; or a run killed at step 912 with no
    exception recorded.

How to fix
    For an exception, read its message and traceback in the report. For a killed run, look at the
    scheduler or kernel logs (``dmesg`` for the OOM killer) around the run's last wall-clock time.

False positives
    A run still being written by a live process is reported as running, not killed. A run whose
    writer went silent for over a minute while its process lives on another host counts as killed.
"""
from __future__ import annotations

from tracelab.core.findings import ERROR, Finding
from tracelab.core.rules import Plot, rule
from tracelab.core.run import Run


@rule(name="run-aborted", code="TL107", plot=Plot.RUN_END)
def run_aborted(run: Run) -> list[Finding]:
    status = run.status
    state = status.get("state")
    last = status.get("last_step", run.last_step)
    # A distributed run's status names the rank that stopped it.
    where = f" on rank {status['rank']}" if "rank" in status else ""
    ranked = {"rank": status["rank"]} if "rank" in status else {}
    steps = (last, last) if last is not None else None
    if state == "failed":
        exc_type = status.get("exception_type", "an exception")
        text = status.get("exception_message", "")
        at = status.get("step", last)
        return [run_aborted.finding(
            ERROR, "run", steps,
            f"The run failed at step {at}{where} with {exc_type}: {text}".rstrip(": "),
            {"step": at, "last_recorded_step": last, **ranked},
            "Read the recorded traceback; the other findings show the run's state before it "
            "failed.")]
    if state == "killed":
        return [run_aborted.finding(
            ERROR, "run", steps,
            f"The run was killed{where} without an exception after step {last}; its writer "
            "stopped without closing the run.",
            {"last_recorded_step": last, **ranked},
            "Check the scheduler's or the kernel's logs (OOM killer, time limit, preemption) "
            "at the run's last wall-clock time.")]
    return []
