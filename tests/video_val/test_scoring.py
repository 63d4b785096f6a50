"""Val-suite scoring, policy v1: our lmms-eval re-implementation against lmms-eval 0.7.3 itself
(differential, on generated responses), the primary boxed rule and the format reward by hand,
and the batch path `score_frame` against `score_response` row by row.

The oracle is the lmms-eval 0.7.3 wheel (`./dev` downloads it into `.venv/oracles/`); only its
two plain-Python files are loaded, straight from the wheel, so none of its heavy dependencies
are needed. Without the wheel the fixture downloads it into the pytest cache, and skips only if
that fails (no network).
"""

from __future__ import annotations

import random
import sys
from types import ModuleType

import polars as pl
import pytest

from dagster_project.video_val import answer_extraction, scoring
from dagster_project.video_val.answer_extraction import (
    extract_boxed_answer,
    extract_mcq_answer,
    strip_reasoning_tags,
)
from dagster_project.video_val.format_rules import (
    FORMAT_RULES,
    MIN_THINK_CHARS,
    format_card,
    format_exact,
)
from dagster_project.video_val.policies import default_policy, default_policy_row
from dagster_project.video_val.scoring import Scored, score_frame, score_response
from dagster_project.warehouse.seeds import read_seed
from tests.oracles.wheels import extract, load, wheel

ORACLE_VERSION = "0.7.3"
ORACLE_FILES = {
    "mcq_extract": "lmms_eval/tasks/_task_utils/mcq_extract.py",
    "reasoning": "lmms_eval/api/reasoning.py",
}
THINK_PAIR = [["<think>", "</think>"]]
N_GENERATED = 3000

# ------------------------------------------------------------------------------ the oracle


@pytest.fixture(scope="session")
def oracle(request: pytest.FixtureRequest,
           tmp_path_factory: pytest.TempPathFactory) -> dict[str, ModuleType]:
    whl = wheel(request, tmp_path_factory, "lmms-eval", ORACLE_VERSION)
    out = tmp_path_factory.mktemp("oracle")
    # Loaded as standalone modules: importing lmms_eval.* would run the package's __init__ and
    # need its dependencies.
    return {name: load(extract(whl, member, out / name), f"lmms_eval_oracle_{name}")
            for name, member in ORACLE_FILES.items()}


# ------------------------------------------------------------------ generated responses

LETTER_SETS = ("ABCD", "ABCD", "ABCDE", "ABCDEF", "AB", "ABC")
WORDS = ("Apple", "Banana", "Cat", "Dog", "East", "Fast", "Blue", "Car", "CD", "ABBA", "I", "A",
         "Eel", "Done", "Bob")
