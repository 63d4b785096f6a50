"""Judge packets: what each judge role reads for one evaluation, as a JSON file plus the evidence
files it names. benchlake prepares these; the judging itself runs outside (an LLM judge in a
harness), and its records come back through JUDGMENTS_DIR.

Role prompts: a folder named by JUDGE_PROMPTS (laid out as `assets/prompts/v1/`: `VERSION` and
one `<role>.md` per role); else, when the Rynn-VP snapshot carries the Skill's frozen prompts
(`skills/rynn-vp-eval/references/prompts/`), those files unchanged; otherwise the project's own
versioned templates under `assets/prompts/<version>/`. The prompt text is never
edited here: the task's values travel beside it as `variables`.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from dagster_project.dropfolder import file_sha256
from dagster_project.parts import PartStore, digest
from dagster_project.rynn_vp.evidence import EVIDENCE_POLICY_VERSION, EVIDENCE_TABLES
from dagster_project.rynn_vp.packet_keys import PACKET_INPUTS, unit_digests
from dagster_project.rynn_vp.snapshot import snapshot_root
from dagster_project.settings import ASSETS_DIR, Settings
from dagster_project.tables import (
    atomic_write_bytes,
    raw_schema,
    remove_stale_temps,
    resolved_path,
    rows_to_table,
    stored_path,
    table_path,
)

GT_ROLE = "gt_compilation"
CANDIDATE_ROLES = ("observer", "vr_vq_judge", "hallucination_auditor", "pi_judge", "critic")
ROLES = (GT_ROLE, *CANDIDATE_ROLES)
SKILL_PROMPTS = Path("skills/rynn-vp-eval/references/prompts")
PROJECT_PROMPTS = ASSETS_DIR / "prompts" / "v1"
PACKET_FORMAT = 1


@dataclass(frozen=True)
class Prompts:
    texts: dict[str, str]  # role -> prompt text, unchanged
    files: dict[str, str]  # role -> the file it came from
    version: str
    source: str  # "folder" (JUDGE_PROMPTS), "skill" or "project"


def prompts_version(prompts: Prompts) -> str:
    """What the packets and the GT cache keys depend on of the prompts: version and texts."""
    return hashlib.sha256(_canonical([prompts.version, prompts.source, prompts.texts])
                          ).hexdigest()[:32]


def _role_file(folder: Path, role: str) -> Path | None:
    """The Skill's prompt file for a role: an exact stem, else a stem containing the role name."""
    files = sorted(p for p in folder.iterdir() if p.is_file() and not p.name.startswith("."))
    for p in files:
        if p.stem.lower() == role:
            return p
    for p in files:
        if role.replace("_", "") in p.stem.lower().replace("_", "").replace("-", ""):
            return p
    return None


def load_prompts(snapshot_root: Path | None, folder: Path | None = None) -> Prompts:
    skill = snapshot_root / SKILL_PROMPTS if snapshot_root else None
    if folder is None and skill is not None and skill.is_dir():
        files = {role: _role_file(skill, role) for role in ROLES}
        found = {r: p for r, p in files.items() if p is not None}
        digest = hashlib.sha256()
        for role, path in sorted(found.items()):
            digest.update(role.encode() + b"\0" + path.read_bytes())
        return Prompts({r: p.read_text(encoding="utf-8") for r, p in found.items()},
                       {r: str(p) for r, p in found.items()},
                       f"rynn-vp-skill-{digest.hexdigest()[:12]}", "skill")
    base = folder or PROJECT_PROMPTS
    files = {role: base / f"{role}.md" for role in ROLES}
    missing = [p.name for p in (base / "VERSION", *files.values()) if not p.is_file()]
    if missing:
        raise FileNotFoundError(f"JUDGE_PROMPTS {base}: no {', '.join(missing)} there")
    version = (base / "VERSION").read_text(encoding="utf-8").strip()
    return Prompts({r: p.read_text(encoding="utf-8") for r, p in files.items()},
                   {r: str(p) for r, p in files.items()}, version,
                   "project" if folder is None else "folder")


