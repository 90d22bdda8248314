"""tracelab: record a PyTorch training run, analyze its trace, report what went wrong.

The package is layered (docs/architecture.md): `tracelab.core` is the foundation, the stages
`tracelab.recorders`, `tracelab.analyzers` and `tracelab.reports` stand on it, and
`tracelab.app` (engine, CLI, batch, diff, demo) sits above them. This module only names the
public API; each name is imported when first used, so `import tracelab` stays cheap and the
analysis side imports without torch.
"""
from tracelab._version import __version__

# public name -> the module that defines it
_API = {
    "analyze": "tracelab.app.engine",
    "open_run": "tracelab.core.run",
    "Run": "tracelab.core.run",
    "Finding": "tracelab.core.findings",
    "Diagnosis": "tracelab.core.findings",
    "Severity": "tracelab.core.findings",
    "Config": "tracelab.core.config",
    "load_config": "tracelab.core.config",
    "TracelabError": "tracelab.core.errors",
    "TraceError": "tracelab.core.errors",
    "RunExistsError": "tracelab.core.errors",
    "ConfigError": "tracelab.core.errors",
    "Recorder": "tracelab.recorders.torch_recorder",  # needs torch
}

__all__ = ["__version__", *_API]


def __getattr__(name: str):
    module = _API.get(name)
    if module is None:
        raise AttributeError(f"module 'tracelab' has no attribute {name!r}")
    import importlib
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