THINK_BODIES = (
    "",
    "Let me think.",
    "The presenter points twice, so B is out; (C) fits the count. Final: C.",
    "Option A says once. B. says twice. C: three. D) four. The answer is D? No wait.",
    "答案是 B，但是再想想。选项A不对。",
    "x < 5 and y > 3 <br> then a Cat and a Dog.",
    "I choose E because the answer is F.",
    "a " * 60,
    "Watching frame by frame: the ball leaves the hand at 00:12, bounces twice and the keeper "
    "catches it at 00:19. That rules out A and B. Between C and D the timing fits C better. "
    "\\boxed{D} would be wrong.",
    # Long enough for the format reward (≥ 100 non-space characters), with and without "<".
    "The clip opens on a kitchen; the chef lifts the lid twice and the timer reads 00:42 when "
    "the second lift ends, which matches option C rather than A, B or D in the list given.",
    "Counting the taps frame by frame gives 3 < 4 taps, so the larger counts are out; the "
    "remaining candidates differ only in timing, and the timing at 01:10 favours the second.",
)
ANSWER_TEMPLATES = (
    "<answer>\\boxed{%X}</answer>", "<answer> \\boxed{ %X } </answer>", "<answer>\\boxed{%x}</answer>",
    "<answer>\\boxed{(%X)}</answer>", "<answer>\\boxed{%X.}</answer>", "<answer>\\boxed{(%x).}</answer>",
    "<answer>\\boxed{\\text{%X}}</answer>", "<answer>\\boxed{\\textbf{%X}}</answer>",
    "<answer>\\boxed{\\mathrm{ %X }}</answer>", "<answer>\\boxed{{%X}}</answer>",
    "<answer>\\boxed{\\text{\\textbf{%X}}}</answer>", "<answer>\\boxed{%X</answer>",
    "<answer>\\boxed{%X}", "<answer>%X</answer>", "<answer>The answer is %X.</answer>",
    "<answer>\\boxed{%X} or \\boxed{%Y}</answer>", "<answer>\\boxed{\\boxed{%X}}</answer>",
    "<answer>\\boxed{%X. %W}</answer>", "<answer>\\boxed{%W}</answer>", "<answer>\\boxed{}</answer>",
    "<answer>\\boxed %X</answer>", "<answer>\\boxed{%X}}</answer>", "<answer>\\boxed{%X}{%Y}</answer>",
    "<answer>\\boxed{%X}</answer><answer>\\boxed{%Y}</answer>",
    "<answer>\\boxed{%X}</answer>\n<answer>%Y</answer>", "<answer>\\boxed{%X}</answer><answer>",
    "<Answer>\\boxed{%X}</Answer>", "<answer>\\boxed{%X}</answer >", "<answer>\\boxed{\\{%X\\}}</answer>",
    "\\boxed{%X}", "\\boxed{%x}", "The answer is %X.", "The answer is %X. Because %Y is wrong.",
    "the answer is %x", "(%X)", "%X.", "%X:", "%X)", "%X", "%x", "%X ", "答案是 %X", "答案为%X", "选%X",
    "정답은 %X", "답: %X", "옵션 %X", "答えは%X", "正确答案：%X", "I choose %X", "My answer is (%X)",
    "Answer: %X", "**%X**", "'%X'", "\"%X\".", "%X, %Y", "%X and %Y", "Final: %X!", "%W", "%W %X", "%X %W",
    "...", "", "   ", "<answer>答案是 %X</answer>", "The correct option is %X; the best answer is %Y",
    "I pick the one after %X: %Y", "Xylophone", "(%X) %W", "%X. %W", "%W (%X). %W", "\\boxed{\\text{%X}}",
    "<answer>\\boxed{%X}</answer> Hope this helps.", "Therefore, the answer is: %X",
    "The ANSWER IS %X", "answer is%X", "İ the answer is %X", "<answer>(%X)</answer>",
)
SEPARATORS = ("", "\n", " ", "\n\n", " So: ", "\t")
SUFFIXES = ("", "", "", ".", " ", "\n", "!", "?", '"', " %W")


def _think(rng: random.Random) -> str:
    body = rng.choice(THINK_BODIES)
    other = rng.choice(THINK_BODIES)
    return rng.choice((
        "", "", f"<think>{body}</think>", f"<think>{body}</think>", f"<think>\n{body}\n</think>",
        f"<think>\n{rng.choice(THINK_BODIES[-2:])}\n</think>",
        f"<think>{rng.choice(THINK_BODIES[-2:])}</think>",
        f"<think>{body}", f"{body}</think>", f"<think>{body}</think><think>{other}</think>",
        f"</think>{body}<think>{other}", f"<think>{body}<think>{other}</think>tail</think>",
        f"<THINK>{body}</THINK>", f"{body}", f"<think>{body}</think >", f"  <think>{body}</think>",
        f"Sure! <think>{body}</think>",
    ))


def generated_cases(n: int = N_GENERATED, seed: int = 7) -> list[tuple[str, str, str]]:
    """(response, option_letters, ground_truth), deterministic."""
    rng = random.Random(seed)
    cases = []
    for _ in range(n):
        letters = rng.choice(LETTER_SETS)
        x = rng.choice(letters + "GZc") if rng.random() < 0.15 else rng.choice(letters)
        y = rng.choice(letters)
        # %X answer letter, %x its lower case, %Y another option, %W a capitalized word.
        answer = (rng.choice(ANSWER_TEMPLATES).replace("%X", x).replace("%x", x.lower())
                  .replace("%Y", y).replace("%W", rng.choice(WORDS)))
        response = (_think(rng) + rng.choice(SEPARATORS) + answer + rng.choice(SUFFIXES)
                    .replace("%W", rng.choice(WORDS)))
        if rng.random() < 0.01:
            response = rng.choice(("", " ", "\n"))
        cases.append((response, letters, rng.choice(letters)))
    return cases


