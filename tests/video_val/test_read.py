from __future__ import annotations

import base64
import hashlib
import json
import re
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dagster_project.video_val.read import (
    ParsedQuestion,
    ReadResult,
    inside_roots,
    parse_prefix_map,
    parse_user_message,
    read_val_parquet,
    remap_uri,
    video_roots,
)
from dagster_project.video_val.schema import (
    EXTRA_INFO_FIELDS,
    FOREIGN_PREFIX,
    SYSTEM_PROMPT,
    USER_SUFFIX,
    VAL_SCHEMA,
)

MME = "videomme_v1_test"
MME_FILE = "videomme-test.parquet"


def _user(question: str = "How many times does the presenter point?",
          options: tuple[str, ...] = ("Once", "Twice", "Three times", "Four times")) -> str:
    lines = ["<video>", question]
    lines += [f"{chr(ord('A') + i)}. {text}" for i, text in enumerate(options)]
    lines.append(USER_SUFFIX)
    return "\n".join(lines)


def _row(i: int = 0, data_source: str = MME, **overrides: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "prompt": [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": _user(f"Question {i}: how many times?")},
        ],
        "images": [],
        "videos": [{
            "type": "video",
            "video": f"{FOREIGN_PREFIX}/videomme/data/vid{i:05d}.mp4",
            "fps": 1.0, "max_frames": 64, "min_pixels": 3136, "max_pixels": 501760,
        }],
        "data_source": data_source,
        "ability": "video_understanding",
        "reward_model": {"ground_truth": "C", "style": "rule"},
        "extra_info": {
            "reward_type": "multiple_choice", "answer": "C", "task": "Counting Problem",
            "category": "Science", "question_type": "short", "subject": "Physics",
            "source_id": None,
        },
    }
    row.update(overrides)
    return row


def _write(path: Path, rows: list[dict[str, Any]], schema: pa.Schema = VAL_SCHEMA) -> Path:
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path)
    return path


def _good_file(tmp_path: Path, n: int = 3, name: str = MME_FILE) -> Path:
    return _write(tmp_path / name, [_row(i) for i in range(n)])


def _actions(result: ReadResult, action: str) -> list[dict[str, Any]]:
    return [r for r in result.rejects if r["action"] == action]


def _assert_accounted(result: ReadResult) -> None:
    """Every input row is accepted or row_rejected, never both, never neither."""
    accepted = {r["row_index"] for r in result.rows}
    rejected = {r["row_index"] for r in _actions(result, "row_rejected")}
    assert not accepted & rejected
    assert accepted | rejected == set(range(result.n_rows))


# --------------------------------------------------------------------------- happy path


def test_good_file_reads_all_rows_flat(tmp_path: Path) -> None:
    path = _good_file(tmp_path)
    result = read_val_parquet(path, MME)
    assert result.rejects == []
    assert result.n_rows == 3 and len(result.rows) == 3
    row = result.rows[1]
    assert row["uid"] == f"{MME}:1"
    assert row["row_index"] == 1
    assert row["question"] == "Question 1: how many times?"
    assert row["option_letters"] == "ABCD"
    assert row["options"][2] == {"letter": "C", "text": "Three times"}
    assert row["n_options"] == 4
    assert row["ground_truth"] == "C" and row["answer"] == "C"
    assert row["reward_style"] == "rule" and row["reward_type"] == "multiple_choice"
    assert row["ability"] == "video_understanding"
    assert row["system_prompt"] == SYSTEM_PROMPT
    assert row["user_prompt"].startswith("<video>\n")
    assert row["task"] == "Counting Problem" and row["source_id"] is None
    assert row["video_uri"] == f"{FOREIGN_PREFIX}/videomme/data/vid00001.mp4"
    assert (row["fps"], row["max_frames"], row["min_pixels"], row["max_pixels"]) == (
        1.0, 64, 3136, 501760)
    assert row["source_file"] == MME_FILE
    assert row["source_fingerprint"] == result.fingerprint
    assert row["extra_columns"] is None
    assert set(EXTRA_INFO_FIELDS) <= set(row)


