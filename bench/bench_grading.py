"""Math grading throughput: the hard-limited pool against plain in-process math-verify.

1,000 mixed items (right and wrong answers in several forms, thinking traces, no answer),
graded once by a warm :class:`MathGrader` and once in this process with :func:`grade_one`,
on the same items in the same run; plus the slowest of a set of hostile answers.
"""

from __future__ import annotations

import os
import random
import time

from agon.grading.math import MathGrader, grade_one, hostile_answers

TARGETS = {"grading.pool_over_inprocess": (">=", 0.7)}

HOSTILE = hostile_answers()


def mixed_items(n: int = 1000, seed: int = 0) -> tuple[list[str], list[str]]:
    """``n`` (gold, completion) pairs in assorted forms, about half correct."""
    rng = random.Random(seed)
    golds, comps = [], []
    for i in range(n):
        a, b = rng.randint(1, 50), rng.randint(2, 60)
        kind = i % 6
        if kind == 0:
            gold, ans = (
                f"\\frac{{{a}}}{{{b}}}",
                f"{a}/{b}" if rng.random() < 0.5 else f"{a + 1}/{b}",
            )
        elif kind == 1:
            gold, ans = str(a * b), str(a * b + rng.choice([0, 0, 1]))
        elif kind == 2:
            gold, ans = (
                f"[{a}, {a + b})",
                f"[{a},{a + b})" if rng.random() < 0.5 else f"({a},{a + b})",
            )
        elif kind == 3:
            gold, ans = (
                f"x^2 + {2 * a}x + {a * a}",
                f"(x+{a})^2" if rng.random() < 0.5 else f"(x+{a + 1})^2",
            )
        elif kind == 4:
            gold, ans = f"\\{{{a},{b}\\}}", f"\\{{{b},{a}\\}}"
        else:
            gold, ans = str(a), None
        text = f"<think>try {a} and {b}</think> so " + (
            f"the answer is \\boxed{{{ans}}}" if ans else "I am not sure."
        )
        golds.append(gold)
        comps.append(text)
    return golds, comps


def run() -> dict[str, float]:
    golds, comps = mixed_items()
    workers = os.cpu_count() or 1
    with MathGrader(timeout_s=5.0, workers=workers) as grader:
        grader.grade(golds[: workers * 4], comps[: workers * 4])  # warm the workers
        t0 = time.perf_counter()
        pool_verdicts = grader.grade(golds, comps)
        pool_s = time.perf_counter() - t0

        hostile_times = []
        for h in HOSTILE:
            t0 = time.perf_counter()
            grader.grade(["1"], [h])
            hostile_times.append(time.perf_counter() - t0)

    grade_one(golds[0], comps[0])  # pay imports before timing
    t0 = time.perf_counter()
    inproc_verdicts = [grade_one(g, c) for g, c in zip(golds, comps)]
    inproc_s = time.perf_counter() - t0
    agree = sum(a.correct == b.correct for a, b in zip(pool_verdicts, inproc_verdicts)) / len(golds)
    return {
        "grading.items_per_s": len(golds) / pool_s,
        "grading.inprocess_items_per_s": len(golds) / inproc_s,
        "grading.pool_over_inprocess": inproc_s / pool_s,
        "grading.pool_inprocess_agreement": agree,
        "grading.hostile_worst_s": max(hostile_times),
    }