BLOCKS = (
    "\\boxed{%X}", "\\boxed{%x}", " \\boxed{ %X } ", "\\boxed{(%X).}", "\\boxed{\\text{%X}}",
    "\\boxed{%X. %W}", "\\boxed{%W}", "%X", "The answer is %X.", "(%X) %W", "答案是 %X",
    "\\boxed{\\text{\\textbf{%X}}}", "\\boxed{{%X}}", "\\boxed{%X", "\\boxed{%Y} \\boxed{%X}", "",
    "<b>%X</b>", "\\boxed{%X} <br>", "\\boxed{%X}\u3000",
)


def structured_cases(n: int = 1500, seed: int = 3) -> list[tuple[str, str, str]]:
    """Mostly well-formed responses with varied answer blocks: the batch path's main lanes."""
    rng = random.Random(seed)
    cases = []
    for _ in range(n):
        letters = rng.choice(LETTER_SETS)
        x, y = rng.choice(letters + "G"), rng.choice(letters)
        block = (rng.choice(BLOCKS).replace("%X", x).replace("%x", x.lower())
                 .replace("%Y", y).replace("%W", rng.choice(WORDS)))
        body = rng.choice(THINK_BODIES[-2:] + THINK_BODIES[:3])
        head = rng.choice(("<think>", "<think>\n", "  <think>", "", "Sure! <think>"))
        between = rng.choice(("", "\n", "\n\n", " ", "\u3000", " So: ", "</think>"))
        end = rng.choice(("", "", "\n", " ", " Done.", f"<answer>{y}</answer>"))
        cases.append((f"{head}{body}</think>{between}<answer>{block}</answer>{end}", letters,
                      rng.choice(letters)))
    return cases


# Edge cases written out, checked against the oracle too.
HAND_CASES = (
    "", " ", "\n\t", ".", "A", "a", "Z", "(B)", "B.", "B:", "B)", "B ", " B", "AB", "BA", "B,",
    "The answer is C. Because A is wrong", "the answer is b", "The answer is (D).",
    "答案是 C", "答案是C", "C是答案", "选项 B", "I think A is wrong, B is right", "Apple",
    "An apple", "About B: yes", "\\boxed{C}", "<answer>\\boxed{C}</answer>", "A.B.C.", "(A)(B)",
    "A: B: C:", "(A) then B.", "My choice is A, I choose B", "X (A) Y (B) Z", "D)C)B)A)",
    "<think>A</think>B", "<think>A", "A</think>B", "</think>", "<think></think>",
    "<think>x</think><think>y</think>C", "</think>x<think>y</think>D", "\u1680A\u3000",
    "\x1cB\x1f", "Answer:\u00a0C", "A1", "A1 then B.", "B2 and so on", "the answer is 4 or D",
    "C3.", "'\"C\"'", '"\'D\'"', ".,C,.", "İİ the answer is B", "ẞ answer is C",
    "I PIC\u212a B, not A.", "ANSWER IS (C) or D",
)


def _all_cases() -> list[tuple[str, str, str]]:
    return generated_cases() + structured_cases() + [
        (text, letters, "A") for text in HAND_CASES for letters in ("ABCD", "ABCDEF")]


# ------------------------------------------------------------------- differential tests


def test_policy_constants():
    assert set(FORMAT_RULES) == {"card", "exact"}
    assert MIN_THINK_CHARS == 100


def test_phrase_cores_cover_every_ascii_phrase():
    # The fast phrase search relies on this; a changed phrase list must update the cores.
    for phrase, core in zip(answer_extraction.ANSWER_PHRASES, answer_extraction._PHRASE_CORE_OF,
                            strict=True):
        assert (core is not None) == phrase.isascii()


def test_generated_cases_cover_the_brief():
    cases = generated_cases()
    texts = [r for r, _, _ in cases]
    assert len(cases) >= 2000
    assert len(set(texts)) > 1500
    for needle in ("\\boxed{{", "\\boxed{\\text{\\textbf{", "答案是", "the answer is",
                   "The answer is", "<think>", "</think>", "\\boxed{a}", "\\boxed{(c).}"):
        assert any(needle in t for t in texts), needle
    assert any(t == "" for t in texts)
    assert any(letters == "ABCDEF" for _, letters, _ in cases)
    assert any("<think>" in t and "</think>" not in t for t in texts)  # unclosed
    assert any(t.count("<answer>") >= 2 for t in texts)                # several answers
    assert any(any(w in t for w in ("Apple", "Banana", "Cat")) for t in texts)


