"""Settings from the environment (and a `.env` in the project root), defaults pointing at the demo.

Every public setting of the contract lives here and nowhere else; the Dagster resources and the
CLI both read it through `Settings.from_env()`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent
SQL_DIR = PROJECT_ROOT / "sql"
ASSETS_DIR = PROJECT_ROOT / "assets"

def read_dotenv(path: Path) -> dict[str, str]:
    """Minimal `.env` reader: KEY=VALUE lines, `#` comments, optional quotes."""
    values: dict[str, str] = {}
    if not path.is_file():
        return values
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, _, value = line.partition("=")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        values[key.strip().removeprefix("export ").strip()] = value
    return values


# The settings that name input folders (or a snapshot): these may be `s3://` URIs too.
INPUT_FOLDERS = ("rynn_vp_source", "video_val_source", "candidates_dir", "judgments_dir",
                 "responses_dir")


@dataclass(frozen=True)
class Settings:
    """Resolved settings: each field is one setting of the contract, its environment variable
    the field's name upper-cased (`home` is BENCHLAKE_HOME). Empty strings mean "use the demo
    default". This class is the only place a setting is declared: the Dagster resource carries
    the same values (`as_env`), the CLI reads them with `from_env`."""

    home: Path
    rynn_vp_source: str = ""
    rynn_vp_media: str = "full"
    video_val_source: str = ""
    video_val_prefix_map: str = ""
    video_val_roots: str = ""
    candidates_dir: str = ""
    judgments_dir: str = ""
    responses_dir: str = ""
    # a Ray cluster for the per-item work (`dagster_project/cluster.py`); empty: local processes
    ray_address: str = ""
    judge_prompts: str = ""  # a folder of role prompts (VERSION + <role>.md) to use instead

    @staticmethod
    def env_name(field_name: str) -> str:
        return {"home": "BENCHLAKE_HOME", "ray_address": "BENCHLAKE_RAY_ADDRESS"}.get(
            field_name, field_name.upper())

    @classmethod
    def env_names(cls) -> list[str]:
        return [cls.env_name(f.name) for f in fields(cls)]

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """From the environment (or `environ`), over a `.env` in the project root and in the
        working directory; the environment wins."""
        env = read_dotenv(PROJECT_ROOT / ".env")
        env.update(read_dotenv(Path.cwd() / ".env"))
        env.update(os.environ if environ is None else environ)
        values: dict[str, object] = {}
        for f in fields(cls):
            if env.get(cls.env_name(f.name)):
                values[f.name] = env[cls.env_name(f.name)]
        # An s3:// home or input folder is worked on through its local mirror
        # (`warehouse/objectstore.py`: each command pulls it first, and pushes a home after).
        from dagster_project.warehouse.objectstore import SCHEME, mirror_of

        for name in INPUT_FOLDERS:
            if str(values.get(name, "")).startswith(SCHEME):
                values[name] = str(mirror_of(str(values[name])))
        home_text = str(values.pop("home", "./warehouse"))
        home = (mirror_of(home_text) if home_text.startswith(SCHEME)
                else Path(home_text).expanduser().resolve())
        settings = cls(home=home, **values)  # type: ignore[arg-type]
        if settings.rynn_vp_media not in ("full", "metadata"):
            raise ValueError(
                f"RYNN_VP_MEDIA must be 'full' or 'metadata', not {settings.rynn_vp_media!r}"
            )
        return settings

    def as_env(self) -> dict[str, str]:
        """{environment name: value} of every setting (the inverse of `from_env`)."""
        return {self.env_name(f.name): str(getattr(self, f.name)) for f in fields(self)}

    # --- derived locations -------------------------------------------------------------
    @property
    def tables_dir(self) -> Path:
        return self.home / "tables"

    @property
    def catalog_path(self) -> Path:
        return self.home / "benchlake.duckdb"

    @property
    def demo_dir(self) -> Path:
        return self.home / "demo"

    @property
    def dagster_home(self) -> Path:
        return self.home / "dagster"

    @property
    def exports_dir(self) -> Path:
        return self.home / "exports"

    @property
    def hub_cache_dir(self) -> Path:
        return self.home / "hub"

    @property
    def drop_dir(self) -> Path:
        """Where unset drop folders live when their source is not the demo (created on use)."""
        return self.home / "drop"

    def rynn_vp_source_or_demo(self) -> str:
        return self.rynn_vp_source or str(self.demo_dir / "Rynn-VP")

    def uses_demo_rynn_vp(self) -> bool:
        return not self.rynn_vp_source

    # Demo drop folders go with the demo source only: the demo candidates and judgments name the
    # demo's cases, the demo responses the demo's questions. With a source of your own, an unset
    # drop folder is an empty one under $BENCHLAKE_HOME/drop/, never the demo's. The demo
    # judgments judge the demo candidates, so candidates of your own leave them out too.
    def uses_demo_candidates(self) -> bool:
        return not self.candidates_dir and self.uses_demo_rynn_vp()

    def uses_demo_judgments(self) -> bool:
        return not self.judgments_dir and self.uses_demo_candidates()

    def uses_demo_responses(self) -> bool:
        return not self.responses_dir and self.uses_demo_video_val()

    def candidates_root(self) -> Path:
        return self._drop_folder(self.candidates_dir, self.uses_demo_candidates(), "candidates")

    def judgments_root(self) -> Path:
        return self._drop_folder(self.judgments_dir, self.uses_demo_judgments(), "judgments")

    def responses_root(self) -> Path:
        return self._drop_folder(self.responses_dir, self.uses_demo_responses(), "responses")

    def _drop_folder(self, explicit: str, demo: bool, kind: str) -> Path:
        if explicit:
            return Path(explicit).expanduser().resolve()
        return (self.demo_dir if demo else self.drop_dir) / kind

    def open_drop_folder(self, setting: str) -> Path:
        """The folder behind CANDIDATES_DIR / JUDGMENTS_DIR / RESPONSES_DIR, ready to read: a
        default one under $BENCHLAKE_HOME/drop/ is created (empty), a folder you named must
        exist."""
        root = {"CANDIDATES_DIR": self.candidates_root, "JUDGMENTS_DIR": self.judgments_root,
                "RESPONSES_DIR": self.responses_root}[setting]()
        if root in self.default_drop_folders().values():
            root.mkdir(parents=True, exist_ok=True)
        elif not root.is_dir():
            raise FileNotFoundError(f"{setting} {root}: no such folder")
        return root

    def default_drop_folders(self) -> dict[str, Path]:
        """{setting: folder} of the drop folders left unset with a source of one's own."""
        out = {}
        for setting, explicit, demo, kind in (
                ("CANDIDATES_DIR", self.candidates_dir, self.uses_demo_candidates(), "candidates"),
                ("JUDGMENTS_DIR", self.judgments_dir, self.uses_demo_judgments(), "judgments"),
                ("RESPONSES_DIR", self.responses_dir, self.uses_demo_responses(), "responses")):
            if not explicit and not demo:
                out[setting] = self.drop_dir / kind
        return out

    @property
    def packets_dir(self) -> Path:
        return self.home / "packets"

    @property
    def judge_dir(self) -> Path:
        """`benchlake judge`'s own files: `cache/` (one answer per request key), `calls/` (the
        journal of every request, per Dagster run) and `judgments/` (the judgment records it
        writes: a second drop folder the judgments ingest reads beside JUDGMENTS_DIR)."""
        return self.home / "judge"

    @property
    def judge_judgments_dir(self) -> Path:
        return self.judge_dir / "judgments"

    @property
    def archive_dir(self) -> Path:
        """Content-addressed copies of every version of every ingested drop-folder file."""
        return self.home / "archive"

    @property
    def cache_dir(self) -> Path:
        """State that only saves work (the file-identity cache, the checked judgment parts,
        the judge packets' parts): never data, safe to delete."""
        return self.home / "cache"

    @property
    def file_cache(self) -> Path:
        """What was computed per file identity: digests and probes (`filecache`)."""
        return self.cache_dir / "files.sqlite"

    def stat_cache(self, kind: str) -> Path:
        """The drop folders' stat caches are now the one file-identity cache, whatever `kind`:
        kept for the drop-folder sensors' calls (`file_cache` is the name to use)."""
        return self.file_cache

    @property
    def video_val_demo_dir(self) -> Path:
        return self.demo_dir / "video-val"

    def video_val_source_or_demo(self) -> str:
        return self.video_val_source or str(self.video_val_demo_dir / "parquets")

    def uses_demo_video_val(self) -> bool:
        return not self.video_val_source

    def video_val_prefix_map_or_demo(self) -> str:
        """Explicit map if set; else, for the demo source, the demo's mapping (the published
        foreign prefix → the demo's video cache); else no mapping."""
        if self.video_val_prefix_map or not self.uses_demo_video_val():
            return self.video_val_prefix_map
        from benchlake_demo.video_val import demo_prefix_map

        return demo_prefix_map(self.video_val_demo_dir)


_RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


@dataclass(frozen=True)
class JudgeSettings:
    """`benchlake judge`'s settings (JUDGE_*; environment, `.env` too, except the key): the
    OpenAI-compatible endpoint, model and key, the judge run id the records carry, decoding,
    pacing, the price table and the budget. The key (JUDGE_API_KEY) is read from the process
    environment only and is kept out of `repr`: it goes into the Authorization header and
    nowhere else. Empty strings mean unset."""

    base_url: str = ""
    model: str = ""
    api_key: str = field(default="", repr=False)
    run_id: str = ""  # default: the model's name
    reasoning: str = ""  # sent as `reasoning_effort` when set; recorded as judge.reasoning
    temperature: float = 0.0
    max_tokens: int = 4096
    seed: int = 0
    concurrency: int = 4  # evaluations judged at once
    rpm: int = 60  # requests per minute at most (0: no limit)
    timeout_s: float = 120.0  # per request: connect and read
    budget_usd: float = 0.0  # per judge run, over every invocation (0: no cap)
    prices: str = ""  # a CSV like the seed rvp_judge_prices (its default)

    @staticmethod
    def env_name(field_name: str) -> str:
        return f"JUDGE_{field_name.upper()}"

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> JudgeSettings:
        env = {} if environ is not None else {
            **read_dotenv(PROJECT_ROOT / ".env"), **read_dotenv(Path.cwd() / ".env")}
        env.pop(cls.env_name("api_key"), None)  # the key: from the environment only
        env.update(os.environ if environ is None else environ)
        values: dict[str, object] = {}
        for f in fields(cls):
            text = env.get(cls.env_name(f.name), "").strip()
            if not text:
                continue
            kind = type(f.default)
            try:
                values[f.name] = kind(text) if kind is not str else text
            except ValueError:
                raise ValueError(f"{cls.env_name(f.name)} must be a {kind.__name__}, "
                                 f"not {text!r}") from None
        settings = cls(**values)  # type: ignore[arg-type]
        if settings.run_id and not _RUN_ID.match(settings.run_id):
            raise ValueError(f"JUDGE_RUN_ID {settings.run_id!r}: use letters, digits, '.', "
                             "'_' and '-' (it names folders)")
        return settings

    def require_endpoint(self) -> JudgeSettings:
        """Itself, or a ValueError naming JUDGE_BASE_URL or JUDGE_MODEL when unset."""
        for name in ("base_url", "model"):
            if not getattr(self, name):
                raise ValueError(f"{self.env_name(name)} is not set: benchlake judge needs an "
                                 "OpenAI-compatible endpoint and a model")
        return self

    @property
    def judge_run_id(self) -> str:
        return self.run_id or re.sub(r"[^A-Za-z0-9._-]+", "-", self.model).strip("-.")