def test_a_repeated_row_is_kept_as_its_own_question_and_flagged(tmp_path: Path) -> None:
    rows = [_row(0), _row(1), _row(0), _row(2), _row(0)]
    result = read_val_parquet(_write(tmp_path / MME_FILE, rows), MME)
    assert [r["uid"] for r in result.rows] == [f"{MME}:{i}" for i in range(5)]
    flagged = {r["row_index"]: r["reason"] for r in _actions(result, "noted")}
    assert sorted(flagged) == [2, 4]
    assert all(reason.startswith(f"duplicate of {MME}:0:") for reason in flagged.values())
    # Another ground truth is another question, not a duplicate.
    answer_a = _row(0, reward_model={"ground_truth": "A", "style": "rule"})
    other = read_val_parquet(_write(tmp_path / MME_FILE, [_row(0), answer_a]), MME)
    assert not [r for r in _actions(other, "noted") if "duplicate" in r["reason"]]


def test_fingerprint_is_sha256_of_file_bytes(tmp_path: Path) -> None:
    path = _good_file(tmp_path)
    result = read_val_parquet(path, MME)
    assert result.fingerprint == hashlib.sha256(path.read_bytes()).hexdigest()
    assert read_val_parquet(path, MME).fingerprint == result.fingerprint
    _write(path, [_row(i) for i in range(4)])
    assert read_val_parquet(path, MME).fingerprint != result.fingerprint


def test_compatible_but_different_types_still_read(tmp_path: Path) -> None:
    # int fps, reordered struct fields, large_string columns, no `type` in the video struct.
    video = pa.struct([("max_pixels", pa.int32()), ("min_pixels", pa.int32()),
                       ("video", pa.large_string()), ("max_frames", pa.int32()),
                       ("fps", pa.int64())])
    message = pa.struct([("content", pa.large_string()), ("role", pa.large_string())])
    schema = pa.schema([
        ("data_source", pa.large_string()),
        ("prompt", pa.large_list(message)),
        ("videos", pa.list_(video)),
        ("images", VAL_SCHEMA.field("images").type),
        ("ability", pa.large_string()),
        ("reward_model", pa.struct([("style", pa.string()), ("ground_truth", pa.string())])),
        ("extra_info", pa.struct([("answer", pa.string()), ("reward_type", pa.string())])),
    ])
    rows = []
    for i in range(3):
        row = _row(i)
        row["videos"] = [{"video": row["videos"][0]["video"], "fps": 1, "max_frames": 64,
                          "min_pixels": 3136, "max_pixels": 501760}]
        row["extra_info"] = {"answer": "C", "reward_type": "multiple_choice"}
        rows.append(row)
    path = _write(tmp_path / MME_FILE, rows, schema)
    result = read_val_parquet(path, MME)
    assert result.rejects == []
    assert len(result.rows) == 3
    assert result.rows[0]["fps"] == 1.0 and isinstance(result.rows[0]["fps"], float)
    assert result.rows[0]["task"] is None and result.rows[0]["answer"] == "C"


# --------------------------------------------------------------------------- bad input: files


def test_not_a_parquet_file_is_rejected_and_other_files_still_read(tmp_path: Path) -> None:
    bad = tmp_path / "perceptioncomp-test.parquet"
    bad.write_bytes(b"<html>Rate limited</html>\n")
    result = read_val_parquet(bad, "perceptioncomp_test")
    assert result.rows == [] and result.n_rows == 0
    assert result.fingerprint == hashlib.sha256(bad.read_bytes()).hexdigest()
    [reject] = result.rejects
    assert reject["action"] == "file_rejected"
    assert reject["source_file"] == "perceptioncomp-test.parquet"
    assert reject["row_index"] is None and reject["uid"] is None and reject["raw"] is None
    assert "not a readable parquet file" in reject["reason"]
    assert "perceptioncomp-test.parquet" in reject["reason"]

    assert len(read_val_parquet(_good_file(tmp_path), MME).rows) == 3


def test_missing_file_is_rejected(tmp_path: Path) -> None:
    result = read_val_parquet(tmp_path / "videoholmes-test.parquet", "video_holmes_test")
    [reject] = result.rejects
    assert reject["action"] == "file_rejected" and "cannot read" in reject["reason"]
    assert result.fingerprint is None and result.rows == []


