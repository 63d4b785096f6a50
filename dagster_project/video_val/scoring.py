"""Answer extraction and rewards for the val suite: the rules the scoring policies choose from.

The dataset card ("Reward and answer format") fixes the rule: take the letter from `\\boxed{...}`
inside the `<answer>` block, fall back to lmms-eval's `extract_mcq_answer`, format reward for
`<think>…</think><answer>…</answer>` with ≥ 100 non-whitespace characters of thinking, and
composite = 0.8 × accuracy + 0.2 × format. A scoring *policy* is data (`vv_scoring_policies`,
SQL): which format rule, which weights. Every response is scored once here under both format
rules; the views expand that per policy. The extraction pins down what the card leaves open:

Primary rule (`extract_boxed_answer`, method "boxed_answer")
  * The block is the text between the LAST `<answer>` and the first `</answer>` after it; no
    `<answer>`, or that last one never closed (truncated output) → no primary answer. Tags are
    matched exactly (case-sensitive, no attributes or spaces), like lmms-eval's tag stripper.
  * In the block, the LAST `\\boxed{` decides (for `\\boxed{\\boxed{A}}` that is the inner one);
    its content runs to the matching `}` counting every `{`/`}` literally. If it never closes →
    no primary answer (we do not fall back to an earlier `\\boxed{`). `\\boxed A` and
    `\\boxed {A}` are not boxes.
  * Content normalization: all whitespace removed (Python `str.isspace`), then repeatedly, in
    any order, peel a whole-string wrapper `\\text{…}`, `\\textbf{…}`, `\\mathrm{…}`, `\\mathbf{…}`
    (pure typesetting that models wrap letters in), surrounding `(…)`, a trailing `.`. A single
    ASCII letter is upper-cased; the answer counts only if it is then one of the question's
    option letters. So `\\boxed{ (c). }` → C, `\\boxed{\\text{B}}` → B, while `\\boxed{C. Three}`,
    `\\boxed{Three times}` or `\\boxed{G}` on a four-option question give no primary answer.

Fallback (method "fallback")
  * `extract_mcq_answer(strip_reasoning_tags(response), choices=option letters)`: our own
    re-implementation of lmms-eval 0.7.3, behaving exactly like it for the `<think>` tag pair and
    single-character choices, quirks included (see the functions). Its answer counts only if it is
    one of the option letters; otherwise the method is "none" and `extracted` is None.

Format rules
  * `card` (`format_card`, the card's sentence read literally; the default policy's): the four
    tags are present in that order — the first `<think>`, the first `</think>` after it, the
    first `<answer>` after that, the first `</answer>` after that — with ≥ `MIN_THINK_CHARS`
    non-whitespace characters (code points; whitespace = `str.isspace`) in that first think
    block. Text before, between and after the blocks is allowed.
  * `exact` (`format_exact`, policy `strict`): after stripping surrounding whitespace, the
    response is exactly `<think>T</think>W<answer>A</answer>`: each tag exactly once, in that
    order, W whitespace only (the system prompt asks for this EXACT format), and T as above.
  A is not inspected by either: a wrong or unboxed answer costs accuracy, not format.

`correct` = the extracted letter equals the ground truth (exact string comparison). Option
letters are letters or digits ("ABCD"); other option strings raise ValueError.

`score_frame` is the batch path for large frames: exactly `score_response` row by row, but the
long texts are scanned by Polars (three passes per row: the head of the thinking, the number
of "<", the text after the first `</think>`), Python runs only on the short, repetitive pieces
(answer blocks, text after the thinking) once per distinct value, lmms-eval's extractor runs as
Polars expressions on ASCII free text, and slices are scored by two threads. Rows no shortcut
can vouch for take the Python functions above.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache
from typing import Literal, NamedTuple

import polars as pl
import pyarrow as pa

MIN_THINK_CHARS = 100

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
ANSWER_OPEN, ANSWER_CLOSE = "<answer>", "</answer>"
BOXED = "\\boxed{"
# Typesetting commands peeled from boxed content.
WRAPPERS = ("\\text{", "\\textbf{", "\\mathrm{", "\\mathbf{")

ExtractionMethod = Literal["boxed_answer", "fallback", "none"]
ACCURACY_WEIGHT, FORMAT_WEIGHT = 0.8, 0.2

# ------------------------------------------------------------------------ lmms-eval fallback

# lmms-eval 0.7.3 defaults, phrase list and priorities (lmms_eval/tasks/_task_utils/mcq_extract.py).
DEFAULT_CHOICES = ("A", "B", "C", "D", "E", "F", "G", "H")
ANSWER_PHRASES = (
    "the answer is", "answer is", "the correct answer is", "correct answer is",
    "the best answer is", "best answer is", "the correct option is", "correct option is",
    "the best option is", "best option is", "the choice is", "choice is",
    "the correct choice is", "correct choice is", "i choose", "i select", "i pick",
    "my answer is", "my choice is",
    "옵션", "정답은", "답은", "답:",  # Korean
    "答案是", "答案为", "选",  # Chinese
    "答えは",  # Japanese
)
# Characters trimmed from both ends one after another, in this order (order matters: ".'" vs "'.").
_EDGE_PUNCTUATION = (",", ".", "!", "?", ";", ":", "'", '"')
# Each ASCII phrase contains one of these; a phrase is looked for only if its core occurs, which
# skips most of the 27 searches over long texts without changing any result.
_PHRASE_CORES = ("answer is", "option is", "choice is", "i choose", "i select", "i pick")
_PHRASE_CORE_OF = tuple(
    next((core for core in _PHRASE_CORES if core in phrase), None) for phrase in ANSWER_PHRASES
)


def strip_reasoning_tags(
    text: str, tag_pairs: Sequence[tuple[str, str]] = ((THINK_OPEN, THINK_CLOSE),)
) -> str:
    """lmms-eval 0.7.3 `strip_reasoning_tags`, re-implemented (default: the `<think>` pair).

    Per pair: while both tags occur anywhere, cut from the first opening tag through the first
    closing tag after it (stop if none follows it). Then, if a closing tag is left but no opening
    one (chat templates that prefill `<think>`), keep only what follows the last closing tag.
    Finally strip surrounding whitespace. Case-sensitive; an unclosed `<think>` stays in place.
    """
    out = text
    for open_tag, close_tag in tag_pairs:
        while open_tag in out and close_tag in out:
            start = out.find(open_tag)
            stop = out.find(close_tag, start)
            if stop < 0:
                break
            out = out[:start] + out[stop + len(close_tag):]
        if close_tag in out and open_tag not in out:
            out = out[out.rfind(close_tag) + len(close_tag):]
    return out.strip()


@lru_cache(maxsize=64)
def _unique_choices(options: tuple[str, ...]) -> tuple[str, ...]:
    for choice in options:
        if len(choice) != 1 or not choice.isalnum():
            raise ValueError(f"choices must be single letters or digits, got {choice!r}")
    return tuple(dict.fromkeys(options))


def extract_mcq_answer(text: str, choices: Sequence[str] | None = None) -> str:
    """lmms-eval 0.7.3 `extract_mcq_answer`, re-implemented; "" when nothing matches.

    Upstream collects (choice, position, format) candidates and returns the best by (priority,
    position): start 10, end 9, phrase 7, "(X)" 6, "X." 5, "X:" 4, "X)" 3, "X " 2, and — only
    when nothing else matched — any occurrence 0; within a format the later position wins. We
    support single-character choices (letters/digits; anything else raises ValueError), where
    a position holds one character, so within a format "best" is simply the last position and
    no ties between different choices can arise. Quirks kept on purpose:
      * choices are matched case-sensitively ("the answer is b" finds no B);
      * empty/None choices mean A–H;
      * the text is whitespace-stripped, then each of , . ! ? ; : ' " stripped from both ends in
        turn, then padded with one space on each side;
      * "start"/"end" = the stripped text begins/ends with the choice and the next/previous
        character is not alphabetic (`str.isalpha`, so CJK characters count as letters);
      * "phrase": for each phrase, its first occurrence in the lower-cased text, then for EVERY
        choice its first occurrence after the phrase (in the original text, at the lower-cased
        offset) is a candidate — "The answer is C. Because A is wrong" gives A;
      * `\\boxed{C}` is seen only by the any-occurrence rule.
    """
    if not text or not text.strip():
        return ""
    options = tuple(choices) if choices else DEFAULT_CHOICES
    unique_options = _unique_choices(options)
    core = text.strip()
    for mark in _EDGE_PUNCTUATION:
        core = core.strip(mark)
    padded = f" {core} "
    bare = core.strip()

    if bare:
        if bare[0] in options and (len(bare) == 1 or not bare[1].isalpha()):
            return bare[0]
        if bare[-1] in options and (len(bare) == 1 or not bare[-2].isalpha()):
            return bare[-1]

    lowered = padded.lower()
    ascii_only = lowered.isascii()
    present = {c: c in lowered for c in _PHRASE_CORES}
    best = -1
    for phrase, phrase_core in zip(ANSWER_PHRASES, _PHRASE_CORE_OF, strict=True):
        if (present[phrase_core] if phrase_core else not ascii_only):
            at = lowered.find(phrase)
            if at >= 0:
                after = at + len(phrase)
                for choice in options:
                    best = max(best, padded.find(choice, after))
    if best >= 0:
        return padded[best]

    # Every marker contains a choice character, so look only at those occurrences, from the
    # end (single-character find is a memchr). The padding guarantees neighbours on both sides.
    spots = []
    for choice in unique_options:
        at = padded.find(choice)
        while at >= 0:
            spots.append(at)
            at = padded.find(choice, at + 1)
    if not spots:
        return ""
    spots.sort(reverse=True)
    for p in spots:
        if padded[p - 1] == "(" and padded[p + 1] == ")":
            return padded[p]
    for follower in ".:) ":
        for p in spots:
            if padded[p + 1] == follower:
                return padded[p]
    return padded[spots[0]]


# ------------------------------------------------------------------------------ primary rule


def _balanced_content(text: str, start: int) -> str | None:
    """Text from `start` up to the `}` closing an already-open `{`; None if it never closes."""
    depth = 1
    for i in range(start, len(text)):
        ch = text[i]
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return text[start:i]
    return None


def normalize_boxed(content: str) -> str:
    """Policy-v1 normalization of boxed content (see the module docstring)."""
    value = "".join(content.split())
    while True:
        before = value
        for wrapper in WRAPPERS:
            if value.startswith(wrapper) and value.endswith("}"):
                value = value[len(wrapper):-1]
        if len(value) >= 2 and value[0] == "(" and value[-1] == ")":
            value = value[1:-1]
        if value.endswith("."):
            value = value[:-1]
        if value == before:
            break
    # ASCII only: Unicode case mapping turns e.g. "ſ" into "S", which no model means.
    if len(value) == 1 and "a" <= value <= "z":
        value = value.upper()
    return value


def boxed_candidate(block: str) -> str | None:
    """Normalized content of the last balanced `\\boxed{...}` in an answer block, or None.

    Independent of the options, so the batch path can map each distinct block once.
    """
    at = block.rfind(BOXED)
    if at < 0:
        return None
    content = _balanced_content(block, at + len(BOXED))
    return None if content is None else normalize_boxed(content)


def boxed_letter_in_block(block: str, option_letters: str) -> str | None:
    """The option letter of the last balanced `\\boxed{...}` in an answer block, or None."""
    letter = boxed_candidate(block)
    return letter if letter is not None and _is_option(letter, option_letters) else None


def _is_option(letter: str, option_letters: str) -> bool:
    return len(letter) == 1 and letter in option_letters


def extract_boxed_answer(response: str, option_letters: str) -> str | None:
    """Primary rule: the option letter boxed in the last `<answer>` block, or None."""
    open_at = response.rfind(ANSWER_OPEN)
    if open_at < 0:
        return None
    body = open_at + len(ANSWER_OPEN)
    close_at = response.find(ANSWER_CLOSE, body)
    if close_at < 0:
        return None
    return boxed_letter_in_block(response[body:close_at], option_letters)


def _non_space_count_at_least(text: str, n: int) -> bool:
    # str.split() splits on exactly the str.isspace characters, at C speed; a prefix usually
    # settles it, and a prefix's count never exceeds the whole's.
    if len(text) < n:
        return False
    if len("".join(text[: 2 * n].split())) >= n:
        return True
    return len(text) > 2 * n and len("".join(text.split())) >= n


TAGS = (THINK_OPEN, THINK_CLOSE, ANSWER_OPEN, ANSWER_CLOSE)


def format_exact(response: str) -> bool:
    """Format rule `exact`: exactly `<think>T</think>W<answer>A</answer>` (module notes)."""
    text = response.strip()
    if not (text.startswith(THINK_OPEN) and text.endswith(ANSWER_CLOSE)):
        return False
    think_end = text.find(THINK_CLOSE)
    answer_start = text.find(ANSWER_OPEN)
    if think_end < 0 or answer_start < think_end:
        return False
    if text[think_end + len(THINK_CLOSE):answer_start].strip():
        return False
    # Four "<" can only be the four tags found above; otherwise count each tag.
    if text.count("<") != 4 and any(text.count(tag) != 1 for tag in TAGS):
        return False
    return _non_space_count_at_least(text[len(THINK_OPEN):think_end], MIN_THINK_CHARS)


def format_card(response: str) -> bool:
    """Format rule `card`: the four tags in order, text around them allowed, ≥ 100
    non-whitespace characters in the first think block (module notes)."""
    t0 = response.find(THINK_OPEN)
    if t0 < 0:
        return False
    t1 = response.find(THINK_CLOSE, t0 + len(THINK_OPEN))
    if t1 < 0:
        return False
    a0 = response.find(ANSWER_OPEN, t1 + len(THINK_CLOSE))
    if a0 < 0 or response.find(ANSWER_CLOSE, a0 + len(ANSWER_OPEN)) < 0:
        return False
    return _non_space_count_at_least(response[t0 + len(THINK_OPEN):t1], MIN_THINK_CHARS)


FORMAT_RULES: dict[str, Callable[[str], bool]] = {"card": format_card, "exact": format_exact}


# ---------------------------------------------------------------------------------- scoring


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


def composite(correct: bool, fmt: bool) -> float:
    """The card's composite, 0.8 accuracy + 0.2 format (the weights of both policies)."""
    return ACCURACY_WEIGHT * correct + FORMAT_WEIGHT * fmt


