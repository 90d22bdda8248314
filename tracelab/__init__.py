"""tracelab: record a PyTorch training run, analyze its trace, report what went wrong."""
from tracelab._version import __version__
from tracelab.config import Config, load_config
from tracelab.engine import analyze
from tracelab.errors import ConfigError, RunExistsError, TraceError, TracelabError
from tracelab.findings import Diagnosis, Finding, Severity
from tracelab.run import Run, open_run

__all__ = ["__version__", "analyze", "open_run", "Run", "Finding", "Diagnosis", "Severity",
           "Config", "load_config", "Recorder", "TraceError", "TracelabError", "RunExistsError",
           "ConfigError"]


def __getattr__(name: str):
    # The recorder needs torch; the analysis side must import without it.
    if name == "Recorder":
        from tracelab.recorders.torch_recorder import Recorder
        return Recorder
    raise AttributeError(f"module 'tracelab' has no attribute {name!r}")