def prompts_for(settings: Settings) -> Prompts:
    """The prompts in effect for a home: JUDGE_PROMPTS, else the Skill's when the acquired
    snapshot has them, else the project's."""
    home = settings.home
    root = snapshot_root(home)[0] if table_path(home, "rvp_snapshot").exists() else None
    return load_prompts(root, Path(settings.judge_prompts) if settings.judge_prompts else None)


def _canonical(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def _link_or_copy(src: Path, dest: Path) -> None:
    """Evidence files are immutable once written: a hard link costs nothing; copy otherwise."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    if dest.exists():
        if os.path.samefile(src, dest) or (dest.stat().st_size == src.stat().st_size
                                           and dest.read_bytes() == src.read_bytes()):
            return
        dest.unlink()
    try:
        os.link(src, dest)
    except OSError:
        shutil.copyfile(src, dest)


def write_packet(
    folder: Path,
    *,
    role: str,
    prompts: Prompts,
    header: dict[str, Any],
    variables: dict[str, Any],
    evidence: list[dict[str, Any]],
    storyboards: list[dict[str, Any]],
    gt_reference: dict[str, Any],
    sha256_of: Callable[[Path], str] | None = None,
    link: Callable[[Path, Path], None] | None = None,
) -> dict[str, Any]:
    """Write `<folder>/<role>.json` and the evidence files it names under `<folder>/evidence/`.

    The packet's `fingerprint` is the SHA-256 of its canonical JSON without that field; evidence
    files carry their own SHA-256, so the fingerprint covers their bytes too. `sha256_of`: the
    digest of an evidence file, `link` what puts it into the folder (caches, when several
    packets name the same files)."""
    sha256_of = sha256_of or file_sha256
    link = link or _link_or_copy
    manifest = []
    for item in evidence:
        src = Path(item["image_path"])
        name = f"evidence/{item['evidence_id'].split('#', 1)[1]}{src.suffix}"
        link(src, folder / name)
        manifest.append({
            "evidence_id": item["evidence_id"], "role": item["role"],
            "ordinal": item["ordinal"], "file": name,
            "sha256": sha256_of(src),
            "requested_s": item.get("requested_s"), "used_s": item.get("used_s"),
            "frame_index": item.get("frame_index"), "step_id": item.get("step_id"),
            "interval_ordinal": item.get("interval_ordinal"), "width": item["width"],
            "height": item["height"],
        })
    boards = []
    for b in storyboards:
        src = Path(b["image_path"])
        name = f"evidence/SB{b['storyboard_no']}{src.suffix}"
        link(src, folder / name)
        boards.append({"evidence_id": f"{b['evaluation_id']}#SB{b['storyboard_no']}",
                       "file": name, "sha256": sha256_of(src),
                       "panels": f"P{b['first_panel']:02d}-P{b['last_panel']:02d}",
                       "panel_count": b["panel_count"]})
    packet = {
        "packet_format": PACKET_FORMAT, **header, "role": role,
        "prompt": {"version": prompts.version, "source": prompts.source,
                   "file": Path(prompts.files[role]).name, "text": prompts.texts[role],
                   "variables": variables},
        "evidence": manifest, "storyboards": boards, "gt_compilation": gt_reference,
    }
    packet["fingerprint"] = hashlib.sha256(_canonical(packet)).hexdigest()
    path = folder / f"{role}.json"
    data = json.dumps(packet, indent=2, sort_keys=True, ensure_ascii=False).encode() + b"\n"
    if not (path.is_file() and path.read_bytes() == data):  # unchanged packets stay as they are
        atomic_write_bytes(path, data)
    return {"role": role, "packet_path": str(path), "packet_fingerprint": packet["fingerprint"],
            "n_evidence": len(manifest) + len(boards)}


def _rows(con: Any, sql: str, params: list | None = None) -> list[dict[str, Any]]:
    cur = con.execute(sql, params or [])
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]


def _grouped(rows: list[dict[str, Any]], key: str) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        out.setdefault(row[key], []).append(row)
    return out


# Bump when what a packet holds changes for the same inputs (PACKET_FORMAT is part of the key
# too): every packet part is then built again.
PACKETS_VERSION = "1"


@dataclass(frozen=True)
class _Unit:
    """The packets of one evaluation (its five roles) or of one case's GT compilation (label
    `_gt.<case_id>`), and how to write them."""

    label: str
    write: Callable[[], list[dict[str, Any]]]


def _prompt_key(prompts: Prompts, packets_dir: Path, home: Path) -> str:
    """What every packet's key holds of the prompts and of where the packets go."""
    return digest(PACKET_FORMAT, prompts.version, prompts.source, prompts.texts,
                  {r: Path(f).name for r, f in prompts.files.items()},
                  stored_path(str(packets_dir), home))