def test_strip_reasoning_tags_matches_lmms_eval(oracle):
    upstream = oracle["reasoning"].strip_reasoning_tags
    cases = _all_cases()
    mismatches = [r for r, _, _ in cases if strip_reasoning_tags(r) != upstream(r, THINK_PAIR)]
    # Several pairs at once, as lmms-eval allows.
    pairs = [["<think>", "</think>"], ["<reasoning>", "</reasoning>"]]
    extra = ["<reasoning>a</reasoning><think>b</think>C", "<reasoning>x</think>y</reasoning>z"]
    mismatches += [r for r in extra + [r for r, _, _ in cases[:200]]
                   if strip_reasoning_tags(r, [tuple(p) for p in pairs]) != upstream(r, pairs)]
    print(f"\nstrip_reasoning_tags: {len(cases) + len(extra) + 200} comparisons, "
          f"{len(mismatches)} mismatches")
    assert mismatches == []


def test_extract_mcq_answer_matches_lmms_eval(oracle):
    upstream_extract = oracle["mcq_extract"].extract_mcq_answer
    upstream_strip = oracle["reasoning"].strip_reasoning_tags
    cases = _all_cases()
    compared, mismatches = 0, []
    for response, letters, _ in cases:
        stripped = upstream_strip(response, THINK_PAIR)
        # As scoring uses it (think-stripped, the question's letters), on the raw text, and
        # with lmms-eval's default choices.
        for text, choices in ((stripped, list(letters)), (response, list(letters)),
                              (stripped, None)):
            compared += 1
            ours, theirs = extract_mcq_answer(text, choices), upstream_extract(text, choices)
            if ours != theirs:
                mismatches.append((text, choices, ours, theirs))
    nonempty = sum(bool(upstream_extract(upstream_strip(r, THINK_PAIR), list(ls)))
                   for r, ls, _ in cases)
    print(f"\nextract_mcq_answer: {len(cases)} responses, {compared} comparisons, "
          f"{nonempty} with a letter, {len(mismatches)} mismatches")
    assert mismatches == []


def test_extract_mcq_answer_quirks():
    assert extract_mcq_answer("The answer is C. Because A is wrong", list("ABCD")) == "A"
    assert extract_mcq_answer("the answer is b", list("ABCD")) == ""
    assert extract_mcq_answer("<answer>\\boxed{C}</answer>", list("ABCD")) == "C"  # any-occurrence
    assert extract_mcq_answer("C是答案", list("ABCD")) == "C"  # 是 is alphabetic: any-occurrence
    assert extract_mcq_answer("", list("ABCD")) == ""
    assert extract_mcq_answer("Apple", list("ABCD")) == "A"  # letters inside words count last
    with pytest.raises(ValueError):
        extract_mcq_answer("A", ["A1", "B1"])
    with pytest.raises(ValueError):
        score_response("A", "A.B", "A")
    with pytest.raises(ValueError):
        score_frame(pl.DataFrame({"response": ["A"], "option_letters": ["A,B"],
                                  "ground_truth": ["A"]}))


# --------------------------------------------------------------------------- primary rule


