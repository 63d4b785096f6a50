"""dbt's costs per command that an in-process build keeps or skips (`warehouse/dbt_shortcuts.py`):
each gives what dbt's own code gives."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dagster_project.warehouse import catalog, dbt_shortcuts, project
from tests.warehouse.test_project import _build, _policies


@pytest.fixture(scope="module")
def parsed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    """A home and the project as dbt parsed it for its workspace (one parse for the module)."""
    home = tmp_path_factory.mktemp("parsed") / "home"
    with catalog.workspace(home) as ws:
        return home, project._parsed(ws.target, home, ws.database)


def test_the_names_index_selects_the_nodes_dbt_selects(parsed: tuple[Path, Any]) -> None:
    """`_shortcuts`' selection: every way a build or a user names nodes (a leaf name, a dotted fqn with
    or without the package, a folder, a wildcard, a name nothing has), over every node and over
    a part of them, gives what dbt's own `fqn:` method gives."""
    from dbt.graph.selector_methods import MethodManager, MethodName

    home, manifest = parsed
    dbt_own = MethodManager.SELECTOR_METHODS[MethodName.FQN]
    indexed = dbt_shortcuts._indexed_fqn_method(dbt_own)
    nodes = {**manifest.nodes, **manifest.unit_tests}
    names: set[str] = {"benchlake", "rynn_vp", "no_such_node", "benchlake.no_such_folder",
                       "rvp_*", "benchlake.rynn_vp.*", "*", "rynn_vp.marts", "marts"}
    for node in nodes.values():
        names |= {node.fqn[-1], ".".join(node.fqn), ".".join(node.fqn[1:]),
                  ".".join(node.fqn[:-1]), ".".join(node.fqn[1:-1])}
    everything = set(manifest.nodes) | set(manifest.sources) | set(manifest.unit_tests)
    some = {uid for i, uid in enumerate(sorted(everything)) if i % 3}
    compared = 0
    for included in (everything, some):
        theirs, ours = dbt_own(manifest, None, []), indexed(manifest, None, [])
        for name in sorted(names):
            expected = set(theirs.search(included, name))
            assert set(ours.search(included, name)) == expected, name
            compared += bool(expected)
    assert compared > len(nodes)  # most names select something
    # and a build names its nodes through it (by dotted fqn, as `_build` of the assets does)
    seed = "seed.benchlake.vv_scoring_policies"
    with catalog.workspace(home) as ws:
        done = project.build(["build", "--select", ".".join(manifest.nodes[seed].fqn),
                              "--indirect-selection", "empty"],
                             home=home, database=ws.database, target=ws.target)
    assert [r["unique_id"] for r in done.results] == [seed]
    assert MethodManager.SELECTOR_METHODS[MethodName.FQN] is dbt_own  # restored after the build


def test_the_shortcuts_give_what_dbt_gives(parsed: tuple[Path, Any]) -> None:
    """`_shortcuts`' other two: the graph summary of the project's graph (with and without the
    test edges of a build) and the module named as a behavior flag's source are dbt's own; the
    block restores dbt's code."""
    from dbt.compilation import Linker
    from dbt_common.behavior_flags import BehaviorFlagRendered

    _, manifest = parsed
    linker = Linker()
    linker.link_graph(manifest)
    assert dbt_shortcuts._graph_summary(linker, manifest) == linker.get_graph_summary(manifest)
    manifest.build_parent_and_child_maps()
    linker.add_test_edges(manifest)
    summary = linker.get_graph_summary(manifest)
    assert dbt_shortcuts._graph_summary(linker, manifest) == summary
    assert {n["type"] for n in summary.values()} >= {"model", "seed", "test", "source"}

    flag = {"name": "some_flag", "default": False, "description": "a flag"}
    theirs = BehaviorFlagRendered(flag, {})._behavior_change_event.flag_source
    original = BehaviorFlagRendered.__dict__["_default_source"]
    with dbt_shortcuts._shortcuts():
        assert BehaviorFlagRendered.__dict__["_default_source"] is not original
        ours = BehaviorFlagRendered(flag, {})._behavior_change_event.flag_source
    assert ours == theirs == __name__
    assert BehaviorFlagRendered.__dict__["_default_source"] is original
    assert Linker.get_graph_summary is not dbt_shortcuts._graph_summary