def _units(home: Path, packets_dir: Path, prompts: Prompts,
           system: str | None = None, case_id: str | None = None,
           labels: set[str] | None = None) -> list[_Unit]:
    """Every packet unit (optionally of one system and/or case, or only those `labels`
    name): the GT compilation packet of each case, then the five candidate roles of each
    evaluation, in the table's order."""
    from dagster_project.tables import connect_raw

    # With `labels`, only the rows of their cases are read: the evidence tables keep a part per
    # case, and an evaluation is `<system>/<case_id>`.
    case_ids = None if labels is None else sorted(
        {label.removeprefix("_gt.") if label.startswith("_gt.") else label.split("/", 1)[-1]
         for label in labels})
    con = connect_raw(home, PACKET_INPUTS, parts=None if case_ids is None
                      else dict.fromkeys(EVIDENCE_TABLES, case_ids))
    where = "true"
    if case_ids is not None:
        con.execute("CREATE TEMP TABLE wanted AS SELECT unnest(?::VARCHAR[]) AS case_id",
                    [case_ids])
        where = "case_id IN (SELECT case_id FROM wanted)"
    cases = {c["case_id"]: c for c in _rows(con, f"SELECT * FROM raw.rvp_cases WHERE {where}")}
    prints = {f["case_id"]: f for f in _rows(
        con, f"SELECT * FROM raw.rvp_gt_fingerprints WHERE {where}")}
    cached: dict[str, dict[str, Any]] = {}
    try:
        for g in _rows(con, "SELECT case_id, fingerprint, source_file, judge_run_id FROM "
                            f"raw.rvp_gt_compilations WHERE is_current AND {where} "
                            "ORDER BY source_file"):
            cached.setdefault(g["case_id"], g)
    except Exception:  # noqa: BLE001 - no judgments ingested yet: nothing is cached
        pass
    evaluations = [e for e in _rows(con, f"SELECT * FROM raw.rvp_evaluations WHERE {where} "
                                         "ORDER BY evaluation_id")
                   if (system is None or e["system"] == system)
                   and (case_id is None or e["case_id"] == case_id)]
    # Each table read once (not a query per case or evaluation: each would scan the table again).
    # The S0 and anchors of a case are the same files for all its evaluations; the first
    # evaluation's rows stand for them.
    shared_of = _grouped(_rows(
        con, "SELECT DISTINCT ON (case_id, role, ordinal) * FROM raw.rvp_evidence_frames "
             f"WHERE role IN ('S0', 'anchor') AND {where} "
             "ORDER BY case_id, role, ordinal, evaluation_id"), "case_id")
    intervals_of = _grouped(_rows(
        con, f"SELECT case_id, ordinal, \"interval\", label FROM raw.rvp_intervals WHERE {where} "
             "ORDER BY case_id, ordinal"), "case_id")
    evidence_of = _grouped(_rows(
        con, f"SELECT * FROM raw.rvp_evidence_frames WHERE {where} ORDER BY evaluation_id, "
             "CASE role WHEN 'S0' THEN 0 WHEN 'anchor' THEN 1 ELSE 2 END, ordinal"),
        "evaluation_id")
    boards_of = _grouped(_rows(
        con, f"SELECT * FROM raw.rvp_storyboards WHERE {where} "
             "ORDER BY evaluation_id, storyboard_no"), "evaluation_id")
    con.close()
    sha256_of = functools.cache(file_sha256)
    link = functools.cache(_link_or_copy)  # the five roles of an evaluation share one folder

    def gt_ref(cid: str) -> dict[str, Any]:
        fp = prints.get(cid, {}).get("fingerprint")
        hit = cached.get(cid)
        return {"fingerprint": fp, "cached": hit is not None,
                "source_file": hit["source_file"] if hit else None,
                "judge_run_id": hit["judge_run_id"] if hit else None}

    def variables(cid: str) -> dict[str, Any]:
        c = cases[cid]
        return {"case_id": cid, "instruction": c["instruction"],
                "explicit_plan": c["plan"] if c["has_explicit_plan"] else None}

    def finish(rows: list[dict[str, Any]], cid: str) -> list[dict[str, Any]]:
        ref = gt_ref(cid)
        for row in rows:
            row.update(prompt_version=prompts.version, prompt_source=prompts.source,
                       gt_fingerprint=ref["fingerprint"], gt_cached=ref["cached"])
        return rows

    def gt_unit(cid: str) -> _Unit:
        shared = shared_of.get(cid, [])
        intervals = [{k: i[k] for k in ("ordinal", "interval", "label")}
                     for i in intervals_of.get(cid, [])]
        header = {"case_id": cid, "system": None, "evaluation_id": None,
                  "gt_witness": {"planning": intervals, "anchors_from": "gt.mp4"}}
        gt_evidence = [{**e, "evidence_id": f"{cid}#{e['evidence_id'].split('#', 1)[1]}"}
                       for e in shared]

        def write() -> list[dict[str, Any]]:
            row = write_packet(packets_dir / "_gt" / cid, role=GT_ROLE, prompts=prompts,
                               header=header, variables=variables(cid), evidence=gt_evidence,
                               storyboards=[], gt_reference=gt_ref(cid), sha256_of=sha256_of,
                               link=link)
            return finish([{"system": None, "case_id": cid, "evaluation_id": None, **row}], cid)

        return _Unit(f"_gt.{cid}", write)

    def evaluation_unit(ev: dict[str, Any]) -> _Unit:
        evidence = evidence_of.get(ev["evaluation_id"], [])
        boards = boards_of.get(ev["evaluation_id"], [])
        header = {"case_id": ev["case_id"], "system": ev["system"],
                  "evaluation_id": ev["evaluation_id"],
                  "evaluation": {k: ev[k] for k in ("modality", "n_source_frames", "n_panels",
                                                    "truncated", "clip_start_s", "clip_end_s",
                                                    "steps_total", "steps_shown",
                                                    "evidence_gaps", "extra_evidence",
                                                    "problem")}}
        folder = packets_dir / ev["system"] / ev["case_id"]

        def write() -> list[dict[str, Any]]:
            remove_stale_temps(folder)  # a killed run's (this process writes every packet)
            out = []
            for role in CANDIDATE_ROLES:
                row = write_packet(folder, role=role, prompts=prompts, header=header,
                                   variables=variables(ev["case_id"]), evidence=evidence,
                                   storyboards=boards, gt_reference=gt_ref(ev["case_id"]),
                                   sha256_of=sha256_of, link=link)
                out.append({"system": ev["system"], "case_id": ev["case_id"],
                            "evaluation_id": ev["evaluation_id"], **row})
            return finish(out, ev["case_id"])

        return _Unit(ev["evaluation_id"], write)

    units = ([gt_unit(cid) for cid in sorted({e["case_id"] for e in evaluations})]
             + [evaluation_unit(ev) for ev in evaluations])
    return units if labels is None else [u for u in units if u.label in labels]


