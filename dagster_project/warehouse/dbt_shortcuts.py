"""What an in-process dbt build (`project.build`) keeps or skips of dbt's costs per command,
each replaced, for the build only, by code that gives dbt's own result
(`tests/warehouse/test_dbt_shortcuts.py` compares each with dbt's): dbt's JSON schemas and the
code Jinja compiles its templates to, kept in the workspace's `target` (dbt builds both anew in
every process), and four costs that give nothing to a build in this process (`_shortcuts`).
Each block restores dbt's code after; if a dbt upgrade renames what is replaced, its first line
fails and every build test with it.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from dagster_project.tables import atomic_write_bytes


@contextlib.contextmanager
def in_process(target: Path) -> Iterator[None]:
    """Every shortcut of this module, for one build whose workspace's `target` it is."""
    with _json_schemas(target), _compiled_templates(target), _shortcuts():
        yield


_SCHEMAS = "json-schemas-{key}.json"
_TEMPLATES = "jinja-code-{key}.marshal"


def _versions_key(*dists: str) -> str:
    """A key of Python's version and those of the distributions `dists`."""
    return hashlib.sha256("\0".join(
        [sys.version] + [importlib.metadata.version(d) for d in dists]).encode()).hexdigest()[:24]


def keep_one(target: Path, pattern: str, path: Path, data: bytes) -> None:
    """`data` as `path` (of `pattern`'s files in `target`), the files of other keys removed:
    written whole or not at all (another process may read it at the same time)."""
    for old in target.glob(pattern.format(key="*")):
        if old != path:
            old.unlink(missing_ok=True)
    target.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, data)


@contextlib.contextmanager
def _json_schemas(target: Path) -> Iterator[None]:
    """dbt's JSON schemas of its project, profile and config classes, kept in the workspace's
    `target` once built. dbt validates its project and profile against them at the start of
    every command, and builds them anew in each process (mashumaro generating code for ~800
    dataclasses: ~0.3 s of every `benchlake materialize` that runs dbt). A schema is a function of
    the classes, so it is keyed by the versions of the packages that define and build them."""
    from dbt_common.dataclass_schema import dbtClassMixin

    path = target / _SCHEMAS.format(key=_versions_key(
        "dbt-core", "dbt-common", "dbt-adapters", "dbt-duckdb", "mashumaro"))
    try:
        known: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        known = {}
    original = dbtClassMixin.__dict__["json_schema"]
    built: dict[str, Any] = {}

    def json_schema(cls: type) -> Any:
        name = f"{cls.__module__}.{cls.__qualname__}"
        if name not in known:
            known[name] = built[name] = original.__func__(cls)
        return known[name]

    dbtClassMixin.json_schema = classmethod(json_schema)
    try:
        yield
    finally:
        dbtClassMixin.json_schema = original
        if built:
            keep_one(target, _SCHEMAS, path, json.dumps(known, sort_keys=True).encode())


# A project's templates are a few thousand at most: a file over this many holds sources no
# longer read (an edited project), and keeps only those of the build that wrote it.
_MAX_TEMPLATES = 20_000


@contextlib.contextmanager
def _compiled_templates(target: Path) -> Iterator[None]:
    """The Python code Jinja compiles dbt's templates to (each node's SQL and every macro it
    calls), kept in the workspace's `target` (`marshal`, as Jinja's own bytecode cache keeps
    it). dbt compiles every template it renders anew in each process: ~390 for a build of 85
    nodes, ~0.45 s of one core. The code is a function of the template's source and of the
    environment that compiles it (dbt's two kinds, their extensions), so it is looked up by
    those, for one version of Python, Jinja and dbt."""
    import marshal

    import jinja2
    from dbt_common.clients import jinja as dbt_jinja
    from jinja2.utils import internalcode

    kinds = (dbt_jinja.MacroFuzzEnvironment, dbt_jinja.NativeSandboxEnvironment)
    path = target / _TEMPLATES.format(key=_versions_key("jinja2", "dbt-common", "dbt-core"))
    try:
        known = marshal.loads(path.read_bytes())
        known = known if isinstance(known, dict) else {}
    except (OSError, ValueError, EOFError, TypeError):
        known = {}
    used: dict[str, Any] = {}
    added = 0

    @internalcode
    def compile(self: Any, source: Any, name: str | None = None, filename: str | None = None,
                raw: bool = False, defer_init: bool = False) -> Any:
        nonlocal added
        if raw or not isinstance(source, str) or dbt_jinja.MACRO_DEBUGGING:
            return original(self, source, name, filename, raw, defer_init)
        key = hashlib.sha256("\0".join([type(self).__qualname__, *sorted(self.extensions),
                                        repr((name, filename, defer_init)), source]
                                       ).encode()).hexdigest()
        code = known.get(key)
        if code is None:
            code = known[key] = original(self, source, name, filename, raw, defer_init)
            added += 1
        used[key] = code
        return code

    original = jinja2.Environment.compile
    if any(kind.compile is not original for kind in kinds):  # a dbt of its own: not kept
        yield
        return
    for kind in kinds:
        kind.compile = compile
    try:
        yield
    finally:
        for kind in kinds:
            del kind.compile  # Jinja's again
        if added:
            keep_one(target, _TEMPLATES, path,
                  marshal.dumps(known if len(known) <= _MAX_TEMPLATES else used))


