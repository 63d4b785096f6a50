"""Format rules for the val suite: whether a response has the card's
`<think>…</think><answer>…</answer>` form with ≥ `MIN_THINK_CHARS` non-whitespace characters of
thinking. A scoring policy (the dbt seed `vv_scoring_policies`) chooses one of `FORMAT_RULES`;
the seed `vv_format_rules` lists the same rules for the views (a test keeps the two equal).

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
"""

from __future__ import annotations

from collections.abc import Callable

from dagster_project.video_val.answer_extraction import (
    ANSWER_CLOSE,
    ANSWER_OPEN,
    THINK_CLOSE,
    THINK_OPEN,
)

MIN_THINK_CHARS = 100


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
