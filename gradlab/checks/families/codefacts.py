"""What a Function's own code says about the inputs it handles: the strings an argument is
compared with (a `reduction` of 'mean', 'sum' or 'none') and the thresholds values are
compared with (a splat skipped below alpha 1/255).  The search feeds the other settings and
values on both sides of each threshold (inputspace's choice axes and `thresholds` kind): a
branch the author wrote is a call the Function is meant for, which its case may never make.

Read from the source of the Function's methods (a wrapper's source and the Functions it
names), with names resolved in their module; code without source (a compiled op, a
torch.library op) says nothing.  Literal annotations of forward's parameters count too, and
torch's own enumerated string arguments (TORCH_CHOICES) for a value of theirs.
"""

from __future__ import annotations

import ast
import functools
import inspect
import math
import numbers
import textwrap
import typing
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import torch

#: torch's enumerated string arguments: where a case passes one of a set, the others are
#: calls its callers make as readily (reduction, interpolation, padding and grid modes).
TORCH_CHOICES = (
    ("mean", "sum", "none"),
    ("nearest", "linear", "bilinear", "bicubic", "trilinear", "area", "nearest-exact"),
    ("zeros", "border", "reflection"),
    ("constant", "reflect", "replicate", "circular"),
    ("valid", "same"),
    ("fan_in", "fan_out"),
)
#: The most settings of one string argument a search tries (the cost stays a few points).
MAX_CHOICES = 6
#: How far either side of a threshold the planted values lie (relative): clear of the
#: threshold itself, where `>` and `>=` are both right, by more than a nudge (domain.NUDGE).
THRESHOLD_SIDE = 1e-2
#: The most thresholds one Function contributes (the first found, in source order).
MAX_THRESHOLDS = 4


@dataclass(frozen=True)
class CodeFacts:
    """The settings of each string argument (its position, or its name as a keyword: others
    than the case's) and the thresholds (non-zero, non-integer numbers) its code compares
    values with."""

    choices: tuple[tuple[int | str, tuple[str, ...]], ...] = ()
    thresholds: tuple[float, ...] = ()


#: What code without source, or with nothing to say, tells.
NO_FACTS = CodeFacts()


def code_facts(fn: Callable[..., Any], ref: Callable[..., Any] | None,
               args: tuple[Any, ...], kwargs: Mapping[str, Any] | None = None) -> CodeFacts:
    """The facts of `fn` (and of `ref`, the same math, for string settings) for a call with
    `args` and `kwargs`; empty where no source can be read."""
    trees = list(_trees(fn))
    ref_trees = list(_trees(ref)) if ref is not None else []
    names = _parameter_names(fn, len(args))
    strings: list[tuple[int | str, str, str]] = [  # (where, the parameter's name, the value)
        (i, names[i], a) for i, a in enumerate(args) if isinstance(a, str) and i < len(names)]
    strings += [(k, k, v) for k, v in (kwargs or {}).items() if isinstance(v, str)]
    choices = []
    for where, name, a in strings:
        found = [*_literal_choices(fn, name), *(s for t, _ in trees + ref_trees
                                                for s in _strings_of(t, name))]
        found += [s for group in TORCH_CHOICES if a in group for s in group]
        others = tuple(dict.fromkeys(s for s in found if s != a))[:MAX_CHOICES]
        if others:
            choices.append((where, others))
    thresholds = tuple(dict.fromkeys(c for t, env in trees for c in _compared_numbers(t, env)))
    return CodeFacts(tuple(choices), thresholds[:MAX_THRESHOLDS])


def threshold_values(thresholds: tuple[float, ...]) -> tuple[float, ...]:
    """The values planted for the thresholds: each just below and just above."""
    return tuple(c * (1 + s * THRESHOLD_SIDE) for c in thresholds for s in (-1, 1))


def _functions(fn: Callable[..., Any]) -> Iterator[Any]:
    """The code objects to read: a Function's methods (of its own classes, not torch's), or a
    callable and the Functions its code names."""
    owner = getattr(fn, "__self__", None)
    if isinstance(owner, type) and issubclass(owner, torch.autograd.Function):
        for cls in owner.__mro__:
            if cls.__module__.startswith("torch"):
                break
            for v in vars(cls).values():
                f = getattr(v, "__func__", v)
                if inspect.isfunction(f):
                    yield f
        return
    f = getattr(fn, "__func__", fn)
    if inspect.isfunction(f):
        yield f
        for name in f.__code__.co_names:  # a wrapper calling SomeFunction.apply
            v = f.__globals__.get(name)
            if isinstance(v, type) and issubclass(v, torch.autograd.Function):
                yield from _functions(v.apply)


