"""Rewards for the val suite: every response scored once, under both format rules.

The dataset card ("Reward and answer format") fixes the rule: the letter from `\\boxed{...}` in
the `<answer>` block, else lmms-eval's `extract_mcq_answer` (`answer_extraction.py`), a format
reward (`format_rules.py`), and composite = 0.8 × accuracy + 0.2 × format. A scoring *policy* is
data (the dbt seed `vv_scoring_policies`, read in Python by `policies.py`): which format rule,
which weights; the views expand the scores per policy, so no weight is written here.

`correct` = the extracted letter equals the ground truth (exact string comparison). Option
letters are letters or digits ("ABCD"); other option strings raise ValueError.

`score_frame` is the batch path for large frames: exactly `score_response` row by row, but the
long texts are scanned by Polars (three passes per row: the head of the thinking, the number
of "<", the text after the first `</think>`), Python runs only on the short, repetitive pieces
(answer blocks, text after the thinking) once per distinct value, lmms-eval's extractor runs as
Polars expressions on ASCII free text, and slices are scored by two threads. Rows no shortcut
can vouch for take the Python rules (`score_response`).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache
from typing import Literal, NamedTuple

import polars as pl

from dagster_project.tables import raw_schema
from dagster_project.video_val.answer_extraction import (
    _EDGE_PUNCTUATION,
    _PHRASE_CORES,
    ANSWER_CLOSE,
    ANSWER_OPEN,
    THINK_CLOSE,
    boxed_candidate,
    extract_boxed_answer,
    fallback_letter,
)
from dagster_project.video_val.format_rules import MIN_THINK_CHARS, format_card, format_exact

ExtractionMethod = Literal["boxed_answer", "fallback", "none"]
# Bump when a rule here (or in answer_extraction / format_rules) changes what a response scores:
# every scored part is then scored again.
SCORING_VERSION = "1"


def _check_letter_value(option_letters: str) -> None:
    # The lmms-eval re-implementation takes single letters/digits only (_unique_choices).
    if option_letters and not option_letters.isalnum():
        raise ValueError(f"option letters must be letters or digits, got {option_letters!r}")


class Scored(NamedTuple):
    extracted: str | None
    extraction_method: ExtractionMethod
    correct: bool
    format_card: bool
    format_exact: bool


def score_response(response: str, option_letters: str, ground_truth: str | None) -> Scored:
    """Score one response: the extracted letter (the same under every policy) and the format
    flag of each format rule.

    `option_letters` is the question's options, e.g. "ABCD": letters or digits ("" accepts
    nothing); anything else raises ValueError, as in score_frame.
    """
    _check_letter_value(option_letters)
    extracted = extract_boxed_answer(response, option_letters)
    method: ExtractionMethod = "boxed_answer"
    if extracted is None:
        extracted = fallback_letter(response, option_letters)
        method = "none" if extracted is None else "fallback"
    correct = extracted is not None and extracted == ground_truth
    return Scored(extracted, method, correct, format_card(response), format_exact(response))


# ------------------------------------------------------------------------------ batch path
#
# score_frame sorts rows into lanes with three scans of every row (Polars, all cores); each
# lane's shortcut is exact for the rows it takes — the argument is written next to it — and
# what no shortcut covers goes through score_response's Python rules, once per distinct value.
# "<" is the pivot: every tag starts with it, so counting it (n_lt) tells when the tags found
# at the ends of a response are the only ones. Rows the shortcuts cannot vouch for (several
# think blocks, "<" inside answers, non-ASCII free text, answer phrases in free text, …) take
# the Python rule; tests/test_val_scoring.py checks every lane against score_response.

WS_CLASS = r"[\s\x1c-\x1f]"  # = str.isspace: Rust's \s lacks \x1c-\x1f (checked in the tests)
_WS = WS_CLASS
# WS* <think>, then MIN_THINK_CHARS non-space characters before the next "<".
_HEAD = rf"^{_WS}*<think>(?:{_WS}*[^\s\x1c-\x1f<]){{{MIN_THINK_CHARS}}}"
# The last <answer> block, when it holds no "<" and nothing after it does.
_LAST_BLOCK = r"<answer>([^<]*)</answer>[^<]*$"
_ANY_TAG = "<think>|</think>|<answer>|</answer>"
# Frames of ≥ 2 slices are scored by two threads (see score_frame).
_SLICE_ROWS = 500_000
_MAX_SLICES = 8
_OUTPUT_COLUMNS = ("extracted", "extraction_method", "correct", "format_card", "format_exact")


def _memo(fn: Callable[[str, str], str | None], keys: pl.Series, letters: pl.Series) -> pl.Series:
    """fn(key, letters) for each row, computed once per distinct pair (small subsets)."""
    cache: dict[tuple[str, str], str | None] = {}
    out = []
    for pair in zip(keys.to_list(), letters.to_list(), strict=True):
        if pair not in cache:
            cache[pair] = fn(*pair)
        out.append(cache[pair])
    return pl.Series(out, dtype=pl.String)


def _map_distinct(keys: pl.Series, fn: Callable[[str], str | None]) -> pl.Series:
    """fn(key) for each row of a large column: Python once per distinct key, Polars looks up."""
    table = {k: fn(k) for k in keys.unique().to_list() if k is not None}
    return keys.replace_strict(table, default=None, return_dtype=pl.String)


def _accepted(candidate: pl.Series, letters: pl.Series) -> pl.Series:
    """candidate where it is one of the option letters (one character contained in them)."""
    ok = (candidate.str.len_chars() == 1) & letters.str.contains(candidate, literal=True)
    return candidate.zip_with(ok.fill_null(False), pl.Series([None], dtype=pl.String))


def _after_first_think(text: pl.Series) -> pl.Series:
    """The text after upstream's first round of `<think>` removal (the text itself if none).

    strip_reasoning_tags cuts from the first "<think>" to the first "</think>" after it (one
    cannot overlap the other), then loops; running the Python function on this remainder
    replays the rest of that loop, so it gives the same result as on the whole text. The
    remainder is usually short and repetitive ("\n\\boxed{C}"), which the memo likes. The
    leftmost match is the first "<think>" and, lazily, the first "</think>" after it; if that
    "<think>" has none after it, no later one has.
    """
    return text.str.replace(r"(?s)<think>.*?</think>", "")


# Upstream strips whitespace, then each of , . ! ? ; : ' " from both ends in turn. From the
# start that removes a run of whitespace, then a run of ",", of ".", …; from the end the same
# runs, innermost last. On ASCII text the stripped core is therefore the text minus these two
# anchored patterns (the longest matching prefix and suffix; checked in the tests).
_ASCII_WS = r"[\t-\r\x1c-\x1f ]"
_LEAD = "^" + _ASCII_WS + "*" + "".join(re.escape(m) + "*" for m in _EDGE_PUNCTUATION)
_TRAIL = "".join(re.escape(m) + "*" for m in reversed(_EDGE_PUNCTUATION)) + _ASCII_WS + "*$"
_PHRASE_CORE_RE = "(?i)" + "|".join(_PHRASE_CORES)  # on ASCII text: lower() then search


def _fallback_ascii(rows: pl.DataFrame) -> pl.DataFrame:
    """lmms-eval's extractor as Polars expressions, for rows (i, t, L) where `t` is ASCII and
    has no "</think>" (so strip_reasoning_tags(t) is t.strip()) and the options are ASCII
    letters/digits. On ASCII text str.strip, lower and isalpha are _ASCII_WS, ASCII case
    folding and [A-Za-z], and character offsets are byte offsets.

    Returns (i, letter, undecided): undecided rows contain an answer phrase and are left to the
    Python rule (rare in such texts, and fiddly to vectorize).
    """
    core, ws = pl.col("core"), _ASCII_WS
    out = []

    def emit(frame: pl.DataFrame, undecided: bool) -> None:
        out.append(frame.select("i", "letter", pl.lit(undecided).alias("undecided")))

    for group in rows["L"].unique().to_list():
        cls = "[" + "".join(sorted(set(group))) + "]"

        def last(pattern: str, offset: int, cls: str = cls) -> pl.Expr:
            # Same-format markers cannot overlap (a letter is never a marker character), so
            # the last non-overlapping match is the last occurrence: upstream's rfind.
            return core.str.extract_all(pattern.format(cls)).list.last().str.slice(offset, 1)

        # In priority order; each stage runs only on the rows the earlier ones left open.
        # Start/end: the first/last non-space character of the core (= of bare) is an option
        # and its neighbour inside bare, if any, is not a letter. Then answer phrases (every
        # ASCII phrase starts and ends with a letter, so it never touches the stripped ends:
        # looking in `t` is looking in the core) are left to Python. Then the markers; upstream
        # looks in " " + core + " ": the leading space makes no marker, the trailing one makes
        # a final option letter the last "X " marker.
        stages = [
            pl.coalesce(core.str.extract(f"^{ws}*({cls})(?:[^A-Za-z]|$)", 1),
                        core.str.extract(f"(?:^|[^A-Za-z])({cls}){ws}*$", 1)),
            None,
            pl.coalesce(last(r"\({}\)", 1), last(r"{}\.", 0), last("{}:", 0), last(r"{}\)", 0)),
            pl.coalesce(core.str.extract(f"({cls})$", 1), last("{} ", 0), last("{}", 0)),
        ]
        todo = rows.filter(pl.col("L") == group).with_columns(
            pl.col("t").str.replace(_LEAD, "").str.replace(_TRAIL, "").alias("core"))
        for stage in stages:
            if stage is None:
                phrase = todo["t"].str.contains(_PHRASE_CORE_RE)
                emit(todo.filter(phrase).with_columns(pl.lit(None, pl.String).alias("letter")),
                     undecided=True)
                todo = todo.filter(~phrase)
                continue
            done = todo.with_columns(stage.alias("letter"))
            emit(done.filter(pl.col("letter").is_not_null()), undecided=False)
            todo = done.filter(pl.col("letter").is_null()).drop("letter")
        emit(todo.with_columns(pl.lit(None, pl.String).alias("letter")), undecided=False)
    if not out:
        return pl.DataFrame(schema={"i": pl.UInt32, "letter": pl.String, "undecided": pl.Boolean})
    return pl.concat(out)


def _set(column: pl.Series, rows: pl.Series, values: pl.Series) -> pl.Series:
    """`column` with positions `rows` replaced by `values` (row index i = position)."""
    return column.scatter(rows, values) if len(rows) else column


def _check_letters(letters: pl.Series) -> None:
    for value in letters.unique().to_list():
        _check_letter_value(value)


def score_frame(df: pl.DataFrame) -> pl.DataFrame:
    """`score_response` for every row of `df` (columns response, option_letters, ground_truth),
    returned as `df` plus extracted, extraction_method, correct, format_card, format_exact.

    Identical to calling score_response row by row, where a null response or option_letters
    counts as "" and a null ground truth is never correct. Built for large batches (see the lane
    notes below); bench/scoring.py measures it against the per-row loop.
    """
    missing = [c for c in ("response", "option_letters", "ground_truth") if c not in df.columns]
    if missing:
        raise ValueError(f"score_frame needs the columns {missing}")
    frame = df.select(
        pl.col("response").cast(pl.String).fill_null("").alias("r"),
        pl.col("option_letters").cast(pl.String).fill_null("").alias("L"),
        pl.col("ground_truth").cast(pl.String).alias("g"),
    )
    _check_letters(frame["L"])
    # Large frames are cut into slices scored by two threads: Polars releases the GIL, so one
    # slice's Python steps overlap the other's column scans, and both cores stay busy.
    n_slices = max(1, min(_MAX_SLICES, frame.height // _SLICE_ROWS))
    bounds = [frame.height * k // n_slices for k in range(n_slices + 1)]
    slices = [frame.slice(lo, hi - lo) for lo, hi in itertools.pairwise(bounds)]
    if n_slices == 1:
        scored = _score_slice(frame)
    else:
        with ThreadPoolExecutor(max_workers=2) as pool:
            scored = pl.concat(pool.map(_score_slice, slices))
    return df.drop([c for c in _OUTPUT_COLUMNS if c in df.columns]).hstack(scored)


def _score_slice(frame: pl.DataFrame) -> pl.DataFrame:
    primary, fallback, fmt, n_lt = _score_columns(frame)
    extracted = primary.fill_null(fallback)
    correct = (extracted == frame["g"]).fill_null(False)
    return pl.DataFrame({
        "extracted": extracted,
        "extraction_method": pl.select(
            pl.when(primary.is_not_null()).then(pl.lit("boxed_answer"))
            .when(fallback.is_not_null()).then(pl.lit("fallback"))
            .otherwise(pl.lit("none"))).to_series(),
        "correct": correct,
        "format_card": _format_card_column(frame["r"], fmt, n_lt),
        "format_exact": fmt,
    })


# Rule `card` in one scan: the leftmost <think> whose first </think> is followed by an <answer>
# and then an </answer> (no later <think> can succeed where the first fails: its suffix is a
# substring), then the count of non-space characters in that block.
_CARD = r"(?s)<think>(.*?)</think>.*?<answer>.*?</answer>"


def _format_card_column(text: pl.Series, exact: pl.Series, n_lt: pl.Series) -> pl.Series:
    """Rule `card` per row. A response that passes `exact` passes `card` (the same four tags
    in that order, the same think block), and one with fewer than four "<" lacks a tag: only
    the others take the lazy pattern, which is slow over a kilobyte of thinking."""
    todo = (~exact & (n_lt >= 4)).arg_true()
    think = text.gather(todo).str.extract(_CARD, 1)
    nonspace = think.str.replace_all(WS_CLASS, "").str.len_chars()
    return _set(exact.clone(), todo, (nonspace >= MIN_THINK_CHARS).fill_null(False)
                ).rename("format_card")  # scatter writes in place: `exact` is also a result


def _score_columns(frame: pl.DataFrame
                   ) -> tuple[pl.Series, pl.Series, pl.Series, pl.Series]:
    """(primary letter, fallback letter, format_exact, number of "<") for frame (r, L), in row
    order."""
    r = pl.col("r")
    # Three scans of every row, in one parallel query. `after` is the text from the first
    # </think> on, cut at its byte offset (no capture group, which costs a scan). In a
    # well-formed response it is "</think>W<answer>A</answer>WS*": short, and the same in many
    # rows, so Python reads each distinct one (_TAIL_RE).
    w = frame.select(
        r.str.contains(_HEAD).alias("head"),
        r.str.count_matches("<", literal=True).alias("n_lt"),
        r.cast(pl.Binary).bin.slice(r.str.find(THINK_CLOSE, literal=True))
        .cast(pl.String).alias("after"),
    )
    text, letters = frame["r"], frame["L"]
    head, n_lt, after = w["head"], w["n_lt"], w["after"]
    blocks = {k: _tail_block(k) for k in after.unique().to_list() if k is not None}

    # Lane T: `after` is "</think>W<answer>A</answer>WS*" with no "<" in A — the response ends
    # in the canonical way and its first </think> is its only one. A is then the last block.
    # Format: with n_lt == 4, head holds iff the response is WS*<think>T</think>W<answer>A
    # </answer>WS* with ≥ 100 non-space characters in T (T holds no "<"); n_lt == 3 lacks
    # <think>; n_lt ≥ 5 is settled below with the other crowded rows.
    # Clean rows — the only "<" are the tail's three, or those plus the leading <think> —
    # without their think block read exactly "<answer>A</answer>", whatever T said; so their
    # whole outcome depends on (A, letters) alone and is computed once per distinct pair.
    valid = [k for k, b in blocks.items() if b is not None]
    after_id = after.replace_strict({k: i for i, k in enumerate(valid)}, default=None,
                                    return_dtype=pl.UInt32).cast(pl.UInt32)
    tail = after_id.is_not_null()
    fmt = tail & head & (n_lt == 4)
    clean = tail & ((n_lt == 3) | ((n_lt == 4) & head))
    candidates = pl.Series([boxed_candidate(blocks[k]) for k in valid], dtype=pl.String)
    primary = _accepted(candidates.gather(after_id), letters)
    # Clean rows without a primary answer: the fallback depends on (A, letters) alone.
    fallback = pl.repeat(None, frame.height, dtype=pl.String, eager=True)
    rows = (clean & primary.is_null()).arg_true()
    row_ids, row_letters = after_id.gather(rows), letters.gather(rows)
    for value in row_letters.unique().to_list():  # a handful of option sets
        table = pl.Series([_fallback_of_block(blocks[k], value) for k in valid], dtype=pl.String)
        picked = row_letters == value
        fallback = _set(fallback, rows.filter(picked), table.gather(row_ids.filter(picked)))

    # Lane R: the rest. Primary: the last block if it and what follows hold no "<" (mapped
    # likewise), else the Python rule for responses with an <answer> at all. Format: false — a
    # true one with n_lt ≤ 4 is in lane T (≥ 5: below).
    rest = (~tail).arg_true()
    rest = rest.filter(text.gather(rest).str.contains(ANSWER_OPEN, literal=True))
    last_block = text.gather(rest).str.extract(_LAST_BLOCK, 1)
    primary = _set(primary, rest, _accepted(_map_distinct(last_block, boxed_candidate),
                                            letters.gather(rest)))
    unfinished = rest.filter(last_block.is_null())
    primary = _set(primary, unfinished, _memo(
        extract_boxed_answer, text.gather(unfinished), letters.gather(unfinished)))

    # Crowded rows (≥ 5 "<"): format needs exactly four tags, then the Python rule decides.
    crowded = (n_lt >= 5).arg_true()
    crowded = crowded.filter(text.gather(crowded).str.count_matches(_ANY_TAG) == 4)
    fmt = _set(fmt, crowded, pl.Series([format_exact(t) for t in text.gather(crowded)],
                                       dtype=pl.Boolean))

    # Fallback, for the other rows without a primary answer (nothing is accepted without
    # option letters).
    missing = primary.is_null() & (letters != "")
    other = (missing & ~clean).arg_true()
    other_text, other_letters = text.gather(other), letters.gather(other)
    plain = (~other_text.str.contains(THINK_CLOSE, literal=True)
             & (other_text.str.len_bytes() == other_text.str.len_chars())
             & other_letters.is_in([v for v in other_letters.unique().to_list()
                                    if v and v.isascii() and v.isalnum()]))
    vector = _fallback_ascii(pl.DataFrame({"i": other, "t": other_text, "L": other_letters})
                             .filter(plain))
    decided = vector.filter(~pl.col("undecided"))
    # _fallback_ascii only ever finds option letters, so no acceptance check is needed.
    fallback = _set(fallback, decided["i"], decided["letter"])
    python = pl.concat([other.filter(~plain), vector.filter("undecided")["i"]])
    # With just a leading <think> and one </think> (two "<"), the remainder is what follows
    # the </think>, up to leading whitespace that the fallback strips anyway.
    python_text = text.gather(python)
    after_close = pl.DataFrame({"t": python_text}).select(
        pl.when((n_lt.gather(python) == 2) & pl.col("t").str.contains(f"^{_WS}*<think>"))
        .then(pl.col("t").str.extract(r"</think>([^<]*)$", 1))).to_series()
    slow = after_close.is_null()
    remainder = _set(after_close, slow.arg_true(), _after_first_think(python_text.filter(slow)))
    fallback = _set(fallback, python, _memo(fallback_letter, remainder, letters.gather(python)))
    return primary, fallback, fmt, n_lt


# Python's \s is str.isspace (checked in the tests).
_TAIL_RE = re.compile(r"</think>\s*<answer>([^<]*)</answer>\s*\Z")


@lru_cache(maxsize=1 << 16)
def _tail_block(after: str) -> str | None:
    """A when `after` (the text from the first </think>) is "</think>W<answer>A</answer>WS*"
    with no "<" in A, else None."""
    match = _TAIL_RE.match(after)
    return None if match is None else match.group(1)


@lru_cache(maxsize=1 << 16)  # shared by the slices and across calls; inputs are short
def _fallback_of_block(block: str | None, option_letters: str) -> str | None:
    """fallback_letter of a response whose think-stripped text is "<answer>block</answer>"."""
    assert block is not None  # only lane-T blocks come here
    return fallback_letter(f"{ANSWER_OPEN}{block}{ANSWER_CLOSE}", option_letters)


# raw_vv_scored_responses: score_frame's rows, one per well-formed response of a known uid; its
# last columns say where the response was read (the views keep the first record of each key in
# that order)
SCORED_SCHEMA = raw_schema("vv_scored_responses")
