"""Answer extraction for the val suite: which option letter a response gives.

The dataset card ("Reward and answer format") fixes the rule: take the letter from `\\boxed{...}`
inside the `<answer>` block, fall back to lmms-eval's `extract_mcq_answer`. The extraction pins
down what the card leaves open:

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

Option letters are letters or digits ("ABCD"); other option strings raise ValueError.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
ANSWER_OPEN, ANSWER_CLOSE = "<answer>", "</answer>"
BOXED = "\\boxed{"
# Typesetting commands peeled from boxed content.
WRAPPERS = ("\\text{", "\\textbf{", "\\mathrm{", "\\mathbf{")

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


def fallback_letter(text: str, option_letters: str) -> str | None:
    """lmms-eval's extractor on the think-stripped text, accepted only if it is an option."""
    letter = extract_mcq_answer(strip_reasoning_tags(text), list(option_letters))
    return letter if _is_option(letter, option_letters) else None