def _trees(fn: Callable[..., Any] | None) -> Iterator[tuple[ast.AST, Mapping[str, Any]]]:
    """Each function's parsed source and the names it sees (its globals, its closure)."""
    if fn is None:
        return
    for f in _functions(fn):
        tree = _parsed(f)
        if tree is None:
            continue
        env = dict(f.__globals__)
        if f.__closure__:
            env.update(zip(f.__code__.co_freevars,
                           (_cell(c) for c in f.__closure__), strict=True))
        yield tree, env


@functools.lru_cache(maxsize=256)
def _parsed(f: Any) -> ast.AST | None:
    """A function's parsed source (cached: every case of an op reads the same code), or None
    without source (compiled, interactive) or for a lambda inside a larger expression."""
    try:
        return ast.parse(textwrap.dedent(inspect.getsource(f)))
    except (OSError, TypeError, SyntaxError, IndentationError):
        return None


def _cell(c: Any) -> Any:
    try:
        return c.cell_contents
    except ValueError:  # an empty cell
        return None


def _called(fn: Callable[..., Any]) -> tuple[Callable[..., Any], bool]:
    """What a call of `fn` runs: a Function's forward (True: it takes ctx first), or fn."""
    owner = getattr(fn, "__self__", None)
    return (owner.forward, True) if isinstance(owner, type) else (fn, False)


def _parameter_names(fn: Callable[..., Any], n: int) -> list[str]:
    """The names of the n positional arguments a call passes (forward's, past ctx, for a
    Function), or none where the signature cannot be read."""
    target, takes_ctx = _called(fn)
    try:
        params = list(inspect.signature(target).parameters.values())
    except (TypeError, ValueError):
        return []
    if takes_ctx:
        params = params[1:]
    names = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return names[:n]


def _literal_choices(fn: Callable[..., Any], name: str) -> list[str]:
    """The strings of a `Literal[...]` annotation on the parameter `name`."""
    try:
        hints = typing.get_type_hints(_called(fn)[0])
    except Exception:  # an annotation naming what the module cannot resolve
        return []
    hint = hints.get(name)
    if typing.get_origin(hint) is typing.Literal:
        return [s for s in typing.get_args(hint) if isinstance(s, str)]
    return []


def _mentions(node: ast.AST, name: str) -> bool:
    """The expression reads `name` (a parameter, or ctx.<name> where forward saved it)."""
    return any((isinstance(n, ast.Name) and n.id == name)
               or (isinstance(n, ast.Attribute) and n.attr == name) for n in ast.walk(node))


def _strings_of(tree: ast.AST, name: str) -> Iterator[str]:
    """String literals compared with `name` (==, !=, in a tuple), the keys of a dict looked up
    by it, and the patterns of a match on it."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(_mentions(s, name) for s in sides):
                for s in sides:
                    yield from _strings(s)
        elif isinstance(node, ast.Subscript) and isinstance(node.value, ast.Dict):
            if _mentions(node.slice, name):
                yield from (s for k in node.value.keys if k is not None for s in _strings(k))
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr == "get" and isinstance(node.func.value, ast.Dict)
              and node.args and _mentions(node.args[0], name)):
            yield from (s for k in node.func.value.keys if k is not None for s in _strings(k))
        elif isinstance(node, ast.Match) and _mentions(node.subject, name):
            for case in node.cases:
                yield from (s for p in ast.walk(case.pattern) if isinstance(p, ast.Constant)
                            for s in _strings(p))


def _strings(node: ast.AST) -> Iterator[str]:
    """The string constants of a literal, a tuple, list or set of them."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        yield node.value
    elif isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        for e in node.elts:
            yield from _strings(e)


def _compared_numbers(tree: ast.AST, env: Mapping[str, Any]) -> Iterator[float]:
    """The non-zero, non-integer numbers a comparison holds (x < 1e-8, a >= ALPHA_MIN, a
    module constant or arithmetic of constants): an integer is a size, a dim or a count far
    more often than a value's threshold, and 0 is the zeros kind's."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            for side in [node.left, *node.comparators]:
                v = _number(side, env)
                if v is not None and v != 0 and math.isfinite(v) and not float(v).is_integer():
                    yield float(v)


def _number(node: ast.AST, env: Mapping[str, Any]) -> float | None:
    """The value of a constant expression: a number, a name bound to one, +-*/ of them."""
    if isinstance(node, ast.Constant):
        v = node.value
    elif isinstance(node, ast.Name):
        v = env.get(node.id)
    elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        v = getattr(env.get(node.value.id), node.attr, None) if inspect.ismodule(
            env.get(node.value.id)) else None
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        v = _number(node.operand, env)
        v = -v if v is not None else None
    elif isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult,
                                                               ast.Div)):
        a, b = _number(node.left, env), _number(node.right, env)
        if a is None or b is None or (isinstance(node.op, ast.Div) and b == 0):
            return None
        ops = {ast.Add: a + b, ast.Sub: a - b, ast.Mult: a * b}
        v = ops.get(type(node.op), a / b if b else None)
    else:
        return None
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        return None
    return float(v) if not isinstance(v, int) else (v if v else None)
