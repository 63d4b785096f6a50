"""Val-suite scoring speed: `score_frame` (batch path) vs a plain per-row loop over
`score_response`, on 1,000,000 deterministic synthetic responses.

    python bench/scoring.py [--rows N] [--seed S]

Part 1 (this file): the responses mimic an RL-trained reasoning model on the val suite — mostly
`<think>…</think>\\n<answer>\\boxed{X}</answer>` with a unique chain of thought (3–13 sentences,
~100–1,100 characters, mean ~470), plus the ways such models go wrong, in the shares of
`KINDS` (tilted towards the failure modes, so every path gets real traffic): short thinking,
boxed variants (`\\text{}`, lowercase, "(C)", "C. text", nested and unbalanced braces), unboxed
answers, several answer blocks, boxes inside the thinking, a prefilled `<think>` (only
`</think>` in the completion), truncated outputs, free text without tags, CJK answer phrases,
stray text around the blocks, empty strings. Option sets are ABCD / ABCDE / ABCDEF.

Both paths must give identical rows. score_frame is timed 3 times (median reported; all
printed), the loop once (~20 s, long enough to average out noise). Targets: score_frame ≥ 20×
faster than the loop and ≤ 15 s; exits 1 if either is missed or the results differ. Other
processes on the machine hurt score_frame (it needs both cores) more than the loop (one).

Part 2: the Rynn-VP scoring views over 200 cases x 100 systems x 3 judge runs
(`bench/scoring_views.py`), each <= 100 ms.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
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
# Sentences per chain of thought (~60 characters each).
SENTENCES = (3, 13)

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
    """Deterministic synthetic responses (same seed → same frame).

    All random draws are made up front with numpy; sentences are filled in once into a pool and
    each chain of thought joins 3–13 pool sentences, so thoughts are practically all distinct
    while a million rows build in a few seconds.
    """

    POOL = 20_000

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.pools = {letters: [self._sentence(letters) for _ in range(self.POOL)]
                      for letters, _ in LETTER_SETS}

    def _pick(self, options: Sequence[str]) -> str:
        return options[int(self.rng.integers(len(options)))]

    def _time(self) -> str:
        secs = int(self.rng.integers(3600))
        return f"{secs // 60:02d}:{secs % 60:02d}"

    def _sentence(self, letters: str) -> str:
        return self._pick(_SENTENCES).format(
            t=self._time(), t2=self._time(), n=int(self.rng.integers(1, 200)),
            o=self._pick(_OBJECTS), o2=self._pick(_OBJECTS), a=self._pick(_ACTIONS),
            L=self._pick(letters), L2=self._pick(letters))

    def rows(self, n: int) -> pl.DataFrame:
        rng = self.rng
        sets = rng.choice(len(LETTER_SETS), n, p=[w for _, w in LETTER_SETS]).tolist()
        kinds = rng.choice(len(KINDS), n, p=[w for _, w in KINDS]).tolist()
        sentences = rng.integers(SENTENCES[0], SENTENCES[1] + 1, n)
        starts = np.concatenate(([0], np.cumsum(sentences))).tolist()
        picks = rng.integers(0, self.POOL, int(starts[-1])).tolist()
        # Uniform draws per row: truth, correct?, wrong answer, separator, 3 for the kind.
        # Column lists of floats, not per-row lists: millions of small lists wake the GC.
        u0, u1, u2, u3, u4, u5, u6 = (col.tolist() for col in rng.random((7, n)))
        seps = ("\n", "\n\n", " ", "")
        out_r, out_l, out_g = [], [], []
        for i in range(n):
            letters = LETTER_SETS[sets[i]][0]
            pool = self.pools[letters]
            truth = letters[int(u0[i] * len(letters))]
            # Right about half the time (the card: ~0.49), else any option (may be right too).
            ans = truth if u1[i] < 0.49 else letters[int(u2[i] * len(letters))]
            think = " ".join([pool[j] for j in picks[starts[i]:starts[i + 1]]])
            out_r.append(_compose(KINDS[kinds[i]][0], think, ans, letters,
                                  seps[int(u3[i] * 4)], u4[i], u5[i], u6[i]))
            out_l.append(letters)
            out_g.append(truth)
        return pl.DataFrame({"response": out_r, "option_letters": out_l, "ground_truth": out_g})


def _of(options: Sequence[str], u: float) -> str:
    return options[int(u * len(options))]


def _compose(kind: str, think: str, ans: str, letters: str, sep: str,
             u1: float, u2: float, u3: float) -> str:
    """One response of `kind`; u1-u3 are uniform draws for the kind's own variations."""
    box = f"\\boxed{{{ans}}}"
    other = _of(letters, u3)
    opt_text = _of(_OPTION_TEXT, u2)
    if kind == "canonical":
        return f"<think>\n{think}\n</think>{sep}<answer>{box}</answer>"
    if kind == "boxed_variant":
        inner = _of((f" {ans} ", f"({ans})", f"\\text{{{ans}}}", ans.lower(), f"{ans}.",
                     f"\\textbf{{{ans}}}", f"{ans}. {opt_text}", opt_text,
                     f"\\mathrm{{ {ans} }}", f"({ans.lower()}).", f"Option {ans}"), u1)
        return f"<think>\n{think}\n</think>{sep}<answer>\\boxed{{{inner}}}</answer>"
    if kind == "short_think":
        return f"<think>{other} fits.</think>{sep}<answer>{box}</answer>"
    if kind == "unboxed_answer":
        inner = _of((ans, f"The answer is {ans}.", f"({ans}) {opt_text}", f"{ans}. {opt_text}",
                     opt_text), u1)
        return f"<think>\n{think}\n</think>{sep}<answer>{inner}</answer>"
    if kind == "box_in_think":
        head, _, tail = think.partition(". ")
        return (f"<think>\n{head}. Tentatively \\boxed{{{other}}}, but let me verify. {tail}"
                f"\n</think>{sep}<answer>{box}</answer>")
    if kind == "prefilled_think":
        return f"{think}\n</think>{sep}<answer>{box}</answer>"
    if kind == "several_answers":
        return (f"<think>\n{think}\n</think>\n<answer>\\boxed{{{other}}}</answer>\n"
                f"Actually, correcting myself:\n<answer>{box}</answer>")
    if kind == "nested_or_unbalanced":
        inner = _of((f"\\text{{\\textbf{{{ans}}}}}}}", f"{{{ans}}}}}", ans, f"\\text{{{ans}}}"), u1)
        return f"<think>\n{think}\n</think>{sep}<answer>\\boxed{{{inner}</answer>"
    if kind == "truncated":
        return f"<think>\n{think[:20 + int(u1 * len(think))]}"
    if kind == "free_text":
        if u1 < 0.5:
            return f"{think} Therefore, the answer is {ans}."
        return f"{think}\nFinal answer: ({ans})"
    if kind == "cjk":
        phrase = _of((f"答案是 {ans}", f"答案为{ans}", f"选{ans}", f"正确答案：{ans}"), u1)
        return f"<think>\n让我们逐步分析。{think}\n</think>{sep}<answer>{phrase}</answer>"
    if kind == "stray_text":
        return _of((f"Sure! <think>\n{think}\n</think>{sep}<answer>{box}</answer>",
                    f"<think>\n{think}\n</think>\nSo the final answer:\n<answer>{box}</answer>",
                    f"<think>\n{think}\n</think>{sep}<answer>{box}</answer> Hope this helps."),
                   u1)
    if kind == "no_answer_tags":
        return f"<think>\n{think}\n</think>{sep}{_of((box, ans, f'{ans}.'), u1)}"
    return ""


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
        pl.Series("format_card", cols[3], dtype=pl.Boolean),
        pl.Series("format_exact", cols[4], dtype=pl.Boolean),
    )


