"""Reading benchlake's own response records a block of lines at once gives, byte for byte, the
parts the record-by-record reader gives: the same rows, the same rejects with the same reasons
and lines, the same row groups, whatever the lines hold."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
import pytest

from dagster_project.records import NO_RECORDS, Record, _jsonl, jsonl_blocks, jsonl_record
from dagster_project.tables import rows_to_table, streaming_parquet
from dagster_project.video_val import responses
from dagster_project.video_val.responses import (
    BATCH_ROWS,
    MAX_RECORD_BYTES,
    RESPONSE_REJECTS_SCHEMA,
    RESPONSES_SCHEMA,
    ResponseFile,
    write_response_part,
)

THINK = "<think>" + "the clip shows a cup, then a hand " * 6 + "</think>\n<answer>\\boxed{B}</answer>"


def _own(i: int, **changes) -> str:
    record = {"run_id": "run-1", "step": f"global_step_{i % 7}", "uid": f"src:{i}",
              "sample_idx": i % 4, "response": f"{THINK} #{i}"}
    return json.dumps({**record, **changes})


# (line, whether it is benchlake's canonical shape) — the shape the fast path must take
HOSTILE = [
    (_own(1), True),
    (_own(2, step=40), True),
    (_own(3, step="0012"), True),
    (json.dumps({"run_id": "r", "step": 5, "uid": "u", "response": "no sample"}), True),
    (json.dumps({"run_id": "r", "step": 5, "uid": "u", "sample_idx": 0, "response": ""}), True),
    (_own(4).replace(", ", ",").replace(": ", ":"), True),  # compact
    (_own(5, response="tabs between the tokens").replace(", ", ",\t "), True),
    (_own(6, response='say "C", \\ then </answer> {"uid": "x"}'), True),
    (_own(7, response="caf\u00e9 \u2028 \x7f"), True),  # escaped by json.dumps
    (_own(7, response="\U0001f600"), False),  # escaped as a surrogate pair: read one by one
    (json.dumps({"run_id": "r", "step": 1, "uid": "u", "response": "caf\u00e9 \U0001f600"},
                ensure_ascii=False), True),
    (_own(8, step=999_999_999_999_999_999, sample_idx=123_456_789_012_345_678), True),
    (_own(9, response="ends in a backslash \\"), False),
    ('{"run_id": "r", "step": 1, "uid": "u", "response": "a\\u0000\\/\\b\\f\\r\\t"}', True),
    # everything below is refused, or read another way, by the record-by-record rules
    (_own(10, step=-1), False),
    (_own(11, step="global_step_x"), False),
    (_own(12, step=1.0), False),
    (_own(13, step=True), False),
    (_own(14, step=10**19), False),
    (_own(15, sample_idx=-1), False),
    (_own(16, sample_idx=None), False),
    (_own(17, sample_idx=2.0), False),
    (_own(18, run_id=""), False),
    (_own(19, run_id=5), False),
    (_own(20, uid=None), False),
    (_own(21, uid=7), False),
    (_own(22, response=None), False),
    (_own(23, response=5), False),
    (json.dumps({"run_id": "r", "step": 3, "data_source": "src", "row_index": 4,
                 "response": "x"}), False),
    (json.dumps({"run_id": "r", "step": 3, "data_source": "src", "row_index": "4",
                 "response": "x"}), False),
    (json.dumps({"run_id": "r", "step": 3, "data_source": "src", "row_index": True,
                 "response": "x"}), False),
    (json.dumps({"response": "other order", "uid": "u", "step": 1, "run_id": "r"}), False),
    (_own(24)[:-1] + ', "extra": [1, {"a": null}]}', False),
    (_own(25)[:-1] + ', "response": "second"}', False),  # a key twice
    (_own(26)[:-1] + '} trailing', False),
    (_own(27) + _own(28), False),  # two objects on one line
    (_own(29).replace("#29", "\\u00e9\\ud83d\\ude00"), False),  # a surrogate pair
    (_own(30).replace("#30", "\\ud800 lone"), False),
    (_own(31).replace("#31", "\\udc00"), False),
    (_own(32).replace("#32", "raw\tcontrol\x01chars"), False),
    (_own(33).replace("#33", "bad \\x escape"), False),
    (_own(34).replace("#34", "short \\u12"), False),
    (_own(35).replace("#35", 'unescaped " quote'), False),
    (_own(36).replace("#36", '\\\\", "x": "y'), False),  # a string that ends early
    (_own(37).replace('"step"', '"step": 1, "step"'), False),
    ('{"run_id": "r", "step": NaN, "uid": "u", "response": "x"}', False),
    ('{"run_id": "r", "step": 01, "uid": "u", "response": "x"}', False),
    ('{"run_id": "r", "step": -0, "uid": "u", "response": "x"}', False),
    ("{broken", False),
    ("[1, 2]", False),
    ('"a string"', False),
    ("5", False),
    ("null", False),
    ("", False),
    ("   \t", False),
    ("\r", False),
]


# Lines Polars' decoder refuses: a block holding one is matched line by line.
UNDECODABLE = ("\x01", "\\x", "\\u12")


def _write_hostile(path: Path, decodable_only: bool) -> None:
    """The hostile lines between canonical ones, twice (CRLF for some, a BOM first, invalid
    UTF-8 and records over the limit, no final newline)."""
    out = [b"\xef\xbb\xbf"]
    hostile = [(line, plain) for line, plain in HOSTILE
               if not (decodable_only and any(bad in line for bad in UNDECODABLE))]
    for k, (line, _) in enumerate(hostile * 2):
        ending = b"\r\n" if k % 9 == 4 else b"\n"
        out += [_own(1000 + k).encode() + b"\n", line.encode("utf-8", "surrogatepass") + ending]
    out += [b'{"run_id": "r\xff", "step": 1, "uid": "u", "response": "x"}\n',
            b'{"run_id": "r", "step": 1, "uid": "u", "response": "\xc3"}\n']
    fill = "x" * MAX_RECORD_BYTES
    out.append(_own(1, response=fill).encode() + b"\n")  # over the limit
    out.append(_own(2, response=fill[:MAX_RECORD_BYTES - 200]).encode() + b"\n")  # under it
    out.append(_own(3).encode())  # the last line has no newline
    path.write_bytes(b"".join(out))


def _record_by_record(f: ResponseFile, rows_path: Path, rejects_path: Path) -> None:
    """The parts as the record-by-record reader writes them: `BATCH_ROWS` rows a row group."""
    where = {"source_file": f.source_file, "file_version": f.version}
    with streaming_parquet(rows_path, RESPONSES_SCHEMA) as rows_out, \
            streaming_parquet(rejects_path, RESPONSE_REJECTS_SCHEMA) as rejects_out:
        rows, rejects = [], []
        for line, row, problem, raw in responses._records(f):
            if row is not None:
                rows.append({**row, **where, "line": line})
            else:
                rejects.append({**where, "line": line, "reason": problem, "raw": raw})
            if len(rows) == BATCH_ROWS:
                rows_out.write(rows_to_table(rows, RESPONSES_SCHEMA))
                rows = []
            if len(rejects) == BATCH_ROWS:
                rejects_out.write(rows_to_table(rejects, RESPONSE_REJECTS_SCHEMA))
                rejects = []
        rows_out.write(rows_to_table(rows, RESPONSES_SCHEMA))
        rejects_out.write(rows_to_table(rejects, RESPONSE_REJECTS_SCHEMA))


def _both(tmp_path: Path, source: Path) -> tuple[dict, dict]:
    f = ResponseFile(source.name, 2, "0" * 64, source)
    write_response_part(f, tmp_path / "rows.parquet", tmp_path / "rejects.parquet")
    _record_by_record(f, tmp_path / "rows-ref.parquet", tmp_path / "rejects-ref.parquet")
    got = {k: (tmp_path / f"{k}.parquet").read_bytes() for k in ("rows", "rejects")}
    ref = {k: (tmp_path / f"{k}-ref.parquet").read_bytes() for k in ("rows", "rejects")}
    return got, ref


@pytest.mark.parametrize("decodable_only", [False, True])
def test_hostile_lines_give_the_record_by_record_parts_byte_for_byte(tmp_path, decodable_only):
    source = tmp_path / "hostile.jsonl"
    _write_hostile(source, decodable_only)
    got, ref = _both(tmp_path, source)
    rows = pl.read_parquet(tmp_path / "rows.parquet")
    rejects = pl.read_parquet(tmp_path / "rejects.parquet")
    ref_rows = pl.read_parquet(tmp_path / "rows-ref.parquet")
    ref_rejects = pl.read_parquet(tmp_path / "rejects-ref.parquet")
    assert rows.equals(ref_rows)
    assert rejects.equals(ref_rejects), rejects.join(
        ref_rejects, on="line", how="full").filter(pl.col("reason") != pl.col("reason_right"))
    assert got == ref
    # The file really is hostile: each kind of problem is there, with its line.
    reasons = " | ".join(rejects["reason"].to_list())
    for words in ("not JSON", "ambiguous JSON", "not UTF-8", "over the limit", "lone surrogate",
                  "not a JSON object", "is not a non-negative integer", "of 64 bits",
                  "row_index", "run_id missing", "no uid", "response missing"):
        assert words in reasons, words
    assert rejects["line"].null_count() == 0
    assert rows.height > 100 and rows["line"].is_sorted()


def test_the_fast_path_takes_the_canonical_lines_and_only_them():
    # Without this, the differential test above would also pass with no fast path at all. All
    # the lines at once: the decoder refuses some, so they are matched one by one; without the
    # lines it refuses: the cheap checks alone.
    expected = [plain for _, plain in HOSTILE]
    text = pl.Series([line for line, _ in HOSTILE], dtype=pl.String)
    fast, fields = responses._plain_records(text)
    assert fast.to_list() == expected
    assert fields["response"][0] == json.loads(HOSTILE[0][0])["response"]
    decodable = [i for i, (line, _) in enumerate(HOSTILE) if not any(
        bad in line for bad in UNDECODABLE)]
    assert len(decodable) == len(HOSTILE) - 3
    fast, fields = responses._plain_records(text.gather(decodable))
    assert fast.to_list() == [expected[i] for i in decodable]
    assert fields.height == sum(expected)


def test_row_groups_are_cut_as_the_record_by_record_reader_cuts_them(tmp_path):
    # More than two row groups of rows, rejects and blank lines spread over them.
    source = tmp_path / "many.jsonl"
    lines = []
    for i in range(2 * BATCH_ROWS + 1234):
        lines.append(_own(i) if i % 97 else "{broken" if i % 2 else "")
    source.write_text("\n".join(lines) + "\n")
    got, ref = _both(tmp_path, source)
    assert got == ref
    meta = pq.ParquetFile(tmp_path / "rows.parquet").metadata
    assert [meta.row_group(g).num_rows for g in range(meta.num_row_groups)][:2] == [
        BATCH_ROWS, BATCH_ROWS]


def test_files_without_records(tmp_path):
    for name, content in (("blank.jsonl", b"\n  \n\r\n"), ("bom.jsonl", b"\xef\xbb\xbf"),
                          ("empty.jsonl", b"")):
        source = tmp_path / name
        source.write_bytes(content)
        got, ref = _both(tmp_path, source)
        assert got == ref
        assert pl.read_parquet(tmp_path / "rejects.parquet")["reason"].to_list() == [
            "empty file: no records" if not content else
            "file holds no records (no non-blank line)"]


def test_blocks_split_lines_as_the_line_reader_does(tmp_path):
    # A small limit, so that lines over it fall across block edges in every way.
    limit = 40
    source = tmp_path / "lines.jsonl"
    long = '{"a": "' + "y" * 60 + '"}'
    body = "\n".join(['{"a": 1}', long, "", '{"a": 2}\r', "x" * 41, "x" * 42, long * 3,
                      '{"a": "é"}', "\t", long]).encode()
    for content in (body, body + b"\n", b"\xef\xbb\xbf" + body + b"\n\n", long.encode(),
                    b"x" * (limit + 1), b"x" * (limit + 2), b"\n" * 5):
        source.write_bytes(content)
        expected = list(_jsonl(source, limit))
        for block_bytes in (1, 2, 3, 7, 41, 42, 43, 64, 1 << 20):
            got = []
            for first, lines in jsonl_blocks(source, limit, block_bytes):
                for i, line in enumerate(lines):
                    rec = line if not isinstance(line, bytes) else jsonl_record(
                        line, first + i, limit)
                    if rec is not None:
                        got.append(rec)
            if not got:  # what the reader of the whole file says then
                got = [Record(None, None, problem=NO_RECORDS)]
            assert got == expected, (content, block_bytes)
