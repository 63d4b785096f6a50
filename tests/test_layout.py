"""The README's "finding things" rule, checked for every table: a raw table's producer, its dbt
source and staging model, a view's SQL and YAML, and each domain's tests, one hop each."""

import dagster as dg
import yaml

from dagster_project.runner import definitions
from dagster_project.settings import PROJECT_ROOT, SQL_DIR
from dagster_project.warehouse.catalog import nodes

DOMAINS = {"rvp_": "rynn_vp", "vv_": "video_val"}
# The raw table no asset writes (the run markers: every asset as it starts and finishes): its
# dbt source and view exist, its writers are named in sql/README.md.
SHARED_RAW = {"status_markers": "warehouse"}
# The status markers are read directly by the one warehouse view (no staging layer needed).
STAGING_EXCEPTIONS = {"status_markers": "benchlake_status"}


def _domain(table: str) -> str:
    return SHARED_RAW.get(table) or next(d for p, d in DOMAINS.items() if table.startswith(p))


def _sources(domain: str) -> set[str]:
    folder = SQL_DIR / "models" / domain
    found = set()
    for path in folder.rglob("_sources.yml"):
        for source in yaml.safe_load(path.read_text())["sources"]:
            found |= {table["name"] for table in source["tables"]}
    return found


def test_every_raw_table_has_a_producer_a_source_and_a_staging_view():
    graph = definitions().resolve_asset_graph()
    raw = [k for k in graph.get_all_asset_keys() if k.path[-1].startswith("raw_")]
    assert len(raw) > 25
    for key in raw:
        table = key.path[-1].removeprefix("raw_")
        domain = _domain(table)
        node = graph.get(key)
        if table not in SHARED_RAW:
            module = node.assets_def.op.compute_fn.decorated_fn.__module__
            assert module == f"dagster_project.defs.{domain}.assets", (table, module)
        assert table in _sources(domain), table  # its dbt source (the key is raw_<source>)
        staging = STAGING_EXCEPTIONS.get(table, f"stg_{table}")
        model = dg.AssetKey(staging)
        assert model in node.child_keys or any(
            model in graph.get(c).child_keys for c in node.child_keys), (table, staging)
        sub = "" if table in STAGING_EXCEPTIONS else "staging"
        assert (SQL_DIR / "models" / domain / sub / f"{staging}.sql").exists(), staging


def test_every_view_has_its_sql_and_yaml_in_its_layer():
    layers = {"stg_": "staging", "int_": "intermediate"}
    for view in (n for n in nodes() if n.resource_type == "model"):
        [sql] = list((SQL_DIR / "models").rglob(f"{view.name}.sql"))
        assert sql.with_suffix(".yml").exists(), view.name
        layer = next((v for p, v in layers.items() if view.name.startswith(p)), "marts")
        if sql.parent.parent.name != "models":  # warehouse/ has no layers (one view)
            assert sql.parent.name == layer, (view.name, sql)


def test_each_domain_has_its_logic_wiring_and_tests():
    package = PROJECT_ROOT / "dagster_project"
    for domain in ("rynn_vp", "video_val"):
        assert (package / domain).is_dir()
        assert (package / "defs" / domain / "assets.py").is_file()
        tests = PROJECT_ROOT / "tests" / domain
        assert tests.is_dir() and list(tests.glob("test_*.py")), domain
    # defs/ holds wiring only, in role files
    roles = {"assets.py", "sources.py", "checks.py", "sensors.py", "jobs.py", "schedules.py",
             "resources.py", "loggers.py", "__init__.py"}
    for path in (package / "defs").rglob("*.py"):
        assert path.name in roles, path
    # no module name appears twice in the package or beside it in the demo generator (one name
    # per concept)
    modules = [*package.rglob("*.py"), *(PROJECT_ROOT / "benchlake_demo").rglob("*.py")]
    names = [p.stem for p in modules if "defs" not in p.parts and p.stem != "__init__"]
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)


def test_no_module_is_large():
    big = {str(p.relative_to(PROJECT_ROOT)): p.stat().st_size
           for p in (PROJECT_ROOT / "dagster_project").rglob("*.py")
           if p.stat().st_size > 24_000}
    assert not big, big

