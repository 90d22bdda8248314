"""Configuration, found the way linters find theirs.

Sources, the first found wins: `--config FILE`; else, from the working directory upwards, the
first `tracelab.toml` or `pyproject.toml` holding a `[tool.tracelab]` table. Format::

    [tool.tracelab]                 # or the top level of tracelab.toml
    select = ["loss-spike", ...]    # names or codes; default all
    ignore = ["TL305"]
    fail-on = "warning"

    [tool.tracelab.rules.loss-oscillation]
    min_swing = 0.3                  # any keyword-only threshold of the rule
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Optional

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

from tracelab.core.errors import ConfigError


@dataclass
class Config:
    select: Optional[list[str]] = None
    ignore: list[str] = field(default_factory=list)
    fail_on: Optional[str] = None
    rules: dict[str, dict[str, Any]] = field(default_factory=dict)
    source: Optional[str] = None

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], source: str = "<config>") -> "Config":
        known = {"select", "ignore", "fail-on", "fail_on", "rules"}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(f"{source}: unknown key '{unknown[0]}'; expected one of "
                              "select, ignore, fail-on, rules")
        rules = data.get("rules", {})
        if not isinstance(rules, dict) or not all(isinstance(v, dict) for v in rules.values()):
            raise ConfigError(f"{source}: 'rules' must be a table of tables, one per rule")
        for key in ("select", "ignore"):
            value = data.get(key)
            if value is not None and not (isinstance(value, list)
                                          and all(isinstance(v, str) for v in value)):
                raise ConfigError(f"{source}: '{key}' must be a list of rule names or codes")
        return cls(select=data.get("select"), ignore=list(data.get("ignore", [])),
                   fail_on=data.get("fail-on", data.get("fail_on")),
                   rules={k: dict(v) for k, v in rules.items()}, source=source)


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read ({exc.strerror or exc})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML ({exc})") from None


def load_config(path: str | os.PathLike | None = None,
                start: str | os.PathLike | None = None) -> Config:
    """Load `path`, or discover a config upwards from `start` (default: the working directory)."""
    if path is not None:
        path = Path(path)
        data = _read_toml(path)
        if path.name == "pyproject.toml":
            data = data.get("tool", {}).get("tracelab", {})
        elif "tool" in data and "tracelab" in data["tool"]:
            data = data["tool"]["tracelab"]
        return Config.from_mapping(data, str(path))
    directory = Path(start or os.getcwd()).resolve()
    for folder in (directory, *directory.parents):
        own = folder / "tracelab.toml"
        if own.is_file():
            return Config.from_mapping(_read_toml(own), str(own))
        project = folder / "pyproject.toml"
        if project.is_file():
            table = _read_toml(project).get("tool", {}).get("tracelab")
            if table is not None:
                return Config.from_mapping(table, f"{project} [tool.tracelab]")
    return Config()