def test_the_kept_templates_are_the_code_jinja_compiles(tmp_path: Path) -> None:
    """`_compiled_templates`: a build keeps the code of the templates it compiled; the next
    build (as a new process would: the file read back) takes every one from there and builds
    the same rows; a kept template is the code Jinja compiles from its source, for both of dbt's
    environments; a torn file is compiled again; dbt's environments compile as Jinja's after."""
    import jinja2
    from dbt_common.clients import jinja as dbt_jinja

    home = tmp_path / "home"
    target = catalog.Workspace(home).target
    _build(home)
    _build(home)  # the seed is there now: it is truncated, by macros the first did not call
    [kept] = target.glob("jinja-code-*.marshal")
    written, first = kept.stat().st_mtime_ns, _policies(home)
    _build(home)  # every template read back: the file is not written again
    assert kept.stat().st_mtime_ns == written and _policies(home) == first

    source = "{% for c in cols %}{{ c | upper }}{% if not loop.last %}, {% endif %}{% endfor %}"
    for native in (False, True):
        env = dbt_jinja.get_environment(native=native)
        fresh = jinja2.Environment.compile(env, source)
        with dbt_shortcuts._compiled_templates(target):  # compiled and kept
            assert env.compile(source) == fresh
        with dbt_shortcuts._compiled_templates(target):  # read back
            assert env.compile(source) == fresh
            rendered = dbt_jinja.get_template(source, {}, native=native).render({"cols": ["a", "b"]})
        assert rendered == "A, B"
    kept.write_bytes(b"torn")
    _build(home)
    assert kept.read_bytes() != b"torn" and _policies(home) == first
    for kind in (dbt_jinja.MacroFuzzEnvironment, dbt_jinja.NativeSandboxEnvironment):
        assert kind.compile is jinja2.Environment.compile


def test_events_no_logger_writes_are_not_made() -> None:
    """`_shortcuts`' events: a debug event below every logger's level is not made into a
    message (no logger writes it); what the loggers write is dbt's, and info and above reach
    the callbacks as with dbt's own code, whatever the loggers' levels. A logger at debug gets
    every debug event."""
    import io

    from dbt_common.events.base_types import EventLevel
    from dbt_common.events.event_manager import EventManager
    from dbt_common.events.logger import LineFormat, LoggerConfig
    from dbt_common.events.types import Note, SystemExecutingCmd

    def fired(fire: Any, level: EventLevel) -> tuple[list[str], str]:
        manager, out, seen = EventManager(), io.StringIO(), []
        manager.add_logger(LoggerConfig(name=f"test-{level}-{id(out)}", level=level,
                                        line_format=LineFormat.Json, output_stream=out))
        manager.add_callback(lambda msg: seen.append(f"{msg.info.level} {msg.info.name}"))
        for e in (SystemExecutingCmd(cmd=["a"]), Note(msg="one"), SystemExecutingCmd(cmd=["b"]),
                  Note(msg="two")):
            fire(manager, e)
        fire(manager, Note(msg="three"), EventLevel.ERROR)
        fire(manager, SystemExecutingCmd(cmd=["c"]), EventLevel.WARN)
        lines = [line.split('"msg": ')[1].split(",")[0] for line in out.getvalue().splitlines()]
        return seen, "\n".join(lines)

    theirs_fire = EventManager.fire_event
    ours_fire = dbt_shortcuts._logged_events_only(theirs_fire)
    theirs, ours = fired(theirs_fire, EventLevel.INFO), fired(ours_fire, EventLevel.INFO)
    assert ours[1] == theirs[1] and '"one"' in ours[1] and '"three"' in ours[1]
    assert ours[0] == [s for s in theirs[0] if not s.startswith("debug")]
    assert "warn SystemExecutingCmd" in ours[0] and len(theirs[0]) == len(ours[0]) + 2
    debug_theirs, debug_ours = fired(theirs_fire, EventLevel.DEBUG), fired(ours_fire,
                                                                             EventLevel.DEBUG)
    assert debug_ours == debug_theirs and "debug SystemExecutingCmd" in debug_ours[0]
    with dbt_shortcuts._shortcuts():
        assert EventManager.fire_event is not theirs_fire
    assert EventManager.fire_event is theirs_fire