def test_missing_column_rejects_the_file_and_other_files_still_read(tmp_path: Path) -> None:
    schema = pa.schema([f for f in VAL_SCHEMA if f.name not in ("ability", "images")])
    rows = [{k: v for k, v in _row(i).items() if k in schema.names} for i in range(3)]
    path = _write(tmp_path / MME_FILE, rows, schema)
    result = read_val_parquet(path, MME)
    assert result.rows == []
    assert result.n_rows == 3
    [reject] = result.rejects
    assert reject["action"] == "file_rejected" and reject["source_file"] == MME_FILE
    assert reject["row_index"] is None
    assert "missing required column(s)" in reject["reason"]
    assert "images" in reject["reason"] and "ability" in reject["reason"]

    other = _good_file(tmp_path, name="videomme-copy.parquet")
    assert len(read_val_parquet(other, MME).rows) == 3


def test_column_of_another_type_rejects_the_file_naming_it(tmp_path: Path) -> None:
    """A struct column written as a string cannot be read row by row: one file reject naming
    the column, the expected and the found type (not a "missing" reason on every row)."""
    def retyped(schema: pa.Schema, name: str, kind: pa.DataType) -> pa.Schema:
        return schema.set(schema.get_field_index(name), pa.field(name, kind))

    schema = retyped(VAL_SCHEMA, "reward_model", pa.string())
    rows = [_row(i, reward_model=json.dumps({"ground_truth": "C", "style": "rule"}))
            for i in range(3)]
    result = read_val_parquet(_write(tmp_path / MME_FILE, rows, schema), MME)
    assert result.rows == [] and result.n_rows == 3
    [reject] = result.rejects
    assert (reject["action"], reject["source_file"], reject["row_index"]) == (
        "file_rejected", MME_FILE, None)
    assert reject["reason"] == ("column reward_model has type string, expected "
                                "struct<ground_truth: string, style: string>")

    schema = retyped(retyped(VAL_SCHEMA, "videos", pa.string()), "data_source", pa.int64())
    rows = [_row(i, videos="file:///x.mp4", data_source=7) for i in range(2)]
    [reject] = read_val_parquet(_write(tmp_path / MME_FILE, rows, schema), MME).rejects
    assert reject["reason"].split("; ") == [  # in the card's column order
        f"column videos has type string, expected {VAL_SCHEMA.field('videos').type}",
        "column data_source has type int64, expected string"]


def test_extra_column_is_noted_and_kept_in_extra_columns(tmp_path: Path) -> None:
    schema = VAL_SCHEMA.append(pa.field("difficulty", pa.int64())).append(
        pa.field("thumb", pa.binary()))
    rows = [_row(i, difficulty=i * 10, thumb=b"\x00\x01") for i in range(3)]
    rows[2]["difficulty"] = None
    result = read_val_parquet(_write(tmp_path / MME_FILE, rows, schema), MME)
    assert len(result.rows) == 3  # all rows still accepted
    notes = _actions(result, "noted")
    assert [n["reason"] for n in notes] == [
        "extra column 'difficulty' kept in extra_columns",
        "extra column 'thumb' kept in extra_columns",
    ]
    assert all(n["row_index"] is None and n["source_file"] == MME_FILE for n in notes)
    extras = json.loads(result.rows[1]["extra_columns"])
    assert extras["difficulty"] == 10
    assert base64.b64decode(extras["thumb"]["base64"]) == b"\x00\x01"
    assert json.loads(result.rows[2]["extra_columns"])["difficulty"] is None


def test_extra_extra_info_field_is_kept(tmp_path: Path) -> None:
    info = pa.struct([*VAL_SCHEMA.field("extra_info").type, pa.field("duration", pa.string())])
    schema = VAL_SCHEMA.set(VAL_SCHEMA.get_field_index("extra_info"), pa.field("extra_info", info))
    rows = [_row(i) for i in range(2)]
    for row in rows:
        row["extra_info"]["duration"] = "short"
    result = read_val_parquet(_write(tmp_path / MME_FILE, rows, schema), MME)
    assert len(result.rows) == 2
    assert "extra_info field 'duration'" in _actions(result, "noted")[0]["reason"]
    assert json.loads(result.rows[0]["extra_columns"]) == {"extra_info.duration": "short"}


