"""Errors meant for the user: each carries one line that names the file or field and what was expected."""


class TracelabError(Exception):
    """Base of every error tracelab reports to the user as a single line (CLI exit code 2)."""


class TraceError(TracelabError):
    """A run directory is missing, unreadable, empty or of an unknown schema version."""


class RunExistsError(TracelabError, FileExistsError):
    """The run directory already holds a run; tracelab never overwrites one."""


class ConfigError(TracelabError):
    """A configuration file or option is invalid."""
