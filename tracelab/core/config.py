"""Configuration, found the way linters find theirs, and checked before any work starts.

Sources, the first found wins: `--config FILE`; else, from the working directory upwards, the
first `tracelab.toml` or `pyproject.toml` holding a `[tool.tracelab]` table. Format::

    [tool.tracelab]                 # or the top level of tracelab.toml
    select = ["loss-spike", ...]    # names or codes; default all
    ignore = ["TL303"]
    fail-on = "warning"             # error, warning, info or never

    [tool.tracelab.rules.loss-oscillation]
    min_swing = 0.3                  # any keyword-only threshold of the rule

    [tool.tracelab.diff]
    rtol = 1e-3                      # any field of DiffThresholds below

`load_config` checks the structure, `fail-on` and the diff table; `Config.check(rules)` checks
the rule names and thresholds against the rule list (the foundation does not import the rules:
the engine passes them).
"""
from __future__ import annotations

import difflib
import math
import os
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Optional, Sequence

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

from tracelab.core.errors import ConfigError

if TYPE_CHECKING:
    from tracelab.core.rules import RuleSpec

FAIL_ON = ("error", "warning", "info", "never")
_KEYS = ("select", "ignore", "fail-on", "rules", "diff")


def suggest(key: str, known: Iterable[str]) -> str:
    """'; did you mean X?' for the closest known name, or ''."""
    close = difflib.get_close_matches(key, list(known), n=1, cutoff=0.6)
    return f"; did you mean '{close[0]}'?" if close else ""


def _unknown(what: str, key: str, known: Sequence[str]) -> ConfigError:
    """`WHAT 'KEY'; did you mean ...? (expected one of ...)`."""
    return ConfigError(f"{what} '{key}'{suggest(key, known)} (expected one of "
                       f"{', '.join(known) or '(none)'})")