def build_packets(
    home: Path, packets_dir: Path, prompts: Prompts,
    *, system: str | None = None, case_id: str | None = None,
) -> list[dict[str, Any]]:
    """Packets for every evaluation (optionally one system and/or case): the five candidate
    roles per evaluation under `<packets>/<system>/<case_id>/`, and the GT compilation packet per
    case under `<packets>/_gt/<case_id>/`. Returns one row per packet written (unchanged packet
    files are left as they are)."""
    return [row for unit in _units(home, packets_dir, prompts, system, case_id)
            for row in unit.write()]


def packets_present(home: Path) -> bool:
    """Whether `raw_rvp_judge_packets` is there and every packet file it names too."""
    path = table_path(home, "rvp_judge_packets")
    try:
        paths = pq.read_table(path, columns=["packet_path"]).column(0).to_pylist()
    except (OSError, pa.ArrowInvalid):
        return False
    return all(os.path.isfile(resolved_path(p, home) or "") for p in paths)


def packet_store(cache_dir: Path) -> PartStore:
    """The rows of each unit's packets as last built, keyed by what they were made of. Under
    `cache/`: the packets are the JSON files, the table is written whole from these parts, so
    the parts only save building packets again."""
    return PartStore(cache_dir / "packet_parts", PACKETS_VERSION, PACKETS_SCHEMA)