# --------------------------------------------------------------------------- bad input: rows


def _read_with(tmp_path: Path, bad_index: int, **overrides: Any) -> ReadResult:
    rows = [_row(i) for i in range(4)]
    rows[bad_index] = _row(bad_index, **overrides)
    result = read_val_parquet(_write(tmp_path / MME_FILE, rows), MME)
    _assert_accounted(result)
    return result


def _single_row_reject(result: ReadResult, row_index: int) -> dict[str, Any]:
    [reject] = _actions(result, "row_rejected")
    assert reject["source_file"] == MME_FILE
    assert reject["row_index"] == row_index
    assert reject["uid"] == f"{MME}:{row_index}"
    assert json.loads(reject["raw"])["data_source"] == MME
    assert [r["row_index"] for r in result.rows] == [i for i in range(4) if i != row_index]
    return reject


def test_null_extra_info_is_noted_and_row_kept(tmp_path: Path) -> None:
    result = _read_with(tmp_path, 1, extra_info=None)
    assert len(result.rows) == 4
    [note] = _actions(result, "noted")
    assert note["row_index"] == 1 and note["uid"] == f"{MME}:1"
    assert "extra_info is null" in note["reason"]
    row = result.rows[1]
    assert all(row[name] is None for name in EXTRA_INFO_FIELDS)
    assert row["ground_truth"] == "C"


def test_ground_truth_not_among_options_rejects_row(tmp_path: Path) -> None:
    result = _read_with(tmp_path, 2, reward_model={"ground_truth": "E", "style": "rule"})
    reject = _single_row_reject(result, 2)
    assert "ground truth 'E' is not one of the options ABCD" in reject["reason"]


def test_multi_letter_ground_truth_rejects_row(tmp_path: Path) -> None:
    result = _read_with(tmp_path, 0, reward_model={"ground_truth": "AB", "style": "rule"})
    assert "ground truth 'AB'" in _single_row_reject(result, 0)["reason"]


def test_missing_reward_model_or_ground_truth_rejects_row(tmp_path: Path) -> None:
    result = _read_with(tmp_path, 0, reward_model=None)
    assert "reward_model is missing" in _single_row_reject(result, 0)["reason"]
    result = _read_with(tmp_path, 3, reward_model={"ground_truth": None, "style": "rule"})
    assert "ground truth is missing" in _single_row_reject(result, 3)["reason"]


def test_two_videos_rejects_row(tmp_path: Path) -> None:
    videos = _row(0)["videos"] * 2
    result = _read_with(tmp_path, 3, videos=videos)
    reject = _single_row_reject(result, 3)
    assert "row has 2 videos; exactly one expected" in reject["reason"]
    assert len(json.loads(reject["raw"])["videos"]) == 2


def test_no_videos_rejects_row(tmp_path: Path) -> None:
    result = _read_with(tmp_path, 0, videos=[])
    assert "row has 0 videos" in _single_row_reject(result, 0)["reason"]


@pytest.mark.parametrize("uri", ["/scratch/cache/videomme/data/x.mp4",
                                 "https://example.org/x.mp4", "s3://bucket/x.mp4"])
def test_non_file_uri_rejects_row(tmp_path: Path, uri: str) -> None:
    videos = [{**_row(0)["videos"][0], "video": uri}]
    result = _read_with(tmp_path, 1, videos=videos)
    reject = _single_row_reject(result, 1)
    assert f"video {uri!r} is not a file:// URI" in reject["reason"]


def test_data_source_mismatch_or_null_rejects_row(tmp_path: Path) -> None:
    rows = [_row(0), _row(1, data_source="perceptioncomp_test"), _row(2, data_source=None)]
    result = read_val_parquet(_write(tmp_path / MME_FILE, rows), MME)
    _assert_accounted(result)
    assert [r["row_index"] for r in result.rows] == [0]
    mismatch, null = _actions(result, "row_rejected")
    assert mismatch["uid"] == "perceptioncomp_test:1"
    assert "'perceptioncomp_test' does not match 'videomme_v1_test'" in mismatch["reason"]
    assert null["uid"] == f"{MME}:2"  # falls back to the expected data_source
    assert "data_source is null" in null["reason"]