def fallback_letter(text: str, option_letters: str) -> str | None:
    """lmms-eval's extractor on the think-stripped text, accepted only if it is an option."""
    letter = extract_mcq_answer(strip_reasoning_tags(text), list(option_letters))
    return letter if _is_option(letter, option_letters) else None


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
# what no shortcut covers goes through the Python functions above, once per distinct value.
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
    primary, fallback, fmt = _score_columns(frame)
    extracted = primary.fill_null(fallback)
    correct = (extracted == frame["g"]).fill_null(False)
    return pl.DataFrame({
        "extracted": extracted,
        "extraction_method": pl.select(
            pl.when(primary.is_not_null()).then(pl.lit("boxed_answer"))
            .when(fallback.is_not_null()).then(pl.lit("fallback"))
            .otherwise(pl.lit("none"))).to_series(),
        "correct": correct,
        "format_card": _format_card_column(frame["r"]),
        "format_exact": fmt,
    })


# Rule `card` in one scan: the leftmost <think> whose first </think> is followed by an <answer>
# and then an </answer> (no later <think> can succeed where the first fails: its suffix is a
# substring), then the count of non-space characters in that block.
_CARD = r"(?s)<think>(.*?)</think>.*?<answer>.*?</answer>"


def _format_card_column(text: pl.Series) -> pl.Series:
    think = text.str.extract(_CARD, 1)
    nonspace = think.str.replace_all(WS_CLASS, "").str.len_chars()
    return (nonspace >= MIN_THINK_CHARS).fill_null(False).rename("format_card")


def _score_columns(frame: pl.DataFrame) -> tuple[pl.Series, pl.Series, pl.Series]:
    """(primary letter, fallback letter, format_exact) for frame (r, L), in row order."""
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
    return primary, fallback, fmt


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


# raw/vv_scored_responses: score_frame's rows, one per response
SCORED_SCHEMA = pa.schema([
    ("run_id", pa.string()), ("step", pa.int64()), ("uid", pa.string()),
    ("sample_idx", pa.int64()), ("data_source", pa.string()), ("option_letters", pa.string()),
    ("ground_truth", pa.string()), ("extracted", pa.string()),
    ("extraction_method", pa.string()), ("correct", pa.bool_()), ("format_card", pa.bool_()),
    ("format_exact", pa.bool_()),
])
