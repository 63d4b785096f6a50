"""Bad Rynn-VP input: each problem is named (file + reason) in rvp_rejects, its case is left
out whole, and every other case is still ingested."""

from __future__ import annotations

import fnmatch
import json
import shutil
from pathlib import Path

import huggingface_hub
import pytest

from benchlake_demo.rynn_vp import write_sha256sums
from dagster_project.runner import materialize
from dagster_project.warehouse.catalog import connect
from tests.conftest import RVP_INGEST, settings_for

# (mutation, file it concerns, words the reason must contain)
EXPECTED = {
    "malformed_task_json": ("task.json", "malformed JSON"),
    "missing_annotations": ("gt_annotations.json", "file is missing"),
    "unparsable_interval": ("gt_annotations.json", "'1.0s to 2.0s' is not of the form"),
    "task_id_differs": ("task.json", "differs from its folder name"),
    "truncated_mp4": ("gt.mp4", "video probe failed"),
    "checksum_mismatch": ("task.json", "SHA-256 differs"),
    "unlisted_file": ("gt_annotations.json", "not listed in SHA256SUMS.txt"),
    "extra_file": ("notes.txt", "unexpected file in a case folder"),
}


def _break_snapshot(root: Path) -> dict[str, str]:
    """Apply one mutation per case; returns {mutation: case_id}."""
    cases = sorted(p for p in (root / "cases").iterdir() if p.is_dir())
    chosen = dict(zip(EXPECTED, cases, strict=False))
    c = chosen["malformed_task_json"]
    (c / "task.json").write_text('{"task_id": "' + c.name + '", "instruction": ')
    (chosen["missing_annotations"] / "gt_annotations.json").unlink()
    c = chosen["unparsable_interval"]
    ann = json.loads((c / "gt_annotations.json").read_text())
    items = list(ann["planning"].items())
    items[2] = ("1.0s to 2.0s", items[2][1])
    ann["planning"] = dict(items)
    (c / "gt_annotations.json").write_text(json.dumps(ann))
    c = chosen["task_id_differs"]
    task = json.loads((c / "task.json").read_text())
    task["task_id"] = "source9_9-Garage-Room_01-Task_01-Variant_01-001"
    (c / "task.json").write_text(json.dumps(task))
    mp4 = chosen["truncated_mp4"] / "gt.mp4"
    mp4.write_bytes(mp4.read_bytes()[: mp4.stat().st_size // 2])
    (chosen["extra_file"] / "notes.txt").write_text("an annotator's note\n")
    write_sha256sums(root)  # the problems above are content problems, not checksum problems
    c = chosen["checksum_mismatch"]
    task = json.loads((c / "task.json").read_text())
    (c / "task.json").write_text(json.dumps(task, indent=4))  # same content, other bytes
    sums = root / "SHA256SUMS.txt"
    unlisted = f"cases/{chosen['unlisted_file'].name}/gt_annotations.json"
    sums.write_text("".join(line for line in sums.read_text().splitlines(keepends=True)
                            if not line.endswith(f"  {unlisted}\n")))
    return {k: v.name for k, v in chosen.items()}


@pytest.fixture(scope="module")
def broken(demo_inputs, tmp_path_factory):
    home = tmp_path_factory.mktemp("broken")
    root = home / "Rynn-VP"
    shutil.copytree(Path(demo_inputs.rynn_vp_source_or_demo()), root)
    chosen = _break_snapshot(root)
    settings = settings_for(home, rynn_vp_source=str(root))
    result = materialize(settings, RVP_INGEST, raise_on_error=False)
    con = connect(settings.home)
    return result, con, chosen, root


@pytest.mark.parametrize("mutation", list(EXPECTED))
def test_each_problem_is_rejected_with_file_and_reason(broken, mutation):
    _, con, chosen, _ = broken
    case_id = chosen[mutation]
    filename, words = EXPECTED[mutation]
    rows = con.execute("SELECT source_file, reason FROM rvp_rejects WHERE case_id = ?",
                       [case_id]).fetchall()
    assert (f"cases/{case_id}/{filename}", ) in [(r[0],) for r in rows], rows
    assert any(words in reason for src, reason in rows if src.endswith(filename)), rows
    in_cases = con.execute("SELECT count(*) FROM rvp_cases WHERE case_id = ?", [case_id])
    assert in_cases.fetchone() == (0,)
    assert con.execute("SELECT count(*) FROM rvp_intervals WHERE case_id = ?",
                       [case_id]).fetchone() == (0,)


def test_every_other_case_is_still_ingested(broken):
    result, con, chosen, root = broken
    assert result.success
    all_cases = {p.name for p in (root / "cases").iterdir()}
    accepted = {r[0] for r in con.execute("SELECT case_id FROM rvp_cases").fetchall()}
    assert accepted == all_cases - set(chosen.values())
    assert len(accepted) >= 6
    # Nothing silently dropped: every case is either accepted or has a reject row.
    rejected = {r[0] for r in con.execute("SELECT DISTINCT case_id FROM rvp_rejects").fetchall()}
    assert accepted | rejected == all_cases


def test_checksum_check_warns_but_does_not_block(broken):
    result, *_ = broken
    evals = result.get_asset_check_evaluations()
    verified = [e for e in evals if e.check_name == "rvp_checksums_verified"]
    assert len(verified) == 1 and not verified[0].passed
    assert verified[0].severity.value == "WARN"


@pytest.mark.slow
def test_missing_manifest_fails_its_check_and_refuses_every_case(rynn_vp_copy, tmp_path):
    (rynn_vp_copy / "SHA256SUMS.txt").unlink()
    settings = settings_for(tmp_path / "home", rynn_vp_source=str(rynn_vp_copy))
    result = materialize(settings, RVP_INGEST, raise_on_error=False)
    evals = [e for e in result.get_asset_check_evaluations()
             if e.check_name == "rvp_checksums_verified"]
    assert evals and not evals[0].passed and evals[0].severity.value == "ERROR"
    assert result.failed_checks() == ["raw_rvp_checksums:rvp_checksums_verified"]
    con = connect(settings.home)
    # nothing verified, nothing accepted; the views say so (the rejects, with why)
    assert con.execute("SELECT count(*) FROM rvp_cases").fetchone() == (0,)
    assert con.execute("SELECT count(DISTINCT case_id) FROM rvp_rejects").fetchone()[0] >= 12
    reasons = [r[0] for r in con.execute(
        "SELECT reason FROM rvp_rejects WHERE source_file = 'SHA256SUMS.txt'").fetchall()]
    assert reasons and "SHA256SUMS.txt" in reasons[0]


@pytest.mark.slow
def test_hub_source_passes_the_right_arguments(demo_inputs, tmp_path, monkeypatch):
    """No network: the hub client is replaced by fakes that record what benchlake passes and
    serve the demo snapshot, filtered by allow_patterns like the real client."""
    calls: dict[str, dict] = {}
    demo_root = Path(demo_inputs.rynn_vp_source_or_demo())

    class FakeApi:
        def dataset_info(self, repo_id, revision=None):
            calls["dataset_info"] = {"repo_id": repo_id, "revision": revision}
            return type("Info", (), {"sha": "0123456789abcdef0123456789abcdef01234567"})()

    def fake_snapshot_download(**kwargs):
        calls["snapshot_download"] = kwargs
        dest = Path(kwargs["local_dir"])
        for src in demo_root.rglob("*"):
            rel = src.relative_to(demo_root).as_posix()
            patterns = kwargs.get("allow_patterns")
            if src.is_file() and (patterns is None
                                  or any(fnmatch.fnmatch(rel, p) for p in patterns)):
                (dest / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, dest / rel)
        return str(dest)

    monkeypatch.setattr(huggingface_hub, "HfApi", FakeApi)
    monkeypatch.setattr(huggingface_hub, "snapshot_download", fake_snapshot_download)
    settings = settings_for(tmp_path, rynn_vp_source="hf://datasets/Alibaba-DAMO-Academy/Rynn-VP@v1.0",
                            rynn_vp_media="metadata")
    result = materialize(settings, RVP_INGEST, raise_on_error=False)
    assert result.success
    assert calls["dataset_info"] == {"repo_id": "Alibaba-DAMO-Academy/Rynn-VP", "revision": "v1.0"}
    kw = calls["snapshot_download"]
    assert kw["repo_id"] == "Alibaba-DAMO-Academy/Rynn-VP"
    assert kw["repo_type"] == "dataset"
    assert kw["revision"] == "0123456789abcdef0123456789abcdef01234567"  # pinned to the commit
    assert set(kw["allow_patterns"]) >= {"cases/*/task.json", "cases/*/gt_annotations.json",
                                         "README*", "LICENSE"}
    con = connect(settings.home)
    snap = con.execute("SELECT requested_revision, resolved_revision, media_mode "
                       "FROM stg_rvp_snapshot").fetchone()
    assert snap == ("v1.0", "0123456789abcdef0123456789abcdef01234567", "metadata")
    statuses = dict(con.execute("SELECT status, count(*) FROM stg_rvp_checksums GROUP BY 1"
                                ).fetchall())
    n_cases = len(list((demo_root / "cases").iterdir()))
    assert statuses == {"ok": 2 * n_cases + 2, "not_downloaded": 2 * n_cases}
    stats = dict(con.execute("SELECT property, value FROM rvp_dataset_stats").fetchall())
    assert stats["task_instances"] == n_cases and stats["gt_videos"] == 0


def test_full_media_mode_does_not_filter(monkeypatch, tmp_path):
    seen = {}

    class FakeApi:
        def dataset_info(self, repo_id, revision=None):
            return type("Info", (), {"sha": "f" * 40})()

    def fake_snapshot_download(**kwargs):
        seen.update(kwargs)
        return kwargs["local_dir"]

    monkeypatch.setattr(huggingface_hub, "HfApi", FakeApi)
    monkeypatch.setattr(huggingface_hub, "snapshot_download", fake_snapshot_download)
    from dagster_project.rynn_vp.snapshot import acquire_snapshot

    with pytest.raises(ValueError, match="not a hub dataset reference"):
        acquire_snapshot("hf://models/x", "full", tmp_path)
    snap = acquire_snapshot("hf://datasets/org/name", "full", tmp_path)
    assert seen["allow_patterns"] is None and seen["revision"] == "f" * 40
    assert snap.requested_revision is None and snap.resolved_revision == "f" * 40