def test_bad_user_message_rejects_row(tmp_path: Path) -> None:
    prompt = [{"role": "system", "content": SYSTEM_PROMPT},
              {"role": "user", "content": "How many?\nA. One\nB. Two"}]
    result = _read_with(tmp_path, 2, prompt=prompt)
    assert "no <video> placeholder" in _single_row_reject(result, 2)["reason"]

    prompt = [{"role": "user", "content": "<video>\nDescribe the video."}]
    result = _read_with(tmp_path, 0, prompt=prompt)
    assert "no option block" in _single_row_reject(result, 0)["reason"]

    result = _read_with(tmp_path, 1, prompt=[{"role": "system", "content": SYSTEM_PROMPT}])
    assert "prompt has no user message" in _single_row_reject(result, 1)["reason"]


def test_several_problems_give_one_reject_with_all_reasons(tmp_path: Path) -> None:
    videos = _row(0)["videos"] * 2
    result = _read_with(tmp_path, 0, videos=videos, data_source=None,
                        reward_model={"ground_truth": "Z", "style": "rule"})
    [reject] = _actions(result, "row_rejected")
    reason = reject["reason"]
    assert "2 videos" in reason and "'Z'" in reason and "data_source is null" in reason


def test_answer_mismatch_images_and_missing_settings_are_noted(tmp_path: Path) -> None:
    rows = [_row(i) for i in range(4)]
    rows[0]["extra_info"]["answer"] = "B"
    rows[1]["images"] = [{"bytes": b"\x89PNG" * 1000, "path": None}]
    rows[2]["videos"][0].update(fps=None, max_pixels=None)
    result = read_val_parquet(_write(tmp_path / MME_FILE, rows), MME)
    _assert_accounted(result)
    assert len(result.rows) == 4
    notes = {n["row_index"]: n["reason"] for n in _actions(result, "noted")}
    assert set(notes) == {0, 1, 2}
    assert "extra_info.answer 'B' differs from ground truth 'C'" in notes[0]
    assert "1 images" in notes[1]
    assert "video settings missing: fps, max_pixels" in notes[2]
    assert result.rows[2]["fps"] is None and result.rows[2]["max_frames"] == 64
    assert result.rows[0]["ground_truth"] == "C" and result.rows[0]["answer"] == "B"


def test_raw_json_shortens_large_bytes(tmp_path: Path) -> None:
    rows = [_row(0, images=[{"bytes": b"x" * 5000, "path": "a.png"},
                            {"bytes": b"hi", "path": None}], videos=[])]
    result = read_val_parquet(_write(tmp_path / MME_FILE, rows), MME)
    raw = json.loads(_actions(result, "row_rejected")[0]["raw"])
    assert raw["images"][0]["bytes"] == "<5000 bytes>"
    assert base64.b64decode(raw["images"][1]["bytes"]["base64"]) == b"hi"


# --------------------------------------------------------------------------- question parsing


def test_parse_basic_question() -> None:
    parsed = parse_user_message(_user())
    assert parsed == ParsedQuestion(
        question="How many times does the presenter point?",
        options=[("A", "Once"), ("B", "Twice"), ("C", "Three times"), ("D", "Four times")],
        option_letters="ABCD",
        suffix=USER_SUFFIX,
    )


def test_parse_multi_line_question_keeps_inner_newlines() -> None:
    content = ("<video>\n  Watch the clip.\n\nWhich object is moved first?  \n"
               "A. Cup\nB. Plate\nC. Fork\nD. Knife\nAnswer with the letter.\nThink first.")
    parsed = parse_user_message(content)
    assert parsed.question == "Watch the clip.\n\nWhich object is moved first?"
    assert parsed.suffix == "Answer with the letter.\nThink first."


@pytest.mark.parametrize("n", [2, 4, 5, 6])
def test_parse_option_counts(n: int) -> None:
    options = tuple(f"option {i}" for i in range(n))
    parsed = parse_user_message(_user("Pick one.", options))
    assert parsed.option_letters == "ABCDEF"[:n]
    assert [text for _, text in parsed.options] == list(options)


