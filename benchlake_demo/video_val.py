"""The embedded videorl-video-val demo, generated deterministically.

A small stand-in for the published val set in the card's layout: `parquets/` holds the three
parquets in exactly `VAL_SCHEMA`, `cache/` the videos under the card's embedded path patterns.
The parquets carry the published foreign prefix (`FOREIGN_PREFIX`), so the demo only works after
the prefix remapping a real user has to do too (`demo_prefix_map`). Videos are real synthetic
H.264 clips chosen to hit the frame planner's edge cases (under 4 s, over 64 s at fps 1, portrait,
an odd 854x480 size); questions are invented but shaped like each benchmark's, including
multi-line questions with an "A. ..." line before the real options.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from dagster_project.lifeline import process_pool
from dagster_project.media.encode import synthetic_frames, write_h264
from dagster_project.tables import atomic_write_bytes, write_table
from dagster_project.video_val.schema import (
    CARD_VIDEO_SETTINGS,
    EXTRA_INFO_FIELDS,
    FOREIGN_PREFIX,
    POPULATED_EXTRA_INFO,
    PUBLISHED_ROWS,
    SOURCES,
    SYSTEM_PROMPT,
    USER_SUFFIX,
    VAL_SCHEMA,
)

MME, PC, HOLMES = "videomme_v1_test", "perceptioncomp_test", "video_holmes_test"


def _hf_snapshot(repo_id: str) -> str:
    """Hub-cache snapshot folder for `repo_id` with a fixed, invented 40-hex revision."""
    revision = hashlib.sha1(f"benchlake-demo:{repo_id}".encode()).hexdigest()
    return f"datasets--{repo_id.replace('/', '--')}/snapshots/{revision}"


_PC_SNAPSHOT = _hf_snapshot("hrinnnn/PerceptionComp")
_HOLMES_SNAPSHOT = _hf_snapshot("TencentARC/Video-Holmes")


@dataclass(frozen=True)
class DemoVideo:
    """One generated clip; `rel_path` is relative to the cache root (card's path pattern)."""

    key: str
    source: str
    rel_path: str
    width: int
    height: int
    fps: int
    n_frames: int
    gop: int
    seed: int

    @property
    def seconds(self) -> float:
        return self.n_frames / self.fps

    @property
    def uri(self) -> str:
        return f"{FOREIGN_PREFIX}/{self.rel_path}"


# Sizes and lengths picked for the frame planner's edge cases, yet all tiny enough to encode in a
# few seconds: x264 at 854x480 costs ~15 ms/frame here, so that clip stays at 28 frames.
DEMO_VIDEOS: tuple[DemoVideo, ...] = (
    # under 4 s: fps-1 sampling asks for ~3 frames, below qwen's 4-frame minimum
    DemoVideo("mme_short", MME, "videomme/data/Qm7vT2xKp4E.mp4", 256, 144, 25, 80, 50, 11),
    DemoVideo("mme_portrait", MME, "videomme/data/b8Rz_0LwNcY.mp4", 180, 320, 12, 96, 24, 12),
    DemoVideo("mme_medium", MME, "videomme/data/Xf3kJ9-uHs2.mp4", 320, 180, 10, 200, 20, 13),
    # 80 s: max_frames=64 binds at fps 1
    DemoVideo("mme_long", MME, "videomme/data/pL5nWq1dV8o.mp4", 160, 90, 8, 640, 64, 14),
    DemoVideo("pc_kitchen", PC, f"{_PC_SNAPSHOT}/videos/0042_kitchen_tour.mp4",
              854, 480, 10, 28, 10, 21),
    DemoVideo("pc_street", PC, f"{_PC_SNAPSHOT}/videos/0117_street_crossing.mp4",
              320, 180, 15, 180, 30, 22),
    DemoVideo("holmes_office", HOLMES, f"{_HOLMES_SNAPSHOT}/videos/holmes_0193.mp4",
              256, 144, 12, 360, 48, 31),
    DemoVideo("holmes_busstop", HOLMES, f"{_HOLMES_SNAPSHOT}/videos/holmes_0270.mp4",
              320, 180, 24, 384, 48, 32),
)
_VIDEO_BY_KEY = {v.key: v for v in DEMO_VIDEOS}


@dataclass(frozen=True)
class DemoQuestion:
    video: str  # DemoVideo.key
    question: str
    options: tuple[str, ...]  # lettered A, B, ... in order
    answer: str
    meta: tuple[tuple[str, str], ...] = ()  # extra_info metadata (the source's populated fields)


def _mme(video: str, question: str, options: tuple[str, ...], answer: str, task: str,
         category: str, subject: str, question_type: str) -> DemoQuestion:
    meta = (("task", task), ("category", category), ("question_type", question_type),
            ("subject", subject))
    return DemoQuestion(video, question, options, answer, meta)


_COUNT = ("One", "Two", "Three", "Five")
QUESTIONS: dict[str, tuple[DemoQuestion, ...]] = {
    MME: (
        _mme("mme_short", "How many coloured discs move across the screen during the video?",
             _COUNT, "C", "Counting Problem", "Astronomy", "Knowledge", "short"),
        _mme("mme_short",
             "What does the strip along the bottom edge of the frame do while the video plays?",
             ("It fills from left to right like a progress bar",
              "It scrolls text from right to left", "It flashes red once per second",
              "It stays empty throughout"),
             "A", "Attribute Perception", "Astronomy", "Knowledge", "short"),
        _mme("mme_short", "At roughly what point does the bottom strip become completely filled?",
             ("In the first second", "Halfway through", "Two thirds of the way through",
              "At the very end"),
             "D", "Temporal Perception", "Astronomy", "Knowledge", "short"),
        _mme("mme_portrait",
             "The video is filmed on an upright phone. What does the narrator hold up to the "
             "camera first?",
             ("A coffee mug", "A set of keys", "A paperback book", "A pair of sunglasses"),
             "B", "Object Recognition", "Daily Life", "Life Record", "short"),
        _mme("mme_portrait", "Where in the frame does the black-and-white pattern appear?",
             ("Along the top edge", "Along the left edge", "In the centre",
              "In the bottom-right corner"),
             "A", "Spatial Perception", "Daily Life", "Life Record", "short"),
        _mme("mme_portrait", "What is the narrator doing while speaking to the camera?",
             ("Cooking breakfast", "Tying shoelaces", "Walking down a corridor",
              "Watering plants"),
             "C", "Action Recognition", "Daily Life", "Life Record", "short"),
        _mme("mme_medium", "Which of the following best summarises the lecture?",
             ("A cooking demonstration", "A tour of a modern art museum",
              "A review of a new smartphone",
              "The history of a river port from its founding to its decline"),
             "D", "Information Synopsis", "Humanity & History", "Knowledge", "medium"),
        _mme("mme_medium", "What year is written on the title card shown at the beginning?",
             ("1848", "1871", "1905", "1912"),
             "B", "OCR Problems", "Humanity & History", "Knowledge", "medium"),
        _mme("mme_medium", "In what order does the presenter cover the topics?",
             ("Trade, then floods, then the railway", "Floods, then trade, then the railway",
              "The railway, then trade, then floods", "Trade, then the railway, then floods"),
             "D", "Temporal Reasoning", "Humanity & History", "Knowledge", "medium"),
        _mme("mme_long", "How many times does the home team call a timeout in the quarter shown?",
             ("Once", "Twice", "Three times", "Never"),
             "B", "Counting Problem", "Basketball", "Sports Competition", "long"),
        _mme("mme_long", "Why does the referee stop play shortly after the halfway point?",
             ("A player is injured", "The shot clock malfunctions", "A fan runs onto the court",
              "The ball goes out of bounds"),
             "A", "Action Reasoning", "Basketball", "Sports Competition", "long"),
        _mme("mme_long", "Which player most likely scored the final basket shown?",
             ("The point guard in the white jersey", "The centre wearing a knee brace",
              "The substitute who came on late", "The team captain"),
             "C", "Object Reasoning", "Basketball", "Sports Competition", "long"),
    ),
    PC: (
        DemoQuestion(
            "pc_kitchen",
            "Count the mugs on the counter that are NOT red.\n"
            "Only consider the mugs visible when the camera stops moving.",
            ("Two", "Three", "Four", "Five", "Six"), "A",
            (("subject", "counting"), ("source_id", "pc_00412"))),
        DemoQuestion(
            "pc_kitchen",
            "The camera pans across the kitchen.\n"
            "What colour is the kettle that sits to the left of the sink?",
            ("White", "Teal", "Black", "Red", "Silver"), "B",
            (("subject", "attribute"), ("source_id", "pc_00413"))),
        # Question lines that look like options: a parser must take the LAST A.. run.
        DemoQuestion(
            "pc_kitchen",
            "A recipe card is pinned above the stove. Its first two lines read:\n"
            "A. Two cups of flour\n"
            "B. One egg, beaten\n"
            "Which item on the counter is closest to the recipe card?",
            ("The chopping board", "The salt shaker", "The wooden spoon", "The toaster",
             "The fruit bowl"), "C",
            (("subject", "spatial relation"), ("source_id", "pc_00415"))),
        DemoQuestion(
            "pc_kitchen",
            "Watch the person at the counter.\n"
            "What does the person do immediately after opening the fridge?",
            ("Closes the fridge", "Washes their hands", "Picks up a knife",
             "Takes out a carton of milk", "Turns on the oven"), "D",
            (("subject", "temporal order"), ("source_id", "pc_00418"))),
        DemoQuestion(
            "pc_street",
            "Three cyclists cross the intersection during the clip.\n"
            "In which direction does the cyclist with the yellow helmet travel?",
            ("Towards the camera", "Away from the camera", "Left to right",
             "It stops and waits", "Right to left"), "E",
            (("subject", "motion"), ("source_id", "pc_00731"))),
        DemoQuestion(
            "pc_street",
            "How many pedestrians wait at the crossing when the signal turns green?\n"
            "Ignore anyone who is only partly visible at the edge of the frame.",
            ("None", "One", "Two", "Three", "Four"), "E",
            (("subject", "counting"), ("source_id", "pc_00732"))),
        DemoQuestion(
            "pc_street", "What is written on the awning of the shop on the far corner?",
            ("BAKERY", "PHARMACY", "FLOWERS", "HARDWARE", "CAFÉ"), "B",
            (("subject", "attribute"), ("source_id", "pc_00735"))),
        DemoQuestion(
            "pc_street",
            'A sign on the lamp post says:\n"A. Keep left"\n'
            "Where is the blue van parked relative to that lamp post?",
            ("Directly in front of it", "Behind it", "To its right", "Across the street",
             "It is not visible"), "C",
            (("subject", "spatial relation"), ("source_id", "pc_00736"))),
        # The one six-option PerceptionComp question.
        DemoQuestion(
            "pc_street",
            "Consider the moment the bus pulls away.\n"
            "Which combination of events happens at that moment?\n"
            "Choose the single best answer.",
            ("The light is red and a cyclist crosses", "The light is green and nobody crosses",
             "A pedestrian waves and the van leaves", "The shop door opens and a dog barks",
             "Two cyclists stop at the line",
             "The light turns amber and a pedestrian steps back"), "F",
            (("subject", "compositional"), ("source_id", "pc_00740"))),
    ),
    HOLMES: (
        DemoQuestion(
            "holmes_office",
            "The short film opens in an empty office at night.\n"
            "A woman enters, checks the desk drawer and leaves without the folder.\n"
            "Why does she leave the folder behind?",
            ("She realises the security camera is recording her",
             "The folder is the wrong colour", "She hears footsteps in the corridor",
             "She has already copied its contents", "The drawer is locked",
             "She forgot her glasses"), "A",
            (("source_id", "vh_0193_1"),)),
        DemoQuestion(
            "holmes_office", "What does the flickering desk lamp most likely signal in the story?",
            ("A power cut is coming", "Someone else is still in the building",
             "The film is set in winter", "The woman is dreaming", "The scene is a flashback",
             "Nothing; it is set dressing"), "B",
            (("source_id", "vh_0193_2"),)),
        # A sticky note whose text starts like an option line.
        DemoQuestion(
            "holmes_office",
            "Near the end, a sticky note on the monitor reads:\n"
            "A. M. - 9 pm, roof\n"
            "Who most likely wrote the note?",
            ("The security guard", "The woman's sister", "The office manager, Anna Marsh",
             "The cleaner", "The woman herself", "The stranger from the first scene"), "C",
            (("source_id", "vh_0193_3"),)),
        DemoQuestion(
            "holmes_office",
            "Put the events in the order they happened in the story, not the order shown:\n"
            "1) the alarm is switched off\n"
            "2) the folder is photographed\n"
            "3) the guard changes shift\n"
            "Which order is correct?",
            ("1, 2, 3", "2, 1, 3", "3, 2, 1", "3, 1, 2", "1, 3, 2", "2, 3, 1"), "D",
            (("source_id", "vh_0193_4"),)),
        DemoQuestion(
            "holmes_office", "What is the main theme of the film?",
            ("Friendship", "Revenge", "Loyalty tested by ambition", "Fear of technology",
             "Guilt and confession", "Coming of age"), "E",
            (("source_id", "vh_0193_5"),)),
        DemoQuestion(
            "holmes_busstop",
            "A man in a grey coat waits at a bus stop in the rain.\n"
            "He lets two buses pass before boarding the third.\n"
            "What is the most plausible reason?",
            ("The first two buses were full", "He was reading", "He had no change for the fare",
             "He was waiting for a friend", "The first two buses ran a different route",
             "He was following the woman who boarded the third bus"), "F",
            (("source_id", "vh_0270_1"),)),
        DemoQuestion(
            "holmes_busstop",
            'Which detail contradicts the man\'s later claim that he "never left the house '
            'that evening"?',
            ("His umbrella is dry", "His watch shows the wrong time", "He carries a grocery bag",
             "His phone rings", "He wears slippers", "His coat is soaked when he opens the door"),
            "F",
            (("source_id", "vh_0270_2"),)),
        DemoQuestion(
            "holmes_busstop",
            "What physically impossible detail appears in the reflection in the bus window?",
            ("The man has no reflection", "The rain falls upwards", "The clock runs backwards",
             "The street lights are off", "The bus number is mirrored the wrong way",
             "There is nothing unusual"), "E",
            (("source_id", "vh_0270_3"),)),
        DemoQuestion(
            "holmes_busstop",
            "The woman glances back twice before the doors close.\n"
            "What does this suggest about her?",
            ("She is lost", "She knows she is being followed", "She is waiting for a taxi",
             "She dropped something", "She recognises the driver", "She is cold"), "B",
            (("source_id", "vh_0270_4"),)),
    ),
}

_README = """# videorl-video-val (benchlake embedded demo)

A small, generated stand-in for the videorl-video-val release in the dataset card's layout:
`parquets/{videomme-test,perceptioncomp-test,videoholmes-test}.parquet` in the published schema,
and the videos under `cache/` following the card's embedded path patterns
(`videomme/data/<id>.mp4`, `datasets--<org>--<name>/snapshots/<hash>/videos/<name>.mp4`).
As in the real files, `videos[0].video` carries the foreign prefix
`file:///scratch/users/astar/ares/suns1/trung/cache`; map it to `file://<this folder>/cache`.
Videos are synthetic H.264 clips with moving shapes; questions are invented.
Not the dataset; for tests and demos only.
"""


def user_content(question: str, options: tuple[str, ...] | list[str]) -> str:
    """The user message: `<video>`, question, lettered options, the card's suffix."""
    lines = [f"{chr(ord('A') + i)}. {text}" for i, text in enumerate(options)]
    return "<video>\n" + question + "\n" + "\n".join(lines) + "\n" + USER_SUFFIX


def _row(source: str, question: str, options: tuple[str, ...], answer: str,
         meta: dict[str, str], uri: str) -> dict[str, Any]:
    populated = POPULATED_EXTRA_INFO[source]
    if not set(meta) <= populated:  # guards the hand-written tables above
        raise ValueError(f"{source}: metadata {sorted(set(meta) - populated)} must be null")
    extra: dict[str, str | None] = {name: None for name in EXTRA_INFO_FIELDS}
    extra.update(meta, reward_type="multiple_choice", answer=answer)
    return {
        "prompt": [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": user_content(question, options)},
        ],
        "images": [],
        "videos": [{"type": "video", "video": uri, **CARD_VIDEO_SETTINGS}],
        "data_source": source,
        "ability": "video_understanding",
        "reward_model": {"ground_truth": answer, "style": "rule"},
        "extra_info": extra,
    }


def demo_rows(source: str) -> list[dict[str, Any]]:
    """The demo's rows for one data_source, as dicts in `VAL_SCHEMA` shape."""
    return [
        _row(source, q.question, q.options, q.answer, dict(q.meta), _VIDEO_BY_KEY[q.video].uri)
        for q in QUESTIONS[source]
    ]


def demo_video_uris() -> dict[str, list[str]]:
    """data_source → the (foreign-prefixed) URIs of that source's demo videos, in a fixed order."""
    uris: dict[str, list[str]] = {source: [] for source in PUBLISHED_ROWS}
    for video in DEMO_VIDEOS:
        uris[video.source].append(video.uri)
    return uris


def demo_prefix_map(dest: Path) -> str:
    """The `VIDEO_VAL_PREFIX_MAP` that points the demo parquets at `dest/cache`."""
    return f"{FOREIGN_PREFIX}=file://{(dest / 'cache').resolve()}"


def _encode_video(path: Path, video: DemoVideo) -> None:
    # Module-level so a worker process can unpickle it. The label makes clips sharing a seed
    # range still differ.
    frames = synthetic_frames(video.n_frames, video.width, video.height, seed=video.seed,
                              label=video.rel_path)
    write_h264(path, frames, fps=video.fps, gop=video.gop)


def build_video_val_demo(dest: Path) -> Path:
    """Write the demo (README, parquets, cache of videos) into `dest` (created; must not exist)."""
    dest.mkdir(parents=True)
    atomic_write_bytes(dest / "README.md", _README.encode())
    # Encoding dominates; clips are independent and x264 is pinned to one thread, so two
    # workers give identical bytes. Costliest first, so the two workers finish together.
    by_cost = sorted(DEMO_VIDEOS, key=lambda v: -v.width * v.height * v.n_frames)
    with process_pool(min(2, os.cpu_count() or 1)) as pool:
        jobs = [pool.submit(_encode_video, dest / "cache" / v.rel_path, v) for v in by_cost]
        for name, source in SOURCES.items():
            table = pa.Table.from_pylist(demo_rows(source), schema=VAL_SCHEMA)
            write_table(table, dest / "parquets" / name)
        for job in jobs:
            job.result()
    return dest


def generate_full_size_parquets(
    dest: Path, video_uris: dict[str, list[str]] | None = None
) -> dict[str, Path]:
    """Write the three parquets at the published row counts (`PUBLISHED_ROWS`) into `dest`.

    Rows cycle over the demo questions of each source and, independently, over `video_uris`
    (data_source → URIs; default: the demo's own URIs, so `demo_prefix_map` of a built demo
    resolves them). From the second pass on a question gets a " (variant N)" suffix, so every
    row stays distinct. Returns data_source → parquet path. `dest` is a `VIDEO_VAL_SOURCE`
    folder: the parquets sit directly in it.
    """
    uris = demo_video_uris() if video_uris is None else video_uris
    paths: dict[str, Path] = {}
    for name, source in SOURCES.items():
        templates, source_uris = QUESTIONS[source], uris[source]
        if not source_uris:
            raise ValueError(f"no video URIs for {source}")
        rows = []
        for i in range(PUBLISHED_ROWS[source]):
            q = templates[i % len(templates)]
            variant = i // len(templates)
            question = q.question + (f" (variant {variant})" if variant else "")
            meta = dict(q.meta)
            if variant and "source_id" in meta:  # ids stay unique, like the real ones
                meta["source_id"] = f"{meta['source_id']}_{variant}"
            rows.append(_row(source, question, q.options, q.answer, meta,
                             source_uris[i % len(source_uris)]))
        paths[source] = write_table(pa.Table.from_pylist(rows, schema=VAL_SCHEMA), dest / name)
    return paths
