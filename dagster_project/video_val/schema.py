"""The published videorl-video-val parquet schema (dataset card, "Schema"), as Arrow types.

The demo generator writes exactly this; the reader checks columns by name and casts compatible
types (e.g. an integer `fps`), so real files written by other tools still load.
"""

from __future__ import annotations

import pyarrow as pa

# data_source value per parquet file name (card, "Benchmark breakdown").
SOURCES: dict[str, str] = {
    "videomme-test.parquet": "videomme_v1_test",
    "perceptioncomp-test.parquet": "perceptioncomp_test",
    "videoholmes-test.parquet": "video_holmes_test",
}
# Published row counts (card): used by the generated full-size benchmark set.
PUBLISHED_ROWS: dict[str, int] = {
    "videomme_v1_test": 2700,
    "perceptioncomp_test": 1108,
    "video_holmes_test": 1837,
}

SYSTEM_PROMPT = (
    "You are a careful reasoning assistant. ALWAYS respond in this EXACT format:\n\n"
    "<think>step-by-step reasoning</think>\n"
    "<answer>\\boxed{final_answer}</answer>"
)
USER_SUFFIX = "Please reason step by step, then provide your final answer."

# The card's frame and pixel configuration for every val row.
CARD_VIDEO_SETTINGS = {"fps": 1.0, "max_frames": 64, "min_pixels": 3136, "max_pixels": 501760}

MESSAGE = pa.struct([("role", pa.string()), ("content", pa.string())])
IMAGE = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
VIDEO = pa.struct([
    ("type", pa.string()),
    ("video", pa.string()),
    ("fps", pa.float64()),
    ("max_frames", pa.int64()),
    ("min_pixels", pa.int64()),
    ("max_pixels", pa.int64()),
])
REWARD_MODEL = pa.struct([("ground_truth", pa.string()), ("style", pa.string())])
EXTRA_INFO_FIELDS = ("reward_type", "answer", "task", "category", "question_type", "subject",
                     "source_id")
EXTRA_INFO = pa.struct([(name, pa.string()) for name in EXTRA_INFO_FIELDS])

VAL_SCHEMA = pa.schema([
    ("prompt", pa.list_(MESSAGE)),
    ("images", pa.list_(IMAGE)),
    ("videos", pa.list_(VIDEO)),
    ("data_source", pa.string()),
    ("ability", pa.string()),
    ("reward_model", REWARD_MODEL),
    ("extra_info", EXTRA_INFO),
])

# Which extra_info metadata each source populates (card, "Extra_info metadata fields"); the
# others are null. reward_type and answer are populated everywhere.
POPULATED_EXTRA_INFO: dict[str, frozenset[str]] = {
    "videomme_v1_test": frozenset({"task", "category", "question_type", "subject"}),
    "perceptioncomp_test": frozenset({"subject", "source_id"}),
    "video_holmes_test": frozenset({"source_id"}),
}

# The prefix the published parquets carry in their file:// paths (card, remapping example).
FOREIGN_PREFIX = "file:///scratch/users/astar/ares/suns1/trung/cache"
