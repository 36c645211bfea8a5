"""Where every result lives, and how results are read back.

- :class:`Layout`: every path under ``out_dir`` and ``figures/``; the Snakefile and ``agon
  report`` both build their paths here, so they cannot disagree.
- Readers: ``samples.jsonl`` recounts (:func:`problem_counts`), compute numbers from
  summaries and Snakemake benchmark files. The keys of ``metrics.jsonl`` are
  :mod:`agon.training.metrics`; table 1's columns are :mod:`agon.methods`.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

# ----------------------------------------------------------------------------- layout

FIGURES = ("pass1_by_system", "training_curves", "duel_dynamics")
FIGURE_FORMATS = ("png", "pdf")


@dataclass(frozen=True)
class TableFiles:
    """The files of one table: the CSV, its Markdown rendering, its provenance sidecar."""

    csv: str
    md: str
    provenance: str


@dataclass(frozen=True)
class Layout:
    """Where every result lives; the Snakefile and this report both build paths here."""

    out_dir: str = "results"
    figures_dir: str = "figures"

    def toy_dir(self, seed: int | str) -> str:
        """`agon toy pretrain --out`: the base models of training seed ``seed`` (A/, B/,
        report.json): every training seed has base models of its own, pretrained with its own
        seed, so the table's intervals over seeds cover the base models' draw."""
        return f"{self.out_dir}/toy/models/seed{seed}"

    def toy_model(self, which: str, seed: int | str = "{seed}") -> str:
        """A toy model's folder (the default, ``seed{seed}``, is the family row's path)."""
        return f"{self.toy_dir(seed)}/{which}"

    def toy_report(self, seed: int | str) -> str:
        return f"{self.toy_dir(seed)}/report.json"

    def toy_teacher_report(self, seed: int | str) -> str:
        """`agon toy pretrain --model teacher`: the toy teacher's gate, beside the pair's."""
        return f"{self.toy_dir(seed)}/teacher_report.json"

    def pretrain_snapshot(self) -> str:
        return f"{self.out_dir}/toy/config/pretrain.yaml"

    def snapshot(self, family: str, task: str, stage: str) -> str:
        return f"{self.out_dir}/{family}/{task}/config/{stage}.yaml"

    def split(self, family: str, task: str) -> str:
        return f"{self.out_dir}/{family}/{task}/data/split.json"

    def train_dir(self, family: str, task: str, method: str, seed: int | str) -> str:
        return f"{self.out_dir}/{family}/{task}/train/{method}/seed{seed}"

    def train_summary(self, family: str, task: str, method: str, seed: int | str) -> str:
        return f"{self.train_dir(family, task, method, seed)}/summary.json"

    def train_model(self, family: str, task: str, method: str, seed: int | str, which: str) -> str:
        return f"{self.train_dir(family, task, method, seed)}/{which}"

    def train_metrics(self, family: str, task: str, method: str, seed: int | str) -> str:
        return f"{self.train_dir(family, task, method, seed)}/metrics.jsonl"

    def eval_dir(self, family: str, task: str, system: str, seed: int | str) -> str:
        return f"{self.out_dir}/{family}/{task}/eval/{system}/seed{seed}"

    def eval_summary(self, family: str, task: str, system: str, seed: int | str) -> str:
        return f"{self.eval_dir(family, task, system, seed)}/summary.json"

    def eval_samples(self, family: str, task: str, system: str, seed: int | str) -> str:
        return f"{self.eval_dir(family, task, system, seed)}/samples.jsonl"

    # ablations (results/ablations.csv): one duel variant per folder, trained and evaluated
    def ablation_snapshot(self, family: str, task: str, variant: str) -> str:
        """The config a variant's training runs with (its agon changes applied); its evaluation
        reads table 1's eval snapshot (evaluation reads no agon key)."""
        return f"{self.out_dir}/{family}/{task}/config/ablation/{variant}.yaml"

    def ablation_train_dir(self, family: str, task: str, variant: str, seed: int | str) -> str:
        return f"{self.out_dir}/{family}/{task}/ablations/{variant}/train/seed{seed}"

    def ablation_train_model(
        self, family: str, task: str, variant: str, seed: int | str, which: str
    ) -> str:
        return f"{self.ablation_train_dir(family, task, variant, seed)}/{which}"

    def ablation_train_summary(self, family: str, task: str, variant: str, seed: int | str) -> str:
        return f"{self.ablation_train_dir(family, task, variant, seed)}/summary.json"

    def ablation_eval_dir(self, family: str, task: str, variant: str, seed: int | str) -> str:
        return f"{self.out_dir}/{family}/{task}/ablations/{variant}/eval/seed{seed}"

    def ablation_eval_summary(self, family: str, task: str, variant: str, seed: int | str) -> str:
        return f"{self.ablation_eval_dir(family, task, variant, seed)}/summary.json"

    def ablation_eval_samples(self, family: str, task: str, variant: str, seed: int | str) -> str:
        return f"{self.ablation_eval_dir(family, task, variant, seed)}/samples.jsonl"

    # results/budget.csv (agon.budget_curve): table 1's trained systems at a multiple of its
    # training budget; scale 1 is table 1's own runs and evaluations, every other scale has its
    # own folders
    def budget_snapshot(self, family: str, task: str, scale: int | str) -> str:
        return f"{self.out_dir}/{family}/{task}/config/budget/x{scale}.yaml"

    def budget_train_dir(
        self, family: str, task: str, scale: int | str, method: str, seed: int | str
    ) -> str:
        return self._budget_dir("train", family, task, scale, method, seed)

    def _budget_dir(
        self, kind: str, family: str, task: str, scale: int | str, name: str, seed: int | str
    ) -> str:
        """A budget run's (``kind`` train) or evaluation's (eval) folder: table 1's at scale 1."""
        if str(scale) == "1":
            table1 = self.train_dir if kind == "train" else self.eval_dir
            return table1(family, task, name, seed)
        return f"{self.out_dir}/{family}/{task}/budget/x{scale}/{kind}/{name}/seed{seed}"

    def budget_train_summary(
        self, family: str, task: str, scale: int | str, method: str, seed: int | str
    ) -> str:
        return f"{self.budget_train_dir(family, task, scale, method, seed)}/summary.json"

    def budget_eval_dir(
        self, family: str, task: str, scale: int | str, system: str, seed: int | str
    ) -> str:
        return self._budget_dir("eval", family, task, scale, system, seed)

    def budget_eval_summary(
        self, family: str, task: str, scale: int | str, system: str, seed: int | str
    ) -> str:
        return f"{self.budget_eval_dir(family, task, scale, system, seed)}/summary.json"

    def budget_eval_samples(
        self, family: str, task: str, scale: int | str, system: str, seed: int | str
    ) -> str:
        return f"{self.budget_eval_dir(family, task, scale, system, seed)}/samples.jsonl"

    def budget_figures(self) -> list[str]:
        return [f"{self.figures_dir}/budget.{ext}" for ext in FIGURE_FORMATS]

    # results/regime.csv: table 1's baselines on the regime's split, GRPO at a budget fixed up
    # front (agon.regime), each in a folder of its own beside table 1's runs and evaluations
    def regime_train_dir(self, family: str, task: str, method: str, seed: int | str) -> str:
        return f"{self.out_dir}/{family}/{task}/regime/train/{method}/seed{seed}"

    def regime_train_summary(self, family: str, task: str, method: str, seed: int | str) -> str:
        return f"{self.regime_train_dir(family, task, method, seed)}/summary.json"

    def regime_eval_dir(self, family: str, task: str, system: str, seed: int | str) -> str:
        return f"{self.out_dir}/{family}/{task}/regime/eval/{system}/seed{seed}"

    def regime_eval_summary(self, family: str, task: str, system: str, seed: int | str) -> str:
        return f"{self.regime_eval_dir(family, task, system, seed)}/summary.json"

    def regime_eval_samples(self, family: str, task: str, system: str, seed: int | str) -> str:
        return f"{self.regime_eval_dir(family, task, system, seed)}/samples.jsonl"

    def table_files(self, name: str) -> TableFiles:
        """A table's files: ``{out_dir}/{name}.csv``, its Markdown, its provenance sidecar
        (``table1``; ``related``: the methods published beside Agon; ``ablations``;
        ``regime``: table 1's baselines against the regime's criteria)."""
        stem = f"{self.out_dir}/{name}"
        return TableFiles(f"{stem}.csv", f"{stem}.md", f"{stem}.provenance.json")

    # results/control*.csv: the positive control (the control section), one folder per arm
    # (``drafter``: arm 1 and its pilot; ``curriculum``: arm 2). A stage is ``base`` (the
    # untrained pair), a scheme, or ``lr{i}`` (the pilot's independent at its i-th rate).
    def control_dir(self, arm: str) -> str:
        return f"{self.out_dir}/control/{arm}"

    def control_models(self, arm: str) -> str:
        """`agon toy pretrain --out` of an arm's world: A/, B/, report.json."""
        return f"{self.control_dir(arm)}/models"

    def control_snapshot(self, arm: str, stage: str) -> str:
        """An arm's config: ``pretrain``, ``eval`` or a training stage's (its runs)."""
        return f"{self.control_dir(arm)}/config/{stage}.yaml"

    def control_train_dir(self, arm: str, stage: str, seed: int | str) -> str:
        return f"{self.control_dir(arm)}/train/{stage}/seed{seed}"

    def control_train_summary(self, arm: str, stage: str, seed: int | str) -> str:
        return f"{self.control_train_dir(arm, stage, seed)}/summary.json"

    def control_eval_dir(self, arm: str, stage: str, measure: str, seed: int | str) -> str:
        """A control measure of a stage's pair (``cascade_AB``: A drafts, B reads;
        ``robust_AB``: that direction's reader, B, on the fixed hidden-error drafts)."""
        return f"{self.control_dir(arm)}/eval/{stage}/{measure}/seed{seed}"

    def control_eval_summary(self, arm: str, stage: str, measure: str, seed: int | str) -> str:
        return f"{self.control_eval_dir(arm, stage, measure, seed)}/summary.json"

    def control_eval_samples(self, arm: str, stage: str, measure: str, seed: int | str) -> str:
        return f"{self.control_eval_dir(arm, stage, measure, seed)}/samples.jsonl"

    def related_figures(self) -> list[str]:
        return [f"{self.figures_dir}/related_compute.{ext}" for ext in FIGURE_FORMATS]

    def log(self, name: str) -> str:
        return f"{self.out_dir}/logs/{name}.log"

    def benchmark(self, name: str) -> str:
        return f"{self.out_dir}/benchmarks/{name}.tsv"

    def figure_names(self, train_methods: Sequence[str]) -> list[str]:
        """Figures the report draws: curves need a trained method, duels need Agon."""
        names = ["pass1_by_system"]
        if train_methods:
            names.append("training_curves")
        if "agon" in train_methods:
            names.append("duel_dynamics")
        return names

    def figures(self, train_methods: Sequence[str]) -> list[str]:
        return [
            f"{self.figures_dir}/{n}.{ext}"
            for n in self.figure_names(train_methods)
            for ext in FIGURE_FORMATS
        ]