@pytest.mark.parametrize(("response", "letters", "expected"), [
    ("<think>x</think><answer>\\boxed{C}</answer>", "ABCD", "C"),
    ("<answer>\\boxed{ c }</answer>", "ABCD", "C"),
    ("<answer>\\boxed{(B).}</answer>", "ABCD", "B"),
    ("<answer>\\boxed{\\text{D}}</answer>", "ABCD", "D"),
    ("<answer>\\boxed{\\textbf{(a)}}</answer>", "ABCD", "A"),
    ("<answer>\\boxed{\\mathrm{B}}</answer>", "ABCD", "B"),
    ("<answer>\\boxed{\\mathbf{B}}</answer>", "ABCD", "B"),
    ("<answer>\\boxed{\\text{\\textbf{C}}}</answer>", "ABCD", "C"),
    ("<answer>The final answer is \\boxed{B} obviously</answer>", "ABCD", "B"),
    ("<answer>\\boxed{A} no, \\boxed{D}</answer>", "ABCD", "D"),          # last box
    ("<answer>\\boxed{\\boxed{A}}</answer>", "ABCD", "A"),                # last opening = inner
    ("<answer>\\boxed{{A}}</answer>", "ABCD", None),                      # "{A}" is not a letter
    ("<answer>\\boxed{A}</answer><answer>\\boxed{B}</answer>", "ABCD", "B"),  # last block
    ("<answer>\\boxed{A}</answer><answer>B</answer>", "ABCD", None),      # last block unboxed
    ("<answer>\\boxed{A}</answer><answer>\\boxed{B}", "ABCD", None),      # last block unclosed
    ("<answer>\\boxed{B</answer>", "ABCD", None),                         # unbalanced
    ("<answer>\\boxed{A} \\boxed{B</answer>", "ABCD", None),              # last box unbalanced
    ("<answer>\\boxed{\\text{B}</answer>", "ABCD", None),
    ("\\boxed{C}", "ABCD", None),                                         # outside <answer>
    ("<think>\\boxed{C}</think>", "ABCD", None),
    ("<answer>C</answer>", "ABCD", None),
    ("<answer>\\boxed{E}</answer>", "ABCD", None),                        # not an option
    ("<answer>\\boxed{E}</answer>", "ABCDEF", "E"),
    ("<answer>\\boxed{C. Three times}</answer>", "ABCD", None),
    ("<answer>\\boxed{Three}</answer>", "ABCD", None),
    ("<answer>\\boxed{}</answer>", "ABCD", None),
    ("<answer>\\boxed {C}</answer>", "ABCD", None),
    ("<ANSWER>\\boxed{C}</ANSWER>", "ABCD", None),                        # tags case-sensitive
    ("<answer>\\boxed{ſ}</answer>", "ABCDEFGHIJKLMNOPQRS", None),          # no Unicode upper-casing
    ("<answer>\\boxed{C..}</answer>", "ABCD", "C"),
    ("<answer>\\boxed{((C))}</answer>", "ABCD", "C"),
    ("<answer>\\boxed{C)}</answer>", "ABCD", None),
    ("<answer>\\boxed{\u3000C\u00a0}</answer>", "ABCD", "C"),             # any str.isspace
])
def test_extract_boxed_answer(response: str, letters: str, expected: str | None):
    assert extract_boxed_answer(response, letters) == expected


# -------------------------------------------------------------------------------- format

THOUGHT = "I watched the clip; the presenter points at the board twice. " * 2  # 100+ non-space


@pytest.mark.parametrize(("response", "card", "exact"), [
    (f"<think>{THOUGHT}</think><answer>\\boxed{{B}}</answer>", True, True),
    (f"  \n<think>\n{THOUGHT}\n</think>\n\n<answer>\\boxed{{B}}</answer>\n", True, True),
    (f"<think>{THOUGHT}</think><answer>B</answer>", True, True),         # unboxed: accuracy only
    (f"<think>{THOUGHT}</think><answer></answer>", True, True),
    (f"<think>{'x' * 100}</think><answer>B</answer>", True, True),
    (f"<think>{'x' * 99}</think><answer>B</answer>", False, False),
    (f"<think>{' x' * 99}\n\n\n</think><answer>B</answer>", False, False),  # whitespace: no count
    (f"<think>{'x' * 99 + chr(0x3000) * 50}</think><answer>B</answer>", False, False),
    # The card allows text around the tags; the exact layout does not.
    (f"<think>{THOUGHT}</think>So:<answer>B</answer>", True, False),     # text between blocks
    (f"Sure! <think>{THOUGHT}</think><answer>B</answer>", True, False),  # text before
    (f"<think>{THOUGHT}</think><answer>B</answer> Note: B is close.", True, False),  # after
    (f"<think>{THOUGHT}<think>x</think><answer>B</answer>", True, False),  # tag twice
    (f"<think>{THOUGHT}</think><answer>B</answer><answer>B</answer>", True, False),
    (f"<think>{THOUGHT}</think><answer><answer>B</answer>", True, False),
    # Not the four tags in order, or too little thinking in the first think block.
    (f"<think>{THOUGHT}</think>", False, False),
    (f"<answer>B</answer><think>{THOUGHT}</think>", False, False),
    (f"<think>{THOUGHT}</think><answer>B", False, False),                # answer never closed
    (f"{THOUGHT}</think><answer>B</answer>", False, False),               # prefilled <think>
    (f"<think>{THOUGHT}", False, False),                                  # truncated
    (f"<think>x</think><think>{THOUGHT}</think><answer>B</answer>", False, False),
    (f"<think>{THOUGHT} if x < 5 <br></think><answer>B</answer>", True, True),  # "<", no tag
    (f"<THINK>{THOUGHT}</THINK><answer>B</answer>", False, False),
    ("", False, False),
])
def test_format_rules(response: str, card: bool, exact: bool):
    assert format_card(response) is card
    assert format_exact(response) is exact
    assert FORMAT_RULES["card"](response) is card and FORMAT_RULES["exact"](response) is exact


