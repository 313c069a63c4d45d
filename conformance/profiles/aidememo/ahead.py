"""The identities a check will ask for first, read from its code, so a pool can provision them ahead.

Most checks open with ``world.project(writers=(...), readers=(...))``, directly or through a
helper of their module taking the world; its ids are the world's first (the project, then each
actor in order), derived exactly as ``World.project`` derives them for the check's declared isolation (a
shared identity is expected once, for the first check that will ask for it). Anything else first (another
minting call, a world handed to code this cannot follow, arguments that are not literal) means
no expectation, and the check provisions on demand as before. A wrong expectation costs one
identity nobody uses, in the run's namespace: the pool hands an identity out only to a check that
asks for exactly it.
"""

from __future__ import annotations

import ast
import functools
import inspect
import linecache
import textwrap
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Final, TypeGuard

from conformance.profile import Upcoming
from conformance.profiles.aidememo.isolation import Isolation, isolation_of, own_actors, shares_actor, shared_tag
from conformance.world import minted_id

__all__ = ["expected_identities", "first_project", "project_identities"]

_MINTING: Final = frozenset({"new_id", "bound", "after_lease_expiry", "project"})
_DEPTH: Final = 3  # helpers calling helpers: deeper is left to demand
Actors = tuple[tuple[str, ...], tuple[str, ...]]  # (writers, readers)


def project_identities(run_tag: str, check_tag: str, first: int, writers: tuple[str, ...],
                       readers: tuple[str, ...], level: Isolation = Isolation.PROJECT,
                       own: frozenset[str] | None = None) -> tuple[str, list[dict[str, str]]]:
    """(project id, identities) of a project whose id is the check's ``first``-th minted id, as
    ``level`` hands it out: a fresh project, fresh actors in the process's shared project (only
    those in ``own`` when given), or the actors of its shared (or shared read-only) project, one per
    name and role for every check of the process."""
    tenant = f"t-{run_tag}"  # one tenant per run: the run's namespace
    shared, reads = shared_tag(), level is Isolation.READS
    fresh = level is Isolation.PROJECT
    project_id = minted_id("p", run_tag, check_tag, first) if fresh else minted_id("p", run_tag, shared, 1 + reads)
    roles = [(n, "writer") for n in writers] + [(n, "reader") for n in readers]

    def actor(n: int, name: str, role: str) -> str:
        if shares_actor(level, own, name):  # one per name and role in each shared project
            return minted_id(name, run_tag, shared, 2 * reads + (1 if role == "writer" else 2))
        return minted_id(name, run_tag, check_tag, first + n)

    return project_id, [{"tenant": tenant, "project": project_id, "actor": actor(i, name, role), "role": role}
                        for i, (name, role) in enumerate(roles, 1)]


def expected_identities(upcoming: list[Upcoming], run_tag: str, *, fresh: bool = False,
                        known: Callable[[Mapping[str, str]], bool] = lambda identity: False
                        ) -> Iterator[tuple[str, Mapping[str, str]]]:
    """(check, identity) for each upcoming check whose first project can be read, lazily, in order;
    a shared identity once, for the first check that will ask for it, and only while not ``known``
    (provisioned already)."""
    seen: set[tuple[tuple[str, str], ...]] = set()
    for check in upcoming:
        level = isolation_of(check.markers, fresh=fresh)
        actors = first_project(check.function) if check.function is not None and level is not Isolation.NONE else None
        if actors is None:
            continue
        own = own_actors(check.markers, fresh=fresh)
        _, identities = project_identities(run_tag, check.check_tag, 1, *actors, level, own)
        for name, identity in zip([*actors[0], *actors[1]], identities):
            key = tuple(sorted(identity.items()))
            if shares_actor(level, own, name) and (key in seen or known(identity)):
                continue
            seen.add(key)
            yield check.check, identity


@functools.cache  # a parametrized check is one function for many items: read its source once
def first_project(function: Callable[..., Any]) -> Actors | None:
    """The actors of the project ``function`` (a check taking ``world``) asks for first, if it can be read."""
    node = _parse(function)
    if node is None or "world" not in [a.arg for a in node.args.args]:
        return None
    return _scan(node, "world", getattr(function, "__globals__", {}), _DEPTH)


def _parse(function: Callable[..., Any]) -> ast.FunctionDef | None:
    """The definition of ``function``: from its module's source, parsed once for all the module's
    checks and helpers (``inspect.getsource`` tokenized each function's lines anew, a tenth of a
    second of a served run's own CPU), or from its own source when it is not a module's function."""
    code, name = getattr(function, "__code__", None), getattr(function, "__qualname__", "")
    if code is not None:
        defined = _module_functions(code.co_filename).get(name)
        # The same definition (its first decorator's line): a later one of the same name starts elsewhere.
        starts = min([defined.lineno, *(d.lineno for d in defined.decorator_list)]) if defined else None
        if defined is not None and starts == code.co_firstlineno:
            return defined
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    except (OSError, TypeError, SyntaxError):
        return None
    node = tree.body[0] if tree.body else None
    return node if isinstance(node, ast.FunctionDef) else None


@functools.cache
def _module_functions(filename: str) -> Mapping[str, ast.FunctionDef]:
    """The functions a source file defines at its top level, by name."""
    try:
        tree = ast.parse("".join(linecache.getlines(filename)))
    except (SyntaxError, ValueError):
        return {}
    return {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}


def _scan(node: ast.FunctionDef, world: str, names: Mapping[str, Any], depth: int) -> Actors | None:
    calls = sorted((n for n in ast.walk(node) if isinstance(n, ast.Call)), key=lambda n: (n.lineno, n.col_offset))
    for call in calls:
        func = call.func
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == world:
            if func.attr == "project":
                return _actors(call, names)
            if func.attr in _MINTING:
                return None
            continue
        passed = [i for i, arg in enumerate(call.args) if isinstance(arg, ast.Name) and arg.id == world]
        if not passed and not any(isinstance(k.value, ast.Name) and k.value.id == world for k in call.keywords):
            continue
        helper = names.get(func.id) if isinstance(func, ast.Name) else None
        inner = _parse(helper) if callable(helper) and depth > 0 and len(passed) == 1 else None
        if inner is None or passed[0] >= len(inner.args.args):
            return None
        return _scan(inner, inner.args.args[passed[0]].arg, getattr(helper, "__globals__", names), depth - 1)
    return None


def _actors(call: ast.Call, names: Mapping[str, Any]) -> Actors | None:
    values: dict[str, object] = {"writers": ("writer",), "readers": ()}
    for name, arg in zip(("writers", "readers"), call.args):
        values[name] = _value(arg, names)
    for keyword in call.keywords:
        if keyword.arg not in values:
            return None
        values[keyword.arg] = _value(keyword.value, names)
    writers, readers = values["writers"], values["readers"]
    if not (_names(writers) and _names(readers)):
        return None
    return writers, readers


def _value(node: ast.expr, names: Mapping[str, Any]) -> object:
    if isinstance(node, ast.Name):
        return names.get(node.id)
    try:
        return ast.literal_eval(node)
    except ValueError:
        return None


def _names(value: object) -> TypeGuard[tuple[str, ...]]:
    return isinstance(value, tuple) and all(isinstance(v, str) for v in value)
