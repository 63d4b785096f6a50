"""Val-suite scoring speed: `score_frame` (batch path) vs a plain per-row loop over
`score_response`, on 1,000,000 deterministic synthetic responses.

    python bench/scoring.py [--rows N] [--seed S]

Part 1 (this file): the responses mimic an RL-trained reasoning model on the val suite — mostly
`<think>…</think>\\n<answer>\\boxed{X}</answer>` with a unique chain of thought (~100–1,000
characters), plus the ways such models go wrong, in the shares of `KINDS`: short thinking,
boxed variants (`\\text{}`, lowercase, "(C)", "C. text", nested and unbalanced braces), unboxed
answers, several answer blocks, boxes inside the thinking, a prefilled `<think>` (only
`</think>` in the completion), truncated outputs, free text without tags, CJK answer phrases,
stray text around the blocks, empty strings. Option sets are ABCD / ABCDE / ABCDEF.

Both paths must give identical rows. Targets: score_frame ≥ 20× faster than the loop and
≤ 15 s; exits 1 if either is missed or the results differ.

Part 2 (SQL-view timings) is added by the lead in `bench_views()`.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from pathlib import Path

import polars as pl

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from dagster_project.video_val.scoring import score_frame, score_response  # noqa: E402

TARGET_RATIO = 20.0
TARGET_SECONDS = 15.0

# (kind, share). Shares are a judgment of what RL checkpoints emit, tilted towards the hard
# cases so the bench exercises every route through score_frame.
KINDS: tuple[tuple[str, float], ...] = (
    ("canonical", 0.600),
    ("boxed_variant", 0.080),
    ("short_think", 0.040),
    ("unboxed_answer", 0.040),
    ("box_in_think", 0.040),
    ("prefilled_think", 0.040),
    ("several_answers", 0.020),
    ("nested_or_unbalanced", 0.015),
    ("truncated", 0.025),
    ("free_text", 0.025),
    ("cjk", 0.020),
    ("stray_text", 0.025),
    ("no_answer_tags", 0.025),
    ("empty", 0.005),
)
LETTER_SETS = (("ABCD", 0.70), ("ABCDE", 0.15), ("ABCDEF", 0.15))

_OBJECTS = ("the presenter", "a red car", "the dog", "two children", "the chef", "a cyclist",
            "the whiteboard", "the goalkeeper", "an old man", "the camera", "a blue cup")
_ACTIONS = ("points at", "walks past", "picks up", "looks at", "opens", "moves towards",
            "hands over", "waves at", "puts down", "turns to")
_SENTENCES = (
    "At {t} {o} {a} {o2}.",
    "Between {t} and {t2} the scene shows {o} and {o2}.",
    "I count {n} times that {o} {a} {o2}.",
    "Option {L} says {o} {a} {o2}, which contradicts frame {n}.",
    "({L}) seems unlikely because {o} is not visible after {t}.",
    "So {L}. is probably wrong.",
    "Let me re-check the segment around {t}: {o} {a} {o2} again.",
    "The question asks how often {o} {a} {o2}; the options are {L} and {L2}.",
    "Maybe {L}: the timing at {t} fits, but {n} frames later it changes.",
    "Wait, {o} also {a} {o2} near {t2}, so the count is {n}.",
    "Comparing {L} with {L2}, the evidence favours {L2}.",
    "Nothing else happens until {t2}.",
    "In the first {n} seconds {o} stays still.",
    "This rules out {L} and {L2}.",
)
_OPTION_TEXT = ("Once", "Twice", "Three times", "Four times", "the red car", "in the kitchen")


class Generator:
    """Deterministic synthetic responses (same seed → same list)."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.kinds = [k for k, _ in KINDS]
        self.kind_weights = [w for _, w in KINDS]
        self.letter_sets = [s for s, _ in LETTER_SETS]
        self.letter_weights = [w for _, w in LETTER_SETS]

    def _time(self) -> str:
        secs = self.rng.randrange(0, 3600)
        return f"{secs // 60:02d}:{secs % 60:02d}"

    def think(self, letters: str, sentences: int) -> str:
        rng = self.rng
        out = []
        for template in rng.choices(_SENTENCES, k=sentences):
            out.append(template.format(
                t=self._time(), t2=self._time(), n=rng.randrange(1, 200),
                o=rng.choice(_OBJECTS), o2=rng.choice(_OBJECTS), a=rng.choice(_ACTIONS),
                L=rng.choice(letters), L2=rng.choice(letters)))
        return " ".join(out)

    def row(self) -> tuple[str, str, str]:
        rng = self.rng
        letters = rng.choices(self.letter_sets, self.letter_weights)[0]
        truth = rng.choice(letters)
        # ~49% accuracy, like the card's checkpoints.
        ans = truth if rng.random() < 0.49 else rng.choice(letters)
        kind = rng.choices(self.kinds, self.kind_weights)[0]
        sep = rng.choice(("\n", "\n\n", " ", ""))
        think = self.think(letters, rng.randrange(3, 14))
        box = f"\\boxed{{{ans}}}"
        if kind == "canonical":
            text = f"<think>\n{think}\n</think>{sep}<answer>{box}</answer>"
        elif kind == "boxed_variant":
            inner = rng.choice((
                f" {ans} ", f"({ans})", f"\\text{{{ans}}}", ans.lower(), f"{ans}.",
                f"\\textbf{{{ans}}}", f"{ans}. {rng.choice(_OPTION_TEXT)}",
                rng.choice(_OPTION_TEXT), f"\\mathrm{{ {ans} }}", f"({ans.lower()}).",
                f"Option {ans}"))
            text = f"<think>\n{think}\n</think>{sep}<answer>\\boxed{{{inner}}}</answer>"
        elif kind == "short_think":
            text = f"<think>{rng.choice(letters)} fits.</think>{sep}<answer>{box}</answer>"
        elif kind == "unboxed_answer":
            inner = rng.choice((ans, f"The answer is {ans}.", f"({ans}) {rng.choice(_OPTION_TEXT)}",
                                f"{ans}. {rng.choice(_OPTION_TEXT)}", rng.choice(_OPTION_TEXT)))
            text = f"<think>\n{think}\n</think>{sep}<answer>{inner}</answer>"
        elif kind == "box_in_think":
            first = rng.choice(letters)
            text = (f"<think>\n{think} Tentatively \\boxed{{{first}}}, but let me verify. "
                    f"{self.think(letters, 2)}\n</think>{sep}<answer>{box}</answer>")
        elif kind == "prefilled_think":
            text = f"{think}\n</think>{sep}<answer>{box}</answer>"
        elif kind == "several_answers":
            first = rng.choice(letters)
            text = (f"<think>\n{think}\n</think>\n<answer>\\boxed{{{first}}}</answer>\n"
                    f"Actually, correcting myself:\n<answer>{box}</answer>")
        elif kind == "nested_or_unbalanced":
            inner = rng.choice((f"\\text{{\\textbf{{{ans}}}}}", f"{{{ans}}}", f"{ans}",
                                f"\\text{{{ans}"))
            close = "" if inner == ans else "}"
            text = f"<think>\n{think}\n</think>{sep}<answer>\\boxed{{{inner}{close}</answer>"
        elif kind == "truncated":
            cut = rng.randrange(20, len(think) + 1)
            text = f"<think>\n{think[:cut]}"
        elif kind == "free_text":
            text = f"{think} Therefore, the answer is {ans}."
            if rng.random() < 0.5:
                text = f"{think}\nFinal answer: ({ans})"
        elif kind == "cjk":
            phrase = rng.choice((f"答案是 {ans}", f"答案为{ans}", f"选{ans}", f"正确答案：{ans}"))
            text = f"<think>\n让我们逐步分析。{think}\n</think>{sep}<answer>{phrase}</answer>"
        elif kind == "stray_text":
            text = rng.choice((
                f"Sure! <think>\n{think}\n</think>{sep}<answer>{box}</answer>",
                f"<think>\n{think}\n</think>\nSo the final answer:\n<answer>{box}</answer>",
                f"<think>\n{think}\n</think>{sep}<answer>{box}</answer> Hope this helps.",
            ))
        elif kind == "no_answer_tags":
            text = f"<think>\n{think}\n</think>{sep}{rng.choice((box, ans, f'{ans}.'))}"
        else:
            text = ""
        return text, letters, truth

    def rows(self, n: int) -> pl.DataFrame:
        data = [self.row() for _ in range(n)]
        return pl.DataFrame(data, schema=["response", "option_letters", "ground_truth"],
                            orient="row")


