"""What the rules that judge a learning rate know of it.

A run recorded without an optimizer object (manual SGD, an update written by hand) says so:
meta.json's `optimizers` is `{}` (docs/trace-format.md), and no `lr/` scalar was recorded. Its
learning rate is unknown, so a rule's fix cannot say to lower it; it names what to check and
the Recorder argument that records it. Older runs and imported ones hold no such fact.
"""
from __future__ import annotations

from tracelab.core.run import Run
from tracelab.core.schema import LR_PREFIX, META_OPTIMIZERS

NO_OPTIMIZER_FIX = ("The run was recorded without an optimizer object, so its learning rate is "
                    "unknown and was not judged: check the step size the training loop applies "
                    "(a hand-written update's lr), and pass the optimizer to "
                    "Recorder(optimizer=...) to record it.")


def without_optimizer(run: Run) -> bool:
    """Whether the run recorded that it had no optimizer object, and no learning rate."""
    if run.meta.get(META_OPTIMIZERS) != {}:
        return False
    names = run.scalars["name"] if len(run.scalars) else ()
    return not any(str(n).startswith(LR_PREFIX) for n in set(names))


def lr_fix(run: Run, fix: str) -> str:
    """`fix`, or what to do when the run's learning rate is unknown."""
    return NO_OPTIMIZER_FIX if without_optimizer(run) else fix