# ----------------------------------------------------------------------------- reading results

# summary.json keys for compute, looked up at the top level and under "compute"
TOKEN_KEYS = ("tokens_generated", "total_generated_tokens")
WALL_KEYS = ("wall_s", "session_wall_s")


def read_jsonl(path: str | Path) -> list[dict]:
    """Rows of a JSONL file; a torn last line (a killed writer) is skipped, not fatal."""
    rows = []
    with open(path) as f:
        lines = f.read().splitlines()
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            if i == len(lines) - 1:
                continue
            raise ValueError(f"{path}: line {i + 1} is not JSON") from None
    return rows


def summary_number(d: dict, keys: Sequence[str]) -> float | None:
    """The first of ``keys`` found in ``d`` or ``d['compute']`` as a float, else None."""
    for scope in (d, d.get("compute") if isinstance(d.get("compute"), dict) else {}):
        for k in keys:
            v = scope.get(k)
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                return float(v)
    return None


def benchmark_seconds(path: str | Path) -> float | None:
    """Wall seconds from a Snakemake ``benchmark:`` TSV (column ``s``), if the file exists."""
    p = Path(path)
    if not p.is_file():
        return None
    with open(p) as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    secs = [float(r["s"]) for r in rows if r.get("s") not in (None, "", "NA")]
    return sum(secs) / len(secs) if secs else None


def _sample_problem_and_correct(row: dict) -> tuple[str, bool] | None:
    """(problem id, correct) of one samples.jsonl line, or None if it lacks either."""
    pid = row.get("problem_id", row.get("id"))
    correct = (
        row["correct"] if "correct" in row else (row.get("verdict") or {}).get("correct", "missing")
    )
    if pid is None or correct == "missing":
        return None
    return str(pid), correct is True  # None (unscorable) counts as a failure


def problem_counts(sample_files: Sequence[str | Path]) -> dict[str, tuple[int, int]] | None:
    """Per problem (n samples, n correct) pooled over ``sample_files``; None if unparseable."""
    counts: dict[str, list[int]] = {}
    for path in sample_files:
        for row in read_jsonl(path):
            parsed = _sample_problem_and_correct(row)
            if parsed is None:
                return None
            pid, ok = parsed
            c = counts.setdefault(pid, [0, 0])
            c[0] += 1
            c[1] += int(ok)
    return {pid: (n, c) for pid, (n, c) in counts.items()} if counts else None
