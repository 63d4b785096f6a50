"""Demo model responses for the val suite (`RESPONSES_DIR` layout), generated deterministically.

Two training runs × four checkpoints over every demo question, with the variety real outputs
have: well-formatted answers, a think block too short for the format reward, missing tags, a
lower-case letter in the box, the answer outside the box, `\\text{}` in the box, text around the
tags (the card's format rule allows it, the exact layout does not), letters beyond D
(PerceptionComp / Video-Holmes), and one checkpoint with four samples per question (mean@k and
majority vote). Run `base-rl` is written as JSONL with `uid`; run `sft-rl` as Parquet with
`data_source` + `row_index`. Accuracy climbs with the step, so the best checkpoint is not the last
one for every run.

Run `verl-grpo` is what verl itself writes with `trainer.validation_data_dir`:
`verl-grpo/<step>.jsonl` for steps 50 and 100, `val_kwargs.n = 4`, the val files given in the
order PerceptionComp, Video-MME, Video-Holmes (benchlake infers it), `input` as Qwen2.5-VL's chat
template decodes with `skip_special_tokens=True`, and a reward function's extras (`acc`,
`format`, `pred`, `reward`) that reads only a capital letter inside `\boxed{}`, so verl and
benchlake disagree where it matters.

Model `Qwen__Qwen2.5-VL-7B-Instruct` is an lmms-eval 0.7 `--log_samples` file of task `videomme`
(`<model>/<date>_samples_videomme.jsonl`), documents in the shuffled order of a multi-GPU run,
with its prompt, `resps` beside `filtered_resps` where the reasoning was stripped, and the
`videomme_perception_score` dict scored by lmms-eval's own extractor.
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Any

import pyarrow as pa

from benchlake_demo.video_val import _VIDEO_BY_KEY, MME, QUESTIONS, user_content
from dagster_project.tables import atomic_write_bytes, write_table
from dagster_project.video_val.answer_extraction import extract_mcq_answer
from dagster_project.video_val.schema import SYSTEM_PROMPT

RUNS = {
    # run_id: {step: probability of answering correctly}
    "base-rl": {20: 0.35, 40: 0.45, 60: 0.6, 80: 0.55},
    "sft-rl": {20: 0.4, 40: 0.55, 60: 0.5, 80: 0.65},
}
MULTI_SAMPLE = ("base-rl", 60, 4)  # run, step, k samples per question

_REASONING = (
    "The clip opens on the scene described in the question. Tracking the objects frame by "
    "frame, the relevant event happens in the middle third, and the final frames confirm the "
    "state. Comparing that with each option rules out the distractors."
)


def _letters(n: int) -> str:
    return "ABCDEF"[:n]


def _response(rng: random.Random, letter: str) -> str:
    style = rng.choices(
        ["good", "short_think", "no_tags", "lower_box", "outside_box", "text_box", "cjk",
         "chatty"],
        weights=[60, 10, 8, 6, 8, 5, 3, 6])[0]
    think = f"<think>{_REASONING} So the answer is option {letter}.</think>\n"
    if style == "good":
        return f"{think}<answer>\\boxed{{{letter}}}</answer>"
    if style == "short_think":
        return f"<think>Looks like {letter}.</think>\n<answer>\\boxed{{{letter}}}</answer>"
    if style == "no_tags":
        return f"After watching, the answer is {letter}."
    if style == "lower_box":
        return f"{think}<answer>\\boxed{{{letter.lower()}}}</answer>"
    if style == "outside_box":
        return f"{think}<answer>({letter})</answer>"
    if style == "text_box":
        return f"{think}<answer>\\boxed{{\\text{{{letter}.}}}}</answer>"
    if style == "chatty":  # format_ok under the card's rule, not under the exact layout
        return f"Sure. {think}<answer>\\boxed{{{letter}}}</answer> Hope this helps."
    return f"<think>视频显示了关键动作。</think><answer>答案是 {letter}</answer>"


def demo_records() -> dict[str, list[dict[str, Any]]]:
    """run_id → response records (deterministic)."""
    out: dict[str, list[dict[str, Any]]] = {}
    for run, steps in RUNS.items():
        records = []
        for step, p_correct in steps.items():
            k = MULTI_SAMPLE[2] if (run, step) == MULTI_SAMPLE[:2] else 1
            for source, questions in sorted(QUESTIONS.items()):
                for row_index, q in enumerate(questions):
                    for sample in range(k):
                        rng = random.Random(f"{run}/{step}/{source}/{row_index}/{sample}")
                        letters = _letters(len(q.options))
                        right = rng.random() < p_correct
                        letter = q.answer if right else rng.choice(
                            [x for x in letters if x != q.answer])
                        rec = {"run_id": run, "step": step, "sample_idx": sample,
                               "response": _response(rng, letter)}
                        if run == "base-rl":
                            rec["uid"] = f"{source}:{row_index}"
                        else:
                            rec.update(data_source=source, row_index=row_index)
                        records.append(rec)
        out[run] = records
    return out


VERL_RUN = "verl-grpo"
VERL_STEPS = {50: 0.45, 100: 0.6}
VERL_N = 4
VERL_ORDER = ("perceptioncomp_test", "videomme_v1_test", "video_holmes_test")


def verl_input(question: str, options: tuple[str, ...]) -> str:
    """The prompt as verl dumps it: Qwen2.5-VL's chat template decoded with
    skip_special_tokens=True (the vision tokens that replaced `<video>` are gone)."""
    user = user_content(question, options).replace("<video>", "")
    return f"system\n{SYSTEM_PROMPT}\nuser\n{user}\nassistant\n"


def verl_reward(output: str, truth: str) -> dict[str, Any]:
    """A typical verl reward function's result: a capital letter in the last \\boxed{}."""
    boxes = re.findall(r"\\boxed\{([A-Z])\}", output)
    pred = boxes[-1] if boxes else ""
    acc = float(pred == truth)
    fmt = float(re.fullmatch(r"(?s)<think>.+</think>\s*<answer>.+</answer>", output) is not None)
    score = 0.8 * acc + 0.2 * fmt
    return {"score": score, "acc": acc, "format": fmt, "pred": pred, "reward": score}


