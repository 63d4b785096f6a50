"""Answer extraction and rewards for the val suite — scoring policy `v1`.

The dataset card ("Reward and answer format") fixes the rule: take the letter from `\\boxed{...}`
inside the `<answer>` block, fall back to lmms-eval's `extract_mcq_answer`, format reward for
`<think>…</think><answer>…</answer>` with ≥ 100 non-whitespace characters of thinking, and
composite = 0.8 × accuracy + 0.2 × format. Policy `v1` pins down what the card leaves open:

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
    single-letter choices, quirks included (see the functions). Its answer counts only if it is
    one of the option letters; otherwise the method is "none" and `extracted` is None.

Format (`format_ok`)
  * After stripping surrounding whitespace, the response must be exactly
    `<think>T</think>W<answer>A</answer>`: each of the four tags exactly once, in that order,
    W whitespace only (the system prompt asks for this EXACT format; text before `<think>`,
    between the blocks or after `</answer>` fails), and T with ≥ `MIN_THINK_CHARS` non-whitespace
    characters (code points; whitespace = `str.isspace`). A is not inspected: a wrong or
    unboxed answer costs accuracy, not format.

`correct` = the extracted letter equals the ground truth (exact string comparison).

`score_frame` is the batch path: it gives exactly `score_response` row by row, but does the
scanning of long texts with Polars expressions and runs Python only on the short, highly
repetitive pieces (answer blocks, text outside the think block), once per distinct value.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Literal, NamedTuple

POLICY = "v1"
MIN_THINK_CHARS = 100

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
ANSWER_OPEN, ANSWER_CLOSE = "<answer>", "</answer>"
BOXED = "\\boxed{"
# Typesetting commands peeled from boxed content (policy v1).
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
# Marker formats below "phrase" in upstream priority order: parentheses 6, period 5, colon 4,
# right paren 3, space 2. Start (10), end (9) and phrase (7) are handled separately.
_MARKER_FORMATS: tuple[Callable[[str], str], ...] = (
    lambda c: f"({c})", lambda c: f"{c}.", lambda c: f"{c}:", lambda c: f"{c})",
    lambda c: f"{c} ",
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


def _best(found: Iterable[tuple[str, int]]) -> str | None:
    """The candidate with the largest position; on a tie the first one found.

    Upstream sorts (priority, position) descending with a stable sort, so among equal keys the
    earliest-appended candidate wins — `>` (not `>=`) keeps that.
    """
    best, best_pos = None, -1
    for choice, pos in found:
        if pos > best_pos:
            best, best_pos = choice, pos
    return best


def extract_mcq_answer(text: str, choices: Sequence[str] | None = None) -> str:
    """lmms-eval 0.7.3 `extract_mcq_answer`, re-implemented; "" when nothing matches.

    Upstream collects every (choice, position, format) candidate and keeps the best by
    (priority, position). We test the formats from the highest priority down and stop at the
    first that has a candidate, which picks the same one. Quirks kept on purpose:
      * choices are matched case-sensitively ("the answer is b" finds no B);
      * empty/None choices mean A–H;
      * the text is whitespace-stripped, then each of , . ! ? ; : ' " stripped from both ends in
        turn, then padded with one space on each side;
      * "start"/"end" = the stripped text begins/ends with the choice and the next/previous
        character is not alphabetic (`str.isalpha`, so CJK characters count as letters);
      * "phrase": for each phrase, its first occurrence in the lower-cased text, then for EVERY
        choice its first occurrence after the phrase (in the original text, at the lower-cased
        offset) is a candidate — "The answer is C. Because A is wrong" gives A;
      * the any-occurrence fallback (the only rule that sees `\\boxed{C}`) runs only when no
        other format matched.
    """
    if not text or not text.strip():
        return ""
    options = list(choices) if choices else list(DEFAULT_CHOICES)
    core = text.strip()
    for mark in _EDGE_PUNCTUATION:
        core = core.strip(mark)
    padded = f" {core} "
    bare = padded.strip()

    # start (10): every such candidate sits at position 0, so the first choice in order wins.
    for choice in options:
        if bare.startswith(choice) and (len(bare) == 1 or not bare[1].isalpha()):
            return choice
    # end (9): likewise all at the same position.
    for choice in options:
        if bare.endswith(choice) and (len(bare) == 1 or not bare[-2].isalpha()):
            return choice
    # phrase (7)
    lowered = padded.lower()
    phrase_hits = []
    for phrase in ANSWER_PHRASES:
        at = lowered.find(phrase)
        if at >= 0:
            after = at + len(phrase)
            phrase_hits += [(choice, padded.find(choice, after)) for choice in options]
    found = _best((c, p) for c, p in phrase_hits if p >= 0)
    if found is not None:
        return found
    # "(X)" 6, "X." 5, "X:" 4, "X)" 3, "X " 2: the last occurrence counts.
    for marker in _MARKER_FORMATS:
        found = _best((choice, padded.rfind(marker(choice))) for choice in options)
        if found is not None:
            return found
    # any occurrence (0)
    found = _best((choice, padded.rfind(choice)) for choice in options)
    return found if found is not None else ""


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


def boxed_letter_in_block(block: str, option_letters: str) -> str | None:
    """The option letter of the last balanced `\\boxed{...}` in an answer block, or None."""
    at = block.rfind(BOXED)
    if at < 0:
        return None
    content = _balanced_content(block, at + len(BOXED))
    if content is None:
        return None
    letter = normalize_boxed(content)
    return letter if len(letter) == 1 and letter in option_letters else None


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
    # str.split() splits on exactly the str.isspace characters, at C speed.
    return len(text) >= n and len("".join(text.split())) >= n


def format_ok(response: str) -> bool:
    """Exactly `<think>T</think>W<answer>A</answer>` (see the module docstring)."""
    text = response.strip()
    if not (text.startswith(THINK_OPEN) and text.endswith(ANSWER_CLOSE)):
        return False
    if any(text.count(tag) != 1 for tag in (THINK_OPEN, THINK_CLOSE, ANSWER_OPEN, ANSWER_CLOSE)):
        return False
    think_end = text.find(THINK_CLOSE)
    answer_start = text.find(ANSWER_OPEN)
    # With one of each tag, <think> first and </answer> last, only these two can be misordered.
    if answer_start < think_end or text[think_end + len(THINK_CLOSE):answer_start].strip():
        return False
    return _non_space_count_at_least(text[len(THINK_OPEN):think_end], MIN_THINK_CHARS)


# ---------------------------------------------------------------------------------- scoring


class Scored(NamedTuple):
    extracted: str | None
    extraction_method: ExtractionMethod
    correct: bool
    format_ok: bool
    composite: float


def _composite(correct: bool, fmt: bool) -> float:
    return ACCURACY_WEIGHT * correct + FORMAT_WEIGHT * fmt


def fallback_letter(text: str, option_letters: str) -> str | None:
    """lmms-eval's extractor on the think-stripped text, accepted only if it is an option."""
    letter = extract_mcq_answer(strip_reasoning_tags(text), list(option_letters))
    return letter if len(letter) == 1 and letter in option_letters else None


def score_response(response: str, option_letters: str, ground_truth: str | None) -> Scored:
    """Score one response under policy v1. `option_letters` is e.g. "ABCD"."""
    extracted = extract_boxed_answer(response, option_letters)
    method: ExtractionMethod = "boxed_answer"
    if extracted is None:
        extracted = fallback_letter(response, option_letters)
        method = "none" if extracted is None else "fallback"
    correct = extracted is not None and extracted == ground_truth
    fmt = format_ok(response)
    return Scored(extracted, method, correct, fmt, _composite(correct, fmt))


def score_frame(df: pl.DataFrame) -> pl.DataFrame:
    raise NotImplementedError
