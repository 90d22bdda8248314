"""The rule list that `tracelab rules` and `tracelab explain` print, read from the rules' source
files instead of importing them.

Importing the rules brings numpy, pandas and pyarrow: most of a second before the first line is
printed. The sources say all these commands show: analyzers/__init__.py's explicit list, each
rule's `@rule(name=..., code=..., requires=...)`, its docstring and its keyword-only
thresholds. Where a source holds something this reading cannot take literally (a computed
default), the rules are imported after all. tests/test_rule_catalog.py checks that both give
the same list.
"""
from __future__ import annotations

import ast
import importlib.util
import operator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple, Optional


class Need(NamedTuple):
    key: str
    label: str


@dataclass(frozen=True)
class RuleInfo:
    """What the listing shows of one rule: the fields of a RuleSpec that need no import."""
    name: str
    code: str
    requires: tuple[Need, ...]
    doc: str
    defaults: tuple[tuple[str, Any], ...]

    @property
    def summary(self) -> str:
        """The docstring's first line, after the "name:" prefix."""
        lines = self.doc.splitlines()
        first = lines[0] if lines else ""
        return first.split(":", 1)[1].strip() if ":" in first else first

    def thresholds(self) -> dict[str, Any]:
        return dict(self.defaults)


class _NotLiteral(Exception):
    pass


def all_rules() -> list:
    """The registered rules, in registration order (RuleInfo, or RuleSpec if imported)."""
    try:
        return _read()
    except (_NotLiteral, OSError, SyntaxError, ValueError, KeyError, StopIteration):
        from tracelab.app.engine import all_rules as imported
        return imported()


def find_rule(key: str) -> Optional[Any]:
    from tracelab.core.config import find_spec
    return find_spec(key, all_rules())


def _source(module: str) -> Path:
    spec = importlib.util.find_spec(module)  # imports the parent package only
    if spec is None or not spec.origin:
        raise _NotLiteral(module)
    return Path(spec.origin)


def _read() -> list[RuleInfo]:
    init = _source("tracelab.analyzers")
    tree = ast.parse(init.read_text(encoding="utf-8"))
    origin: dict[str, str] = {}
    order: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module:
            origin.update({a.asname or a.name: node.module for a in node.names})
        elif isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "RULES" for t in node.targets):
            if not isinstance(node.value, ast.List):
                raise _NotLiteral("RULES")
            order = [_name(e) for e in node.value.elts]
    needs = _needs(_source("tracelab.core.schema"))
    return [_rule(init.parent / f"{origin[n].rsplit('.', 1)[1]}.py", n, needs) for n in order]


def _name(node: ast.AST) -> str:
    if not isinstance(node, ast.Name):
        raise _NotLiteral(ast.dump(node))
    return node.id


def _needs(schema: Path) -> dict[str, Need]:
    tree = ast.parse(schema.read_text(encoding="utf-8"))
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Needs")
    out = {}
    for node in cls.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            args = [ast.literal_eval(a) for a in node.value.args]
            out[_name(node.targets[0])] = Need(*args)
    return out


def _rule(path: Path, func: str, needs: dict[str, Need]) -> RuleInfo:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == func)
    deco = next(d for d in fn.decorator_list
                if isinstance(d, ast.Call) and isinstance(d.func, ast.Name) and d.func.id == "rule")
    kw = {k.arg: k.value for k in deco.keywords}
    requires = kw.get("requires")
    if requires is not None and not isinstance(requires, ast.Tuple):
        raise _NotLiteral("requires")
    reqs = tuple(needs[_attr(e)] for e in (requires.elts if requires is not None else ()))
    defaults = []
    for arg, default in zip(fn.args.kwonlyargs, fn.args.kw_defaults):
        if arg.arg == "baseline":
            continue
        if default is None:
            raise _NotLiteral(arg.arg)
        defaults.append((arg.arg, _literal(default, arg.arg)))
    doc = ast.get_docstring(tree) or ast.get_docstring(fn) or ""
    return RuleInfo(ast.literal_eval(kw["name"]), ast.literal_eval(kw["code"]), reqs, doc,
                    tuple(defaults))


_ARITHMETIC = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
               ast.Div: operator.truediv, ast.Pow: operator.pow}


def _literal(node: ast.AST, what: str) -> Any:
    """A literal, or arithmetic on number literals (`1 / 3`), as Python would evaluate it."""
    if isinstance(node, ast.BinOp) and type(node.op) in _ARITHMETIC:
        return _ARITHMETIC[type(node.op)](_literal(node.left, what), _literal(node.right, what))
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError):
        raise _NotLiteral(what) from None


def _attr(node: ast.AST) -> str:
    if not (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
            and node.value.id == "Needs"):
        raise _NotLiteral(ast.dump(node))
    return node.attr