def verl_dump_lines(step: int, p_correct: float) -> list[dict[str, Any]]:
    """One validation pass of run `verl-grpo` as verl writes `<step>.jsonl`."""
    lines = []
    for source in VERL_ORDER:
        for row_index, q in enumerate(QUESTIONS[source]):
            for sample in range(VERL_N):
                rng = random.Random(f"{VERL_RUN}/{step}/{source}/{row_index}/{sample}")
                letters = _letters(len(q.options))
                letter = q.answer if rng.random() < p_correct else rng.choice(
                    [x for x in letters if x != q.answer])
                output = _response(rng, letter)
                reward = verl_reward(output, q.answer)
                lines.append({"input": verl_input(q.question, q.options), "output": output,
                              "gts": q.answer, "score": reward.pop("score"), "step": step,
                              **reward})
    return lines


LMMS_MODEL = "Qwen__Qwen2.5-VL-7B-Instruct"
LMMS_FILE = f"{LMMS_MODEL}/20261201_120000_samples_videomme.jsonl"
LMMS_OPTION_PROMPT = ("Select the best answer to the following multiple-choice question based on "
                      "the video and the subtitles. Respond with only the letter (A, B, C, or D) "
                      "of the correct option.")
LMMS_POST_PROMPT = "The best answer is:"


def lmms_eval_samples() -> list[dict[str, Any]]:
    """What lmms-eval 0.7 logs for Video-MME (`videomme_doc_to_text`, `videomme_process_results`,
    `EvaluationTracker.save_results_samples`), in the order of a two-GPU run."""
    out = []
    for doc_id, q in enumerate(QUESTIONS[MME]):
        rng = random.Random(f"{LMMS_MODEL}/{doc_id}")
        letter = q.answer if rng.random() < 0.6 else rng.choice(
            [x for x in _letters(len(q.options)) if x != q.answer])
        options = "\n".join(f"{chr(ord('A') + i)}. {t}" for i, t in enumerate(q.options))
        raw = rng.choice([letter, f"<think>The key moment is near the end.</think>{letter}",
                          f"The answer is {letter}."])
        filtered = raw.split("</think>")[-1]
        pred = extract_mcq_answer(filtered, ["A", "B", "C", "D"])
        meta = dict(q.meta)
        sample: dict[str, Any] = {
            "doc_id": doc_id, "target": q.answer, "filtered_resps": [filtered],
            "resps": [[raw]], "token_counts": [None],
            "doc_hash": f"{rng.getrandbits(64):016x}",
            "videomme_perception_score": {
                "question_id": f"{doc_id + 1:03d}-1", "duration": meta["question_type"],
                "category": meta["category"], "sub_category": meta["subject"],
                "task_category": meta["task"], "pred_answer": pred, "answer": q.answer,
                "score": 1.0 if pred.lower() == q.answer.lower() else 0.0,
                "videoID": Path(_VIDEO_BY_KEY[q.video].rel_path).stem},
            "input": f"{LMMS_OPTION_PROMPT}\n{q.question}\n{options}\n{LMMS_POST_PROMPT}",
        }
        # save_results_samples: one request per doc is flattened; equal resps are dropped
        sample["resps"], sample["filtered_resps"] = raw, filtered
        if sample["resps"] == sample["filtered_resps"]:
            sample.pop("resps")
        out.append(sample)
    return out[0::2] + out[1::2]  # rank 0's documents, then rank 1's


def build_responses_demo(dest: Path) -> Path:
    dest.mkdir(parents=True)
    runs = demo_records()
    lines = "".join(json.dumps(r, sort_keys=True, ensure_ascii=False) + "\n"
                    for r in runs["base-rl"])
    atomic_write_bytes(dest / "base-rl.jsonl", lines.encode())
    schema = pa.schema([("run_id", pa.string()), ("step", pa.int64()),
                        ("data_source", pa.string()), ("row_index", pa.int64()),
                        ("sample_idx", pa.int64()), ("response", pa.string())])
    write_table(pa.Table.from_pylist(runs["sft-rl"], schema=schema), dest / "sft-rl.parquet")
    (dest / VERL_RUN).mkdir()
    for step, p_correct in VERL_STEPS.items():
        # verl's own writer: json.dumps(entry, ensure_ascii=False), keys in its order
        dump = "".join(json.dumps(line, ensure_ascii=False) + "\n"
                       for line in verl_dump_lines(step, p_correct))
        atomic_write_bytes(dest / VERL_RUN / f"{step}.jsonl", dump.encode())
    (dest / LMMS_MODEL).mkdir()
    log = "".join(json.dumps(s, ensure_ascii=False) + "\n" for s in lmms_eval_samples())
    atomic_write_bytes(dest / LMMS_FILE, log.encode())
    return dest