def bench_views() -> bool:
    """Part 2: the Rynn-VP scoring views at scale (bench/scoring_views.py)."""
    sys.path.insert(0, str(Path(__file__).parent))
    from scoring_views import bench_views as run_views

    return run_views()


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

    runs = []
    for _ in range(3):
        start = time.perf_counter()
        fast = score_frame(df)
        runs.append(time.perf_counter() - start)
    t_fast = statistics.median(runs)
    start = time.perf_counter()
    slow = per_row_loop(df)
    t_loop = time.perf_counter() - start

    same = fast.equals(slow)
    if not same:
        diff = fast.with_row_index().join(slow.with_row_index(), on="index", suffix="_loop")
        print("MISMATCH, first differing rows:")
        print(diff.filter(
            pl.any_horizontal(pl.col(c).ne_missing(pl.col(f"{c}_loop")) for c in
                              ("extracted", "extraction_method", "correct", "format_card",
                               "format_exact"))).head(5))
    print(fast.group_by("extraction_method").len().sort("extraction_method"))
    print(f"accuracy {fast['correct'].mean():.4f}  format card "
          f"{fast['format_card'].mean():.4f}  exact {fast['format_exact'].mean():.4f}")
    ratio = t_loop / t_fast
    print(f"\nper-row loop  {t_loop:8.2f} s")
    print(f"score_frame   {t_fast:8.2f} s   (median of {', '.join(f'{r:.2f}' for r in runs)})")
    print(f"ratio         {ratio:8.1f}x   (targets: >= {TARGET_RATIO:.0f}x, "
          f"score_frame <= {TARGET_SECONDS:.0f} s)")
    ok = same and ratio >= TARGET_RATIO and t_fast <= TARGET_SECONDS
    print(f"{'PASS' if ok else 'FAIL'}: identical={same}")
    views_ok = bench_views()
    return 0 if ok and views_ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