@dataclass
class PacketsResult:
    table: pa.Table  # every packet's row, in unit order (paths as stored)
    built: list[str]  # the units built now
    removed: list[str]


def sync_packets(home: Path, packets_dir: Path, prompts: Prompts,
                 store: PartStore) -> PacketsResult:
    """Every packet unit built once per key: a unit whose part is there and whose packet files
    all exist is not built again; one changed evaluation builds only its five packets. The
    keys come from DuckDB (`packet_keys`); only the units to build are read into Python, and
    the parts are read in one scan (again only if a packet file had gone)."""
    prompt_key = _prompt_key(prompts, packets_dir, home)
    # the shared images of a GT packet are made from the case's sources by the evidence policy
    keys = {label: store.key(label, prompt_key, EVIDENCE_POLICY_VERSION
                             if label.startswith("_gt.") else None, made_of)
            for label, made_of in unit_digests(home, store.folder.with_name("packet_keys.json"))}
    built = {label for label, key in keys.items() if not store.has(key)}
    _build_units(built, keys, store, home, packets_dir, prompts)
    table = store.read(list(keys.values()), PACKETS_SCHEMA)
    gone = _units_with_missing_files(table, home) - built
    if gone:  # a packet file was deleted: its unit is built again
        _build_units(gone, keys, store, home, packets_dir, prompts)
        built |= gone
        table = store.read(list(keys.values()), PACKETS_SCHEMA)
    removed = store.keep(keys.values())
    return PacketsResult(table, [keys[label] for label in keys if label in built], removed)


def _build_units(labels: set[str], keys: dict[str, str], store: PartStore, home: Path,
                 packets_dir: Path, prompts: Prompts) -> None:
    """The packets of the units `labels` written, and their parts."""
    if labels:
        for unit in _units(home, packets_dir, prompts, labels=labels):
            store.write(keys[unit.label], rows_to_table(unit.write(), PACKETS_SCHEMA),
                        home=home)


def _units_with_missing_files(table: pa.Table, home: Path) -> set[str]:
    """The labels of the units (`_Unit.label`: the evaluation, or `_gt.<case>`) one of whose
    packet files is not there."""
    missing = set()
    for path, evaluation, case in zip(*(table.column(c).to_pylist() for c in
                                        ("packet_path", "evaluation_id", "case_id")),
                                      strict=True):
        if not os.path.isfile(resolved_path(path, home) or ""):
            missing.add(evaluation if evaluation is not None else f"_gt.{case}")
    return missing


# raw_rvp_judge_packets: one row per packet written
PACKETS_SCHEMA = raw_schema("rvp_judge_packets")
