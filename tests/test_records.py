"""The drop-folder reader's JSON (`records.py`): orjson's fast reading gives exactly what the
strict reader gives, including where orjson alone would not (repeated keys, integers over 64
bits), and every refusal stays the strict reader's."""

from __future__ import annotations

import json

import pytest

from dagster_project.records import STRICT_JSON, _Ambiguous, jsonl_record
from dagster_project.rynn_vp.judgment_records import canonical_json

LIMIT = 2**20


def strict(text: str) -> tuple[str, object]:
    """What the strict reader alone makes of `text`: ("value", its repr) or ("problem", …)."""
    try:
        return "value", repr(STRICT_JSON.decode(text))
    except (json.JSONDecodeError, _Ambiguous) as exc:
        return "problem", type(exc).__name__


@pytest.mark.parametrize("text", [
    '{"a": 1, "b": [1.5, -0, -0.0, 1e-7, 0.00001, true, null], "c": {"d": "x:y"}}',
    '{"a": 1, "a": 2}',  # orjson keeps the last
    '{"k": "x:y", "o": {"a": 1, "a": 2}}',  # nested, beside a colon in a string
    # an escaped colon in a string would make up for the repeated key's colon in a count
    '{"k": "\\u003a", "a": 1, "a": 2}',
    '{"\\u0061": 1, "a": 2}',  # the same key, once escaped
    '{"n": 123456789012345678901}',  # orjson: a float
    '{"n": 18446744073709551616, "m": -9223372036854775809}',
    '{"n": 9223372036854775807, "m": 1234567890123456789}',
    '{"v": 1E400}',  # the strict reader: inf; orjson refuses it
    '[1, NaN]', '{"v": -Infinity}',
    '{"é": "ü", "x": "\\n\\t\\"\\\\ :"}',
    '{"a": 1,}', '{"a": "\x01"}', '{"a": 1} 2',
])
def test_what_the_fast_path_reads_is_what_the_strict_reader_reads(text: str) -> None:
    rec = jsonl_record(text.encode(), 7, LIMIT)
    assert rec is not None and rec.line == 7 and rec.raw == text
    kind, what = strict(text)
    if kind == "value":
        assert rec.problem is None and repr(rec.value) == what
        if rec.sorted_text is not None:  # read by orjson: its sorted text is kept, for digests
            assert canonical_json(rec.value, rec.sorted_text) == json.dumps(
                STRICT_JSON.decode(text), sort_keys=True, separators=(",", ":"))
    else:
        assert rec.problem is not None and rec.value is None
        assert rec.problem.startswith("ambiguous JSON" if what == "_Ambiguous" else "not JSON")


def test_a_repeated_key_is_named_whichever_reader_sees_it() -> None:
    for text in ('{"a": 1, "a": 2}', '{"k": "\\u003a", "a": 1, "a": 2}'):
        rec = jsonl_record(text.encode(), 1, LIMIT)
        assert rec.problem == 'ambiguous JSON: key "a" appears twice in one object'