def test_parse_question_with_decoy_option_line_before_real_options() -> None:
    content = ("<video>\nThe sign reads:\nA. Smith & Sons\nB. Bakery\nWhat is sold in the shop?\n"
               "A. Bread\nB. Shoes\nC. Books\nD. Fish\n" + USER_SUFFIX)
    parsed = parse_user_message(content)
    assert parsed.question == ("The sign reads:\nA. Smith & Sons\nB. Bakery\n"
                               "What is sold in the shop?")
    assert parsed.options[0] == ("A", "Bread") and parsed.option_letters == "ABCD"


def test_parse_single_a_line_in_question_is_not_options() -> None:
    content = "<video>\nA. Lincoln said:\nWho speaks?\nA. Man\nB. Woman\n" + USER_SUFFIX
    parsed = parse_user_message(content)
    assert parsed.question == "A. Lincoln said:\nWho speaks?"
    assert parsed.option_letters == "AB"


@pytest.mark.parametrize("fmt", ["({k}) {t}", "{k}) {t}", "{k}. {t}"])
def test_parse_option_styles(fmt: str) -> None:
    pairs = zip("ABC", ["red", "green", "blue"], strict=True)
    opts = "\n".join(fmt.format(k=k, t=t) for k, t in pairs)
    parsed = parse_user_message(f"<video>\nWhat colour is the car?\n{opts}\n{USER_SUFFIX}")
    assert parsed.options == [("A", "red"), ("B", "green"), ("C", "blue")]
    assert parsed.question == "What colour is the car?"


def test_parse_mixed_styles_are_not_one_block() -> None:
    # A run keeps one marker style, so "A." + "B)" is not an option block.
    with pytest.raises(ValueError, match="no option block"):
        parse_user_message("<video>\nQ?\nA. x\nB) y\n")


def test_parse_out_of_order_letters_are_not_options() -> None:
    with pytest.raises(ValueError, match="no option block"):
        parse_user_message("<video>\nQ?\nA. x\nC. y\nD. z\n")


def test_parse_missing_placeholder() -> None:
    with pytest.raises(ValueError, match="no <video> placeholder"):
        parse_user_message("What happens?\nA. x\nB. y\n")


def test_parse_requires_at_least_two_options() -> None:
    with pytest.raises(ValueError, match="no option block"):
        parse_user_message("<video>\nWhat happens?\nA. only one\n" + USER_SUFFIX)


def test_parse_empty_question() -> None:
    with pytest.raises(ValueError, match="no question text"):
        parse_user_message("<video>\nA. x\nB. y\n")


def test_parse_crlf_and_inline_placeholder() -> None:
    parsed = parse_user_message("<video>What now?\r\nA. x\r\nB. y\r\nGo.")
    assert parsed.question == "What now?" and parsed.option_letters == "AB"
    assert parsed.suffix == "Go."


# --------------------------------------------------------------------------- prefix map


def test_prefix_map_parses_and_sorts_longest_first() -> None:
    text = " file:///a=file:///x ;; file:///a/b/c = file:///y;\n file:///a/b=file:///z ; "
    assert parse_prefix_map(text) == [
        ("file:///a/b/c", "file:///y"),
        ("file:///a/b", "file:///z"),
        ("file:///a", "file:///x"),
    ]
    assert parse_prefix_map("") == [] and parse_prefix_map(" ; ") == []


@pytest.mark.parametrize("text,bad", [("file:///a", "file:///a"),
                                      ("file:///a=file:///b; oops", "oops"),
                                      ("=file:///b", "=file:///b"),
                                      (" = file:///b", "= file:///b")])
def test_prefix_map_bad_items(text: str, bad: str) -> None:
    with pytest.raises(ValueError, match=re.escape(repr(bad))):
        parse_prefix_map(text)


def test_remap_longest_prefix_wins() -> None:
    pm = parse_prefix_map("file:///cache=file:///data; file:///cache/videomme=file:///fast/mme")
    assert remap_uri("file:///cache/videomme/data/v.mp4", pm) == ("/fast/mme/data/v.mp4", True)
    assert remap_uri("file:///cache/other/v.mp4", pm) == ("/data/other/v.mp4", True)
    # Longest wins even if the caller passes an unsorted list.
    unsorted = [("file:///cache", "file:///data"), ("file:///cache/videomme", "file:///m")]
    assert remap_uri("file:///cache/videomme/v.mp4", unsorted) == ("/m/v.mp4", True)


