"""What the pipeline evaluates and where every result lives, and how results are read back.

- :data:`SYSTEMS`: the evaluated systems (table-1 columns) and the models each runs;
  :func:`systems_for_methods` picks them for a config's ``methods``.
- :class:`Layout`: every path under ``out_dir`` and ``figures/``; the Snakefile and ``agon
  report`` both build their paths here, so they cannot disagree.
- Readers: ``samples.jsonl`` recounts (:func:`problem_counts`), ``metrics.jsonl`` keys
  (:data:`METRIC_KEYS`), compute numbers from summaries and Snakemake benchmark files.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

# ----------------------------------------------------------------------------- systems


@dataclass(frozen=True)
class System:
    """One evaluated system: a table-1 column (or half of one) and the models it runs.

    ``train`` names the training run its models come from (None: the untrained bases);
    ``model`` is set for a single-model system, ``drafter``/``reader`` for a cascade
    ("A" or "B": which of the run's two models plays the part).
    """

    name: str
    method: str
    train: str | None = None
    model: str | None = None
    drafter: str | None = None
    reader: str | None = None
    cli_system: str | None = None

    @property
    def eval_system(self) -> str:
        """The `agon eval --system` value."""
        return self.cli_system or self.name


# Ordered as the table's columns. Single-model columns show model A under the method's name
# and model B as `<name>_b` (the same `agon eval` system run on the other model), so each
# trainer's effect on each model reads against that model's own base (the gains section).
SYSTEMS: dict[str, System] = {
    s.name: s
    for s in (
        System("base", "base", model=None),
        System("base_b", "base", model="B", cli_system="base"),
        System("base_cascade", "base_cascade"),
        System("moa", "moa"),
        System("grpo", "grpo", train="grpo", model="A"),
        System("grpo_b", "grpo", train="grpo", model="B", cli_system="grpo"),
        System("grpo_cascade", "grpo_cascade", train="grpo", drafter="A", reader="B"),
        System("agon", "agon", train="agon", drafter="A", reader="B"),
        System("agon_rev", "agon_rev", train="agon", drafter="B", reader="A"),
        System("agon_single", "agon_single", train="agon", model="A"),
        System("agon_single_b", "agon_single", train="agon", model="B", cli_system="agon_single"),
    )
}

TRAIN_METHODS = ("grpo", "agon")


def systems_for_methods(methods: Iterable[str]) -> list[str]:
    """The systems evaluated for the config's ``methods`` (table-1 columns), in table order."""
    wanted = set(methods)
    unknown = wanted - {s.method for s in SYSTEMS.values()}
    if unknown:
        raise ValueError(
            f"methods: unknown {sorted(unknown)}; known: {sorted({s.method for s in SYSTEMS.values()})}"
        )
    return [name for name, s in SYSTEMS.items() if s.method in wanted]


# ----------------------------------------------------------------------------- layout

FIGURES = ("pass1_by_system", "training_curves", "duel_dynamics")
FIGURE_FORMATS = ("png", "pdf")


@dataclass(frozen=True)
class Layout:
    """Where every result lives; the Snakefile and this report both build paths here."""

    out_dir: str = "results"
    figures_dir: str = "figures"

    def toy_dir(self) -> str:
        """`agon toy pretrain --out`: holds A/, B/ and report.json."""
        return f"{self.out_dir}/toy/models"

    def toy_model(self, which: str) -> str:
        return f"{self.toy_dir()}/{which}"

    def toy_report(self) -> str:
        return f"{self.toy_dir()}/report.json"

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

    def log(self, name: str) -> str:
        return f"{self.out_dir}/logs/{name}.log"

    def benchmark(self, name: str) -> str:
        return f"{self.out_dir}/benchmarks/{name}.tsv"

    def table_csv(self) -> str:
        return f"{self.out_dir}/table1.csv"

    def table_md(self) -> str:
        return f"{self.out_dir}/table1.md"

    def table_provenance(self) -> str:
        return f"{self.out_dir}/table1.provenance.json"

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

# metrics.jsonl keys the figures read (one JSON object per training step). `{model}` is
# "A" or "B". Hard-split pass@1 appears only on the steps where the trainer evaluated; on row
# `step` it scores the model after `step` updates, before that step's rollout (agon.train_eval).
METRIC_KEYS = {
    "step": "step",
    "tokens": "tokens_generated",  # generated this step (summed over both models)
    "tokens_total": "tokens_generated_total",  # cumulative; preferred when present
    "hard_pass1": ("eval/hard_pass@1/{model}", "hard_pass@1/{model}"),
    # fallback when a trainer logs no hard-split evaluations: the model's correctness on its
    # own training drafts (both trainers log it every step); the figure labels it as such
    "train_correct": "{model}/drafter/correct",
    "win_rate": "duel/win_rate/{model}",
    # else per duel direction, fractions of (draft, read) pairs: "A->B/duel/drafter_wins" etc.
    "direction": r"^(?P<drafter>[^/]+)->(?P<reader>[^/]+)/duel/(?P<outcome>drafter_wins|reader_wins|ties)$",
}
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


def cumulative_tokens(rows: list[dict]) -> list[float]:
    """Tokens generated up to each metrics row (the trainer's running total when it logs one)."""
    if rows and all(METRIC_KEYS["tokens_total"] in r for r in rows):
        return [float(r[METRIC_KEYS["tokens_total"]]) for r in rows]
    total, out = 0.0, []
    for r in rows:
        total += float(r.get(METRIC_KEYS["tokens"], 0) or 0)
        out.append(total)
    return out