@contextlib.contextmanager
def _shortcuts() -> Iterator[None]:
    """Four costs of every dbt command that give nothing to an in-process build, replaced for
    the block by code that gives dbt's own result (`tests/warehouse/test_project.py` compares
    each with dbt's), ~0.7 s of a build of 85 nodes on 2 cores:
    - the `fqn:` selection method (what a bare name or dotted path selects) answers from an
      index of the names (`_indexed_fqn_method`): dbt compares every node of the project with
      each name given, twice (a build naming 85 nodes: 240,000 comparisons, ~0.5 s);
    - the module that declared a behavior flag (named in dbt's warning if the flag is off) is
      found by walking the frames, where dbt's `inspect.stack()` reads the source lines of every
      frame of the stack, for each flag (~0.15 s);
    - the graph summary dbt writes for diagnostics (`graph_summary.json`) reads each node's
      type, where dbt serializes every node, twice, to read it (~0.1 s);
    - an event below the level of every logger is not made into a message nobody writes
      (`_logged_events_only`)."""
    from dbt.compilation import Linker
    from dbt.graph.selector_methods import MethodManager, MethodName
    from dbt_common.behavior_flags import BehaviorFlagRendered
    from dbt_common.events.event_manager import EventManager

    methods = MethodManager.SELECTOR_METHODS
    saved = (methods[MethodName.FQN], BehaviorFlagRendered.__dict__["_default_source"],
             Linker.get_graph_summary, EventManager.fire_event)
    methods[MethodName.FQN] = _indexed_fqn_method(saved[0])
    BehaviorFlagRendered._default_source = staticmethod(_flag_source)
    Linker.get_graph_summary = _graph_summary
    EventManager.fire_event = _logged_events_only(saved[3])
    try:
        yield
    finally:
        (methods[MethodName.FQN], BehaviorFlagRendered._default_source,
         Linker.get_graph_summary, EventManager.fire_event) = saved


def _logged_events_only(fire: Any) -> Any:
    """`EventManager.fire_event` for events no logger writes: a debug (or test) event below
    the level of every logger is not made into a message at all. dbt makes a protobuf message
    of every event and a formatted line for each logger, then drops the line below the logger's
    level: a build of 85 nodes fires ~1,750 debug events that way (~0.6 s of its threads), and
    its log file is at info. Info and above always fire (the build's results are read from info
    events, its errors from error ones)."""
    from dbt_common.events.base_types import EventLevel

    rank = {EventLevel.DEBUG: 0, EventLevel.TEST: 1, EventLevel.INFO: 2, EventLevel.WARN: 3,
            EventLevel.ERROR: 4}

    def fire_event(self: Any, e: Any, level: Any = None, node: Any = None,
                   force_warn_or_error_handling: bool = False) -> None:
        below = min([rank[EventLevel.INFO], *(rank[lg.level] for lg in self.loggers)])
        if rank.get(level or e.level_tag(), below) >= below or force_warn_or_error_handling:
            fire(self, e, level, node, force_warn_or_error_handling)

    return fire_event


def _flag_source() -> str:
    """`BehaviorFlagRendered._default_source`: the first module up the stack but dbt's
    `behavior_flags` (the caller that declared the flag)."""
    frame = sys._getframe(1)
    while frame is not None:
        name = frame.f_globals.get("__name__")
        if name and name != "dbt_common.behavior_flags":
            return name
        frame = frame.f_back
    return "Unknown"


def _graph_summary(self: Any, manifest: Any) -> dict[int, dict[str, Any]]:
    """`Linker.get_graph_summary`: per node of the graph (numbered in its order) its name, its
    type and the numbers of its successors."""
    index = {name: i for i, name in enumerate(self.graph)}
    summary: dict[int, dict[str, Any]] = {}
    for name, i in index.items():
        kind = manifest.expect(name).resource_type
        summary[i] = {"name": name, "type": getattr(kind, "value", kind)}
        successors = [index[n] for n in self.graph.successors(name)]
        if successors:
            summary[i]["succ"] = successors
    return summary


_WILDCARDS = frozenset("*?[]")


def _indexed_fqn_method(base: type) -> type:
    """A subclass of dbt's `QualifiedNameSelectorMethod` (`base`) whose search looks a name up
    in an index of every node's leaf name and dotted fqn prefixes (with and without the
    package), built once for the command's manifest (dbt makes a method per name given).
    Without a wildcard, dbt matches a name exactly there; versioned nodes (other rules) and
    wildcard names are always left to dbt's comparison."""
    built: list[Any] = []  # (manifest, names, versioned, nodes) of the last manifest indexed

    class Indexed(base):  # type: ignore[misc, valid-type]
        def _index(self) -> tuple[dict[str, list[int]], list[int], list[tuple[Any, Any]]]:
            if not built or built[0] is not self.manifest:
                nodes = list(self.non_source_nodes(_Everything()))
                names: dict[str, list[int]] = {}
                versioned = []
                for i, (_, node) in enumerate(nodes):
                    if node.is_versioned:
                        versioned.append(i)
                        continue
                    keys = {node.fqn[-1]}
                    for fqn in (node.fqn, node.fqn[1:]):
                        flat = [part for segment in fqn for part in segment.split(".")]
                        keys.update(".".join(flat[:k]) for k in range(1, len(flat) + 1))
                    for key in keys:
                        names.setdefault(key, []).append(i)
                built[:] = [self.manifest, names, versioned, nodes]
            return built[1], built[2], built[3]

        def search(self, included_nodes: Any, selector: str) -> Iterator[Any]:
            if not selector or _WILDCARDS & set(selector):
                yield from super().search(included_nodes, selector)
                return
            names, versioned, nodes = self._index()
            for i in sorted({*names.get(selector, ()), *versioned}):
                unique_id, node = nodes[i]
                if unique_id in included_nodes and self.node_is_match(
                        selector, node.fqn, node.is_versioned):
                    yield unique_id

    return Indexed


class _Everything:
    """A set that holds every node (to list them all with dbt's own iterators)."""

    def __contains__(self, item: object) -> bool:
        return True