def check_value(where: str, value: Any, default: Any) -> None:
    """A configured threshold must have its default's type (an int does for a float) and, for a
    number, be finite, and not negative where its default is not."""
    kind = type(default)
    if isinstance(default, bool) or not isinstance(default, (int, float)):
        ok = isinstance(value, kind)
    elif isinstance(default, int):  # a window, a count: 50.0 would break the rule
        ok = isinstance(value, int) and not isinstance(value, bool)
    else:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not ok:
        name = kind.__name__
        raise ConfigError(f"{where} = {value!r}; expected {'an' if name[0] in 'aeiou' else 'a'} "
                          f"{name} like {default!r}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(f"{where} = {value!r}; expected a finite number like {default!r}")
    if not isinstance(default, bool) and isinstance(default, (int, float)) and default >= 0 \
            and value < 0:  # a z-score, a ratio, a window: never below zero where it starts
        raise ConfigError(f"{where} = {value!r}; expected a number >= 0 like {default!r}")


def _threshold(default: Any, help: str) -> Any:
    return field(default=default, metadata={"help": help})


@dataclass(frozen=True)
class DiffThresholds:
    """The comparison's tolerances: `[tool.tracelab.diff]` overrides them, `--rtol`/`--atol`
    override the table."""
    rtol: float = _threshold(1e-4, "relative tolerance of the series and gradient norms")
    atol: float = _threshold(1e-8, "absolute tolerance of the series")
    mean_shift: float = _threshold(0.5, "a feature's mean moved by more than this many of A's "
                                        "stds")
    std_ratio_min: float = _threshold(0.5, "a feature's std in B below this multiple of A's")
    std_ratio_max: float = _threshold(2.0, "a feature's std in B above this multiple of A's")
    unique_min: int = _threshold(10, "distinct values a feature needs in A for a drop to count")
    unique_ratio: float = _threshold(0.5, "a feature's distinct values in B below this share "
                                          "of A's")

    def check(self, where: str) -> None:
        for f in fields(self):
            if getattr(self, f.name) < 0:
                raise ConfigError(f"{where}: diff.{f.name} = {getattr(self, f.name)!r}; "
                                  "expected a number >= 0")
        if self.std_ratio_min > self.std_ratio_max:
            raise ConfigError(f"{where}: diff.std_ratio_min = {self.std_ratio_min!r} is above "
                              f"diff.std_ratio_max = {self.std_ratio_max!r}; expected a band")

    @classmethod
    def help(cls) -> str:
        """One line per threshold, for `tracelab diff --help`."""
        return "\n".join(f"  {f.name} = {f.default!r}  ({f.metadata['help']})"
                         for f in fields(cls))


@dataclass
class Config:
    select: Optional[list[str]] = None
    ignore: list[str] = field(default_factory=list)
    fail_on: Optional[str] = None
    rules: dict[str, dict[str, Any]] = field(default_factory=dict)
    diff: dict[str, Any] = field(default_factory=dict)
    source: Optional[str] = None

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], source: str = "<config>") -> "Config":
        """Check everything that does not need the rule list; see `check` for the rest."""
        data = dict(data)
        if "fail_on" in data and "fail-on" not in data:
            data["fail-on"] = data.pop("fail_on")
        for key in data:
            if key not in _KEYS:
                raise _unknown(f"{source}: unknown key", key, _KEYS)
        for key in ("select", "ignore"):
            value = data.get(key)
            if value is not None and not (isinstance(value, list)
                                          and all(isinstance(v, str) for v in value)):
                raise ConfigError(f"{source}: '{key}' must be a list of rule names or codes")
        rules = data.get("rules", {})
        if not isinstance(rules, dict) or not all(isinstance(v, dict) for v in rules.values()):
            raise ConfigError(f"{source}: 'rules' must be a table of tables, one per rule "
                              "([tool.tracelab.rules.NAME])")
        diff = data.get("diff", {})
        if not isinstance(diff, dict):
            raise ConfigError(f"{source}: 'diff' must be a table ([tool.tracelab.diff])")
        config = cls(select=data.get("select"), ignore=list(data.get("ignore", [])),
                     fail_on=data.get("fail-on"), rules={k: dict(v) for k, v in rules.items()},
                     diff=dict(diff), source=source)
        config._check_settings()
        return config

    @property
    def where(self) -> str:
        return self.source or "<config>"

    def _check_settings(self) -> None:
        """fail-on and the diff table: what needs no rule list."""
        if self.fail_on is not None and self.fail_on not in FAIL_ON:
            raise ConfigError(f"{self.where}: fail-on = {self.fail_on!r}; expected one of "
                              + ", ".join(FAIL_ON))
        defaults = {f.name: f.default for f in fields(DiffThresholds)}
        for key, value in self.diff.items():
            if key not in defaults:
                raise _unknown(f"{self.where}: [diff] has no threshold", key, list(defaults))
            check_value(f"{self.where}: diff.{key}", value, defaults[key])
        DiffThresholds(**self.diff).check(self.where)

    def check(self, specs: Sequence["RuleSpec"]) -> "Config":
        """Check everything, the rule names (select, ignore, the rule tables) and thresholds
        against the rule list `specs` included; return self. A ConfigError names the file."""
        self._check_settings()
        names = [s.name for s in specs]
        for what, keys in (("select", self.select or []), ("ignore", self.ignore)):
            for key in keys:
                rule_for(key, specs, f"{self.where}: {what}")
        seen: dict[str, str] = {}
        for key, given in self.rules.items():
            spec = find_spec(key, specs)
            if spec is None:
                raise ConfigError(f"{self.where}: unknown rule '{key}' in [rules.{key}]"
                                  f"{suggest(key, names)}; `tracelab rules` lists them")
            if spec.name in seen:
                raise ConfigError(f"{self.where}: rule {spec.name} is configured twice, as "
                                  f"[rules.{seen[spec.name]}] and [rules.{key}]")
            seen[spec.name] = key
            allowed = spec.thresholds()
            for name, value in given.items():
                if name not in allowed:
                    raise _unknown(f"{self.where}: rule {spec.name} has no threshold", name,
                                   list(allowed))
                check_value(f"{self.where}: {spec.name}.{name}", value, allowed[name])
        return self

    def thresholds(self, spec: "RuleSpec") -> dict[str, Any]:
        """The configured thresholds of one rule (its table by name or code), as `check` saw."""
        for key, given in self.rules.items():
            if find_spec(key, [spec]) is not None:
                return dict(given)
        return {}

    def diff_thresholds(self) -> DiffThresholds:
        return DiffThresholds(**self.diff)


def find_spec(key: str, specs: Sequence["RuleSpec"]) -> Optional["RuleSpec"]:
    """The rule named `key`: its name or its code, in any case."""
    key = key.strip()
    return next((s for s in specs if key in (s.name, s.code) or key.upper() == s.code), None)


def rule_for(key: str, specs: Sequence["RuleSpec"], what: str) -> "RuleSpec":
    """The rule named `key`; else ConfigError `WHAT: unknown rule 'KEY'; did you mean ...`."""
    spec = find_spec(key, specs)
    if spec is None:
        raise ConfigError(f"{what}: unknown rule '{key.strip()}'"
                          f"{suggest(key.strip(), [s.name for s in specs])}; "
                          "`tracelab rules` lists them")
    return spec


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read ({exc.strerror or exc})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML ({exc})") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text; expected a TOML file") from None


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