def generate(n: int, seed: int = 20240607) -> pl.DataFrame:
    return Generator(seed).rows(n)


def per_row_loop(df: pl.DataFrame) -> pl.DataFrame:
    """The plain baseline: score_response on every row, collected into the same columns."""
    scored = [score_response(r, o, g) for r, o, g in zip(
        df["response"].to_list(), df["option_letters"].to_list(), df["ground_truth"].to_list(),
        strict=True)]
    cols = list(zip(*scored, strict=True)) if scored else [[]] * 5
    return df.with_columns(
        pl.Series("extracted", cols[0], dtype=pl.String),
        pl.Series("extraction_method", cols[1], dtype=pl.String),
        pl.Series("correct", cols[2], dtype=pl.Boolean),
        pl.Series("format_ok", cols[3], dtype=pl.Boolean),
        pl.Series("composite", cols[4], dtype=pl.Float64),
    )


def bench_views() -> None:
    # ---------------------------------------------------------------- part 2 (the lead's)
    print("views: see part 2")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=20240607)
    args = parser.parse_args()

    start = time.perf_counter()
    df = generate(args.rows, args.seed)
    mib = df["response"].str.len_bytes().sum() / 2**20
    print(f"generated {df.height:,} responses ({mib:.0f} MiB of text) in "
          f"{time.perf_counter() - start:.1f} s; cpus={os.cpu_count()}, "
          f"polars threads={pl.thread_pool_size()}")

    start = time.perf_counter()
    fast = score_frame(df)
    t_fast = time.perf_counter() - start
    start = time.perf_counter()
    slow = per_row_loop(df)
    t_loop = time.perf_counter() - start

    same = fast.equals(slow)
    if not same:
        diff = fast.with_row_index().join(slow.with_row_index(), on="index", suffix="_loop")
        print("MISMATCH, first differing rows:")
        print(diff.filter(
            pl.any_horizontal(pl.col(c).ne_missing(pl.col(f"{c}_loop")) for c in
                              ("extracted", "extraction_method", "correct", "format_ok",
                               "composite"))).head(5))
    print(fast.group_by("extraction_method").len().sort("extraction_method"))
    print(f"accuracy {fast['correct'].mean():.4f}  format {fast['format_ok'].mean():.4f}  "
          f"composite {fast['composite'].mean():.4f}")
    ratio = t_loop / t_fast
    print(f"\nper-row loop  {t_loop:8.2f} s")
    print(f"score_frame   {t_fast:8.2f} s")
    print(f"ratio         {ratio:8.1f}x   (targets: >= {TARGET_RATIO:.0f}x, "
          f"score_frame <= {TARGET_SECONDS:.0f} s)")
    ok = same and ratio >= TARGET_RATIO and t_fast <= TARGET_SECONDS
    print(f"{'PASS' if ok else 'FAIL'}: identical={same}")
    bench_views()
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