def test_the_format_rules_seed_is_what_python_implements():
    """Every rule of the seed vv_format_rules (what the views select a policy's column by) is one
    FORMAT_RULES implements and vice versa, each with its column in the scored responses, and
    every policy names one of them."""
    rules = read_seed("vv_format_rules")
    assert [r["rule"] for r in rules] == list(FORMAT_RULES)
    for r in rules:
        assert r["column"] == f"format_{r['rule']}"  # the column the verl metrics read too
        assert r["column"] in scoring.SCORED_SCHEMA.names
    assert {p["format_rule"] for p in read_seed("vv_scoring_policies")} <= set(FORMAT_RULES)


def test_the_default_policy_is_the_seeds_default_row():
    assert default_policy_row()["policy"] == "card"
    # Its repr is in the key that keeps a verl metrics part (response_parts.verl_metric_parts):
    # read from the seed, it is what the view used to give, so no part is computed again.
    assert repr(default_policy()) == (
        "DefaultPolicy(format_rule='card', accuracy_weight=0.8, format_weight=0.2)")


def test_score_response():
    good = f"<think>{THOUGHT}</think>\n<answer>\\boxed{{C}}</answer>"
    assert score_response(good, "ABCD", "C") == Scored("C", "boxed_answer", True, True, True)
    assert score_response(good, "ABCD", "B") == Scored("C", "boxed_answer", False, True, True)
    short = "<think>C.</think><answer>The answer is C.</answer>"
    assert score_response(short, "ABCD", "C") == Scored("C", "fallback", True, False, False)
    assert score_response("I cannot tell.", "ABCD", "C") == Scored(None, "none", False, False,
                                                                   False)
    chatty = f"Sure. {good} Note: B is close."
    assert score_response(chatty, "ABCD", "C") == Scored("C", "boxed_answer", True, True, False)
    # The fallback's letter must be an option: "G" is not one of ABCD.
    assert score_response("The answer is G", "ABCD", "C").extraction_method == "none"
    # Truncated: <think> is never closed, so lmms-eval keeps the thought and reads a letter in it.
    assert score_response("<think>Option (B) is likely", "ABCD", "B").extracted == "B"
    assert score_response(good, "ABCD", None).correct is False


# ------------------------------------------------------------------------- batch path


def _loop_frame(cases: list[tuple[str | None, str | None, str | None]]) -> pl.DataFrame:
    rows = [score_response(r or "", o or "", g) for r, o, g in cases]
    return pl.DataFrame({
        "response": [r for r, _, _ in cases], "option_letters": [o for _, o, _ in cases],
        "ground_truth": [g for _, _, g in cases],
        "extracted": [s.extracted for s in rows], "extraction_method": [s.extraction_method
                                                                        for s in rows],
        "correct": [s.correct for s in rows], "format_card": [s.format_card for s in rows],
        "format_exact": [s.format_exact for s in rows],
    }, schema_overrides={"extracted": pl.String, "response": pl.String,
                         "option_letters": pl.String, "ground_truth": pl.String})


def test_score_frame_equals_score_response():
    cases: list[tuple[str | None, str | None, str | None]] = list(_all_cases())
    # Plus the format cases, with their tags made long enough to pass or fail on structure.
    cases += [(f"<think>{THOUGHT}</think>{sep}<answer>{a}</answer>{tail}", "ABCD", "B")
              for sep in ("", "\n", " x ") for a in ("\\boxed{B}", "B", "<b>B</b>", "\\boxed{{B}}")
              for tail in ("", " ", "!")]
    cases += [(None, "ABCD", "A"), ("<answer>\\boxed{A}</answer>", None, "A"),
              ("<answer>\\boxed{A}</answer>", "ABCD", None)]
    df = pl.DataFrame({"response": [c[0] for c in cases],
                       "option_letters": [c[1] for c in cases],
                       "ground_truth": [c[2] for c in cases]},
                      schema={"response": pl.String, "option_letters": pl.String,
                              "ground_truth": pl.String})
    fast = score_frame(df)
    expected = _loop_frame(cases)
    print(f"\nscore_frame vs score_response: {df.height} rows, methods "
          f"{dict(fast.group_by('extraction_method').len().iter_rows())}")
    assert fast.columns == expected.columns
    assert fast.schema == expected.schema
    diff = fast.with_row_index().join(expected.with_row_index(), on="index", suffix="_loop")
    bad = diff.filter(pl.any_horizontal(
        pl.col(c).ne_missing(pl.col(f"{c}_loop"))
        for c in ("extracted", "extraction_method", "correct", "format_card", "format_exact")))
    assert bad.height == 0, bad.head(10).to_dicts()
    # Input order and extra columns are kept.
    extra = score_frame(df.with_columns(pl.int_range(pl.len()).alias("row")))
    assert extra["row"].to_list() == list(range(df.height))


