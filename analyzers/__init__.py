"""The rules. Registration is this explicit list: adding a rule is one file plus one line here."""
from tracelab.analyzers.run_aborted import run_aborted

RULES = [
    run_aborted,
]