def test_remap_matches_only_at_path_boundary() -> None:
    pm = parse_prefix_map("file:///cache=file:///data")
    assert remap_uri("file:///cache2/v.mp4", pm) == ("/cache2/v.mp4", False)
    assert remap_uri("file:///cache", pm) == ("/data", True)
    pm = parse_prefix_map("file:///cache/=file:///data/")
    assert remap_uri("file:///cache/v.mp4", pm) == ("/data/v.mp4", True)
    pm = parse_prefix_map("file:///cache/=file:///data")
    assert remap_uri("file:///cache/v.mp4", pm) == ("/data/v.mp4", True)


def test_remap_card_prefix() -> None:
    pm = parse_prefix_map(f"{FOREIGN_PREFIX}=file:///srv/videos")
    uri = f"{FOREIGN_PREFIX}/videomme/data/fFjv93ACGo8.mp4"
    assert remap_uri(uri, pm) == ("/srv/videos/videomme/data/fFjv93ACGo8.mp4", True)


def test_remap_percent_encoded_paths() -> None:
    pm = parse_prefix_map("file:///old%20root=file:///new%20root")
    assert remap_uri("file:///old%20root/a%23b/c%C3%A9.mp4", pm) == (
        "/new root/a#b/cé.mp4", True)
    # A bare absolute NEW path is taken literally.
    pm = parse_prefix_map("file:///old=/mnt/my videos")
    assert remap_uri("file:///old/x%20y.mp4", pm) == ("/mnt/my videos/x y.mp4", True)


def test_remap_without_match_and_non_file_uris() -> None:
    assert remap_uri("file:///a/b", []) == ("/a/b", False)
    assert remap_uri("file://localhost/a/b", []) == ("/a/b", False)
    assert remap_uri("file://otherhost/a/b", []) == (None, False)
    pm = parse_prefix_map("file:///a=file:///b")
    assert remap_uri("https://example.org/a/b.mp4", pm) == (None, False)
    assert remap_uri("/a/b.mp4", pm) == (None, False)


def test_video_roots_come_from_the_map_or_the_explicit_setting() -> None:
    pm = parse_prefix_map(f"{FOREIGN_PREFIX}=file:///srv/videos; file:///a=/mnt/my%20b")
    assert video_roots(pm) == [Path("/srv/videos"), Path("/mnt/my%20b")]
    assert video_roots(pm, " /data/x ; file:///data/y%20z ;relative") == [
        Path("/data/x"), Path("/data/y z")]  # VIDEO_VAL_ROOTS wins; relative roots are no roots
    assert video_roots([]) == []


@pytest.mark.parametrize(("path", "inside"), [
    ("/srv/videos/videomme/data/v.mp4", True),
    ("/srv/videos", True),
    ("/srv/videos/./a/../b.mp4", True),
    ("/srv/videos/../../etc/passwd", False),  # `..` out of the root after the map
    ("/srv/videos2/v.mp4", False),  # a sibling with the root's name as prefix
    ("/etc/passwd", False),
    ("srv/videos/v.mp4", False),  # relative
])
def test_inside_roots_is_decided_on_the_normalized_path(path: str, inside: bool,
                                                        tmp_path: Path) -> None:
    assert inside_roots(path, [Path("/srv/videos"), tmp_path]) is inside
    assert inside_roots(path, []) is False


# --------------------------------------------------------------------------- speed


def test_full_size_read_timing(tmp_path: Path) -> None:
    n = 5645
    rows = [_row(i) for i in range(n)]
    rows[10]["reward_model"] = {"ground_truth": "E", "style": "rule"}
    path = _write(tmp_path / MME_FILE, rows)
    start = time.perf_counter()
    result = read_val_parquet(path, MME)
    elapsed = time.perf_counter() - start
    print(f"\nread_val_parquet: {n} rows in {elapsed:.3f}s")
    assert result.n_rows == n and len(result.rows) == n - 1
    _assert_accounted(result)