def test_score_frame_empty_and_chunked():
    empty = pl.DataFrame(schema={"response": pl.String, "option_letters": pl.String,
                                 "ground_truth": pl.String})
    assert score_frame(empty).height == 0
    cases = generated_cases(400, seed=11)
    df = pl.DataFrame(cases, schema=["response", "option_letters", "ground_truth"], orient="row")
    chunked = pl.concat([df.slice(0, 150), df.slice(150)], rechunk=False)
    assert score_frame(chunked).equals(score_frame(df))
    assert score_frame(df).drop("response", "option_letters", "ground_truth").equals(
        _loop_frame(cases).drop("response", "option_letters", "ground_truth"))


def test_whitespace_class_is_str_isspace():
    # score_frame's regexes use WS_CLASS for Python's str.isspace (Rust's \s lacks \x1c-\x1f).
    chars = [chr(c) for c in range(sys.maxunicode + 1) if not 0xD800 <= c <= 0xDFFF]
    matched = pl.Series(chars).str.contains(f"^{scoring.WS_CLASS}$").to_list()
    assert [c for c, m in zip(chars, matched, strict=True) if m] == [c for c in chars
                                                                      if c.isspace()]


def test_python_re_space_is_str_isspace():
    # _TAIL_RE relies on it when it reads the text after </think>.
    import re
    chars = [chr(c) for c in range(sys.maxunicode + 1) if not 0xD800 <= c <= 0xDFFF]
    space = re.compile(r"\s")
    assert [c for c in chars if space.match(c)] == [c for c in chars if c.isspace()]


def _random_ascii(rng: random.Random, n: int) -> list[str]:
    alphabet = "ABCDEFabcdef xyz.,!?;:'\"()<>\t\n\x1c-" + "ABCD " * 3
    return ["".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 40)))
            for _ in range(n)]


def test_vectorized_strip_matches_python():
    # The ASCII fallback lane strips with two regexes; upstream strips in eight steps.
    texts = _random_ascii(random.Random(5), 5000) + [",", ".,", ",.", "a,.", "a.,", "!.", ".!",
                                                     " . A", "'\"A\"'", "", "   "]
    got = pl.Series(texts).str.replace(scoring._LEAD, "").str.replace(scoring._TRAIL, "")
    expected = []
    for text in texts:
        core = text.strip()
        for mark in answer_extraction._EDGE_PUNCTUATION:
            core = core.strip(mark)
        expected.append(core)
    assert got.to_list() == expected


def test_vectorized_fallback_matches_extract_mcq_answer():
    rng = random.Random(9)
    texts = _random_ascii(rng, 4000) + [r for r, _, _ in generated_cases(1000, seed=13)
                                        if r.isascii() and "</think>" not in r]
    letters = [rng.choice(LETTER_SETS) for _ in texts]
    rows = pl.DataFrame({"i": pl.Series(range(len(texts)), dtype=pl.UInt32), "t": texts,
                         "L": letters})
    got = scoring._fallback_ascii(rows).sort("i")
    assert got["i"].to_list() == list(range(len(texts)))
    compared = 0
    for text, option_letters, letter, undecided in zip(
            texts, letters, got["letter"].to_list(), got["undecided"].to_list(), strict=True):
        if undecided:
            continue
        expected = extract_mcq_answer(text.strip(), list(option_letters)) or None
        assert letter == expected, (text, option_letters)
        compared += 1
    print(f"\n_fallback_ascii: {compared} texts compared")
    assert compared > 3000
