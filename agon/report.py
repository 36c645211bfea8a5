"""`agon report`: table 1 and the paper figures, from the evaluation and training results.

Table 1 (DESIGN.md §2) has one row per (family, task). For every evaluated system it gives
pass@1 with its standard error and 95% bootstrap interval, the headline ratios
``agon / grpo`` and ``(agon - base) / (moa - base)`` (each with a paired bootstrap interval:
the same problems resampled for both systems), and per method the compute it used: tokens
generated and wall hours.

Where the numbers come from:

- pass@1 is recounted from each evaluation's ``samples.jsonl`` (one line per sample with its
  problem id and verdict), pooling the samples of all seeds per problem, then
  :func:`agon.stats.summarize` (mean over problems, bootstrap over problems). An unscorable
  sample (``correct: null``: timeout, sandbox error) counts as a failure, as in the paper's
  pass@1. If a ``samples.jsonl`` does not carry problem ids and verdicts, the system falls
  back to its ``summary.json`` numbers (mean over seeds) and the row says so
  (``{system}_source = summary``).
- compute: tokens generated are read from each run's ``summary.json``; wall time from the
  Snakemake benchmark file of the job when there is one (the job's true elapsed time,
  process start-up included), else from the summary.
- figures: training curves and duel dynamics are read from the trainers' ``metrics.jsonl``
  (keys in :data:`METRIC_KEYS`).

Everything is written atomically; the CSV gets a sidecar ``.provenance.json``, the Markdown
and figures carry the same config hash.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import math
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
        raise ValueError(f"methods: unknown {sorted(unknown)}; known: {sorted({s.method for s in SYSTEMS.values()})}")
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
        return [f"{self.figures_dir}/{n}.{ext}" for n in self.figure_names(train_methods) for ext in FIGURE_FORMATS]


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


def _number(d: dict, keys: Sequence[str]) -> float | None:
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
    correct = row["correct"] if "correct" in row else (row.get("verdict") or {}).get("correct", "missing")
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


# ----------------------------------------------------------------------------- table 1


def _ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or b == 0 or any(map(math.isnan, (a, b))):
        return None
    return a / b


def _paired_means(series: Sequence[dict[str, float]], n_boot: int, seed: int) -> list | None:
    """Bootstrap means of each per-problem series over the problems they all share, every
    series resampled with the same draw (paired); None with fewer than two shared problems."""
    import numpy as np

    ids = sorted(set.intersection(*(set(s) for s in series)))
    if len(ids) < 2:
        return None
    idx = np.random.default_rng(seed).integers(0, len(ids), size=(n_boot, len(ids)))
    return [np.array([s[i] for i in ids])[idx].mean(1) for s in series]


def paired_ratio_ci(num: dict[str, float], den: dict[str, float], base: dict[str, float] | None,
                    n_boot: int, seed: int) -> tuple[float | None, float | None]:
    """95% bootstrap interval of mean(num)/mean(den) (or of the gains over ``base``),
    resampling the problems the systems share, the same draw for all of them."""
    import numpy as np

    means = _paired_means([num, den] if base is None else [num, den, base], n_boot, seed)
    if means is None:
        return None, None
    z = means[2] if base is not None else 0.0
    top, bottom = means[0] - z, means[1] - z
    b_lo, b_hi = np.quantile(bottom, [0.025, 0.975])
    if b_lo <= 0 <= b_hi:
        # the denominator's own interval holds 0 (e.g. MoA no better than base): the ratio
        # is unbounded at 95%, which is what the table should say rather than a fake interval
        return -math.inf, math.inf
    with np.errstate(divide="ignore", invalid="ignore"):  # a rare resample at exactly 0: +-inf, in the tails
        lo, hi = np.quantile(top / bottom, [0.025, 0.975])
    return float(lo), float(hi)


def paired_gain_ci(num: dict[str, float], base: dict[str, float], n_boot: int, seed: int) -> tuple[float | None, float | None]:
    """95% bootstrap interval of mean(num) - mean(base), paired over the problems both share
    (the gain of a trained model over its own base)."""
    import numpy as np

    means = _paired_means([num, base], n_boot, seed)
    if means is None:
        return None, None
    lo, hi = np.quantile(means[0] - means[1], [0.025, 0.975])
    return float(lo), float(hi)


# each model alone, trained by each method, against that model's base: (model, base, trained systems)
GAINS = (("A", "base", ("grpo", "agon_single")), ("B", "base_b", ("grpo_b", "agon_single_b")))


def system_stats(layout: Layout, family: str, task: str, system: str, seeds: Sequence[int],
                 n_boot: int) -> tuple[dict, dict[str, float] | None]:
    """pass@1 (with se, interval) of one system, and its per-problem pass@1 for paired ratios."""
    from agon.stats import summarize

    samples = [layout.eval_samples(family, task, system, s) for s in seeds]
    counts = problem_counts(samples) if all(Path(p).is_file() for p in samples) else None
    if counts is not None:
        ids = sorted(counts)
        stats = summarize([counts[i] for i in ids], ks=(1,), n_boot=n_boot, seed=0)
        per_problem = {i: counts[i][1] / counts[i][0] for i in ids}
        return {**stats, "source": "samples"}, per_problem
    summaries = [json.loads(Path(layout.eval_summary(family, task, system, s)).read_text()) for s in seeds]
    keys = ("pass@1", "pass@1_se", "pass@1_lo", "pass@1_hi")
    missing = [k for k in keys if any(k not in s for s in summaries)]
    if missing:
        raise ValueError(f"{family}/{task}/{system}: summary.json lacks {missing} and samples.jsonl has no problem ids/verdicts")
    stats = {k: sum(s[k] for s in summaries) / len(summaries) for k in keys}
    stats["n_problems"] = summaries[0].get("n_problems")
    return {**stats, "source": "summary"}, None


def compute_used(layout: Layout, family: str, task: str, system: str, seeds: Sequence[int]) -> dict:
    """Mean per seed of eval tokens and wall hours of ``system``, and of its training run."""
    out: dict[str, float | None] = {}

    def mean(values: list[float | None]) -> float | None:
        vals = [v for v in values if v is not None]
        return sum(vals) / len(vals) if len(vals) == len(values) and vals else None

    ev = [json.loads(Path(layout.eval_summary(family, task, system, s)).read_text()) for s in seeds]
    out["eval_tokens"] = mean([_number(e, TOKEN_KEYS) for e in ev])
    wall = [benchmark_seconds(layout.benchmark(f"eval/{family}/{task}/{system}/seed{s}")) or _number(e, WALL_KEYS)
            for s, e in zip(seeds, ev)]
    w = mean(wall)
    out["eval_wall_h"] = w / 3600 if w is not None else None
    return out


def train_compute(layout: Layout, family: str, task: str, method: str, seeds: Sequence[int]) -> dict:
    """Mean per seed of the training run's generated tokens and wall hours."""
    toks, walls = [], []
    for s in seeds:
        summary = json.loads(Path(layout.train_summary(family, task, method, s)).read_text())
        t = _number(summary, TOKEN_KEYS)
        if t is None:
            rows = read_jsonl(layout.train_metrics(family, task, method, s))
            t = _cumulative_tokens(rows)[-1] if rows else None
        toks.append(t)
        walls.append(benchmark_seconds(layout.benchmark(f"train/{family}/{task}/{method}/seed{s}")) or _number(summary, WALL_KEYS))
    mean = lambda v: sum(v) / len(v) if v and all(x is not None for x in v) else None  # noqa: E731
    w = mean(walls)
    return {"train_tokens": mean(toks), "train_wall_h": w / 3600 if w is not None else None}


def build_table(config: dict, layout: Layout) -> list[dict]:
    """Table 1: one dict per (family, task) with every column (see the module docstring)."""
    systems = systems_for_methods(config["methods"])
    seeds = [int(s) for s in config["seeds"]]
    n_boot = int(config["eval"]["bootstrap"])
    trained = [m for m in TRAIN_METHODS if any(SYSTEMS[s].train == m for s in systems)]
    rows = []
    for fam in config["families"]:
        for task in config["tasks"]:
            f, t = fam["name"], task["name"]
            row: dict[str, Any] = {"family": f, "task": t, "split": config["eval"]["split"], "seeds": len(seeds)}
            per_problem: dict[str, dict[str, float] | None] = {}
            for s in systems:
                stats, per_problem[s] = system_stats(layout, f, t, s, seeds, n_boot)
                row["n_problems"] = stats.get("n_problems")
                for key in ("pass@1", "pass@1_se", "pass@1_lo", "pass@1_hi"):
                    row[f"{s}_{key}"] = stats[key]
                row[f"{s}_source"] = stats["source"]
            p = {s: row[f"{s}_pass@1"] for s in systems}
            if "agon" in p and "grpo" in p:
                row["agon_over_grpo"] = _ratio(p["agon"], p["grpo"])
                lo, hi = (paired_ratio_ci(per_problem["agon"], per_problem["grpo"], None, n_boot, 1)
                          if per_problem["agon"] and per_problem["grpo"] else (None, None))
                row["agon_over_grpo_lo"], row["agon_over_grpo_hi"] = lo, hi
            if {"agon", "moa", "base"} <= set(p):
                row["agon_gain_over_moa_gain"] = _ratio(p["agon"] - p["base"], p["moa"] - p["base"])
                lo, hi = (paired_ratio_ci(per_problem["agon"], per_problem["moa"], per_problem["base"], n_boot, 2)
                          if all(per_problem[s] for s in ("agon", "moa", "base")) else (None, None))
                row["agon_gain_over_moa_gain_lo"], row["agon_gain_over_moa_gain_hi"] = lo, hi
            for _, base, trained_systems in GAINS:
                for s in (x for x in trained_systems if x in p and base in p):
                    row[f"{s}_gain"] = p[s] - p[base]
                    lo, hi = (paired_gain_ci(per_problem[s], per_problem[base], n_boot, 3)
                              if per_problem[s] and per_problem[base] else (None, None))
                    row[f"{s}_gain_lo"], row[f"{s}_gain_hi"] = lo, hi
            for m in trained:
                for k, v in train_compute(layout, f, t, m, seeds).items():
                    row[f"{m}_{k}"] = v
            for s in systems:
                for k, v in compute_used(layout, f, t, s, seeds).items():
                    row[f"{s}_{k}"] = v
            rows.append(row)
    return rows


def _fmt(v: Any) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    if isinstance(v, float):
        return f"{v:.12g}"  # full precision in the CSV; the Markdown rounds for reading
    return str(v)


def _short(v: Any) -> str:
    """A number for reading (3 significant digits); the CSV keeps full precision."""
    return f"{v:.3g}" if isinstance(v, float) and math.isfinite(v) else _fmt(v)


def table_csv(rows: list[dict]) -> str:
    """The rows as CSV text (columns in first-seen order; empty cell = not defined)."""
    cols: list[str] = []
    for r in rows:
        cols += [k for k in r if k not in cols]
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=cols, lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: _fmt(r.get(k)) for k in cols})
    return buf.getvalue()


def table_markdown(rows: list[dict], systems: Sequence[str], config_hash_: str) -> str:
    """A readable rendering: pass@1 [95% CI] per system, the ratios, then compute."""
    def pct(r: dict, s: str) -> str:
        v, lo, hi = r.get(f"{s}_pass@1"), r.get(f"{s}_pass@1_lo"), r.get(f"{s}_pass@1_hi")
        return "" if v is None else f"{100 * v:.1f} [{100 * lo:.1f}, {100 * hi:.1f}]"

    def ratio(r: dict, k: str) -> str:
        v = r.get(k)
        if v is None:
            return "n/a"
        lo, hi = r.get(f"{k}_lo"), r.get(f"{k}_hi")
        if lo is not None and math.isinf(lo):
            return f"{v:.2f} [unbounded: denominator's interval holds 0]"
        return f"{v:.2f}" + (f" [{lo:.2f}, {hi:.2f}]" if lo is not None else "")

    lines = ["# Table 1: pass@1 (%) [95% bootstrap interval over problems]", ""]
    head = ["family", "task", *systems, "agon / grpo", "(agon-base) / (moa-base)"]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [r["family"], r["task"], *(pct(r, s) for s in systems),
                 ratio(r, "agon_over_grpo"), ratio(r, "agon_gain_over_moa_gain")]
        lines.append("| " + " | ".join(cells) + " |")
    gain_rows = [(r, model, base, ts) for r in rows for model, base, ts in GAINS if r.get(f"{base}_pass@1") is not None]
    if gain_rows:
        lines += ["", "## Each model alone: trained vs. its own base (pass@1 %, gain in points [paired 95% interval])", "",
                  "| family | task | model | base | grpo | agon (alone) |", "|---|---|---|---|---|---|"]
        for r, model, base, ts in gain_rows:
            cells = [r["family"], r["task"], model, pct(r, base)]
            for s in ts:
                g, lo, hi = r.get(f"{s}_gain"), r.get(f"{s}_gain_lo"), r.get(f"{s}_gain_hi")
                gain = "" if g is None else f"; {100 * g:+.1f}" + (f" [{100 * lo:+.1f}, {100 * hi:+.1f}]" if lo is not None else "")
                cells.append(f"{100 * r[f'{s}_pass@1']:.1f}{gain}" if r.get(f"{s}_pass@1") is not None else "")
            lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "## Compute (mean per seed)", "",
              "| family | task | system | eval tokens | eval wall h | train tokens | train wall h |",
              "|---|---|---|---|---|---|---|"]
    for r in rows:
        for s in systems:
            m = SYSTEMS[s].train
            tt, tw = (r.get(f"{m}_train_tokens"), r.get(f"{m}_train_wall_h")) if m else (0, 0)
            cells = [r["family"], r["task"], s, *(_short(v) for v in (r.get(f"{s}_eval_tokens"), r.get(f"{s}_eval_wall_h"), tt, tw))]
            lines.append("| " + " | ".join(cells) + " |")
    n = rows[0].get("n_problems") if rows else None
    lines += ["", f"Split: {rows[0]['split'] if rows else ''}; problems per row: {n}; seeds: {rows[0]['seeds'] if rows else ''}; "
              f"config hash: {config_hash_}. Trained systems' train columns are those of their training run "
              "(grpo_b and grpo_cascade share grpo's; agon_rev and agon_single(_b) share agon's).", ""]
    return "\n".join(lines)


# ----------------------------------------------------------------------------- figures

PAPER_WIDTH_IN = 6.75  # full text width of a two-column paper
FONT_PT = 8  # matches a paper's caption size, so the figure reads at 100%
DPI = 200
COLORS = {"base": "#9e9e9e", "base_b": "#d0d0d0", "base_cascade": "#bdbdbd", "moa": "#8d6e63", "grpo": "#1f77b4", "grpo_b": "#9ecae1",
          "grpo_cascade": "#6baed6",
          "agon": "#d62728", "agon_rev": "#ff7f0e", "agon_single": "#e377c2", "agon_single_b": "#f7b6d2"}


def _style():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"font.size": FONT_PT, "axes.titlesize": FONT_PT + 1, "axes.labelsize": FONT_PT,
                         "legend.fontsize": FONT_PT - 1, "xtick.labelsize": FONT_PT - 1, "ytick.labelsize": FONT_PT - 1,
                         "pdf.fonttype": 42, "svg.hashsalt": "agon", "axes.spines.top": False, "axes.spines.right": False})
    return plt


def _save(fig, figures_dir: str | Path, name: str, meta: dict) -> list[Path]:
    """Write ``name``.png and .pdf atomically (temp file + rename), with metadata."""
    out = []
    Path(figures_dir).mkdir(parents=True, exist_ok=True)
    for ext in FIGURE_FORMATS:
        path = Path(figures_dir) / f"{name}.{ext}"
        tmp = path.with_name(f".{path.name}.tmp")
        md = {"Title": name, "Subject": json.dumps(meta)} if ext == "pdf" else {"Title": name, "Description": json.dumps(meta)}
        fig.savefig(tmp, format=ext, dpi=DPI, bbox_inches="tight", metadata=md)
        os.replace(tmp, path)
        out.append(path)
    return out


def _grid(plt, n: int, ncols: int, height: float):
    nrows = max(1, math.ceil(n / ncols))
    fig, axes = plt.subplots(nrows, ncols, figsize=(PAPER_WIDTH_IN, height * nrows), squeeze=False)
    return fig, axes


def plot_pass1(rows: list[dict], systems: Sequence[str], figures_dir: str | Path, meta: dict) -> list[Path]:
    """Bars of pass@1 per system with 95% interval error bars, one panel per (family, task)."""
    plt = _style()
    ncols = min(2, len(rows))
    fig, axes = _grid(plt, len(rows), ncols, 2.4)
    for ax, r in zip(axes.flat, rows):
        vals = [100 * r[f"{s}_pass@1"] for s in systems]
        err = [[100 * (r[f"{s}_pass@1"] - r[f"{s}_pass@1_lo"]) for s in systems],
               [100 * (r[f"{s}_pass@1_hi"] - r[f"{s}_pass@1"]) for s in systems]]
        ax.bar(range(len(systems)), vals, yerr=err, capsize=2, color=[COLORS.get(s, "#555") for s in systems],
               error_kw={"elinewidth": 0.8})
        # the value above each error bar: readable even when a bar is too short to see (e.g. 0)
        for x, (v, up) in enumerate(zip(vals, err[1])):
            ax.text(x, v + up + 1.5, f"{v:.1f}", ha="center", va="bottom", fontsize=FONT_PT - 2)
        ax.set_xticks(range(len(systems)), systems, rotation=40, ha="right")
        ax.set_ylabel(f"pass@1 on {r['split']} (%)")
        ax.set_ylim(0, 100)
        ax.set_title(f"{r['family']} / {r['task']}")
        ax.grid(axis="y", lw=0.3, alpha=0.6)
    for ax in list(axes.flat)[len(rows):]:
        ax.axis("off")
    fig.tight_layout()
    paths = _save(fig, figures_dir, "pass1_by_system", meta)
    plt.close(fig)
    return paths


def _cumulative_tokens(rows: list[dict]) -> list[float]:
    if rows and all(METRIC_KEYS["tokens_total"] in r for r in rows):
        return [float(r[METRIC_KEYS["tokens_total"]]) for r in rows]
    total, out = 0.0, []
    for r in rows:
        total += float(r.get(METRIC_KEYS["tokens"], 0) or 0)
        out.append(total)
    return out


def hard_curve(rows: list[dict], model: str) -> tuple[list[float], list[float], list[float]]:
    """(steps, cumulative tokens, hard-split pass@1) at the steps the trainer evaluated.

    An evaluation on row ``s`` was taken before that step's rollout (:mod:`agon.train_eval`),
    so its tokens are those generated by the rows before it: 0 for the base model."""
    toks = [0.0, *_cumulative_tokens(rows)[:-1]]
    steps, xs, ys = [], [], []
    for r, tok in zip(rows, toks):
        for tmpl in METRIC_KEYS["hard_pass1"]:
            v = r.get(tmpl.format(model=model))
            if isinstance(v, (int, float)):
                steps.append(float(r.get(METRIC_KEYS["step"], len(steps))))
                xs.append(tok)
                ys.append(float(v))
                break
    return steps, xs, ys


def train_curve(rows: list[dict], model: str, smooth: int) -> tuple[list[float], list[float], list[float]]:
    """(steps, cumulative tokens, smoothed training-draft correctness) of ``model``."""
    toks = _cumulative_tokens(rows)
    key = METRIC_KEYS["train_correct"].format(model=model)
    pts = [(float(r.get(METRIC_KEYS["step"], i)), tok, float(r[key])) for i, (r, tok) in enumerate(zip(rows, toks))
           if isinstance(r.get(key), (int, float)) and not math.isnan(r[key])]
    return [p[0] for p in pts], [p[1] for p in pts], _smooth([p[2] for p in pts], smooth)


def win_rates(rows: list[dict], model: str) -> tuple[list[float], list[float]]:
    """(steps, win rate of ``model``) per step: the share of its duels it won that step.

    Read from ``duel/win_rate/{model}``, else from the per-direction outcomes
    (``A->B/duel/drafter_wins``: the share of A's drafts that beat B's reads of them), averaged
    over the directions ``model`` took part in that step. Ties count as no one's win;
    ``model="ties"`` gives the tie rate instead. NaN (no graded pair) is skipped."""
    pattern = re.compile(METRIC_KEYS["direction"])
    steps, rates = [], []
    for i, r in enumerate(rows):
        step = float(r.get(METRIC_KEYS["step"], i))
        direct = r.get(METRIC_KEYS["win_rate"].format(model=model))
        if isinstance(direct, (int, float)) and not math.isnan(direct):
            steps.append(step)
            rates.append(float(direct))
            continue
        won = []
        for key, v in r.items():
            m = pattern.match(key)
            if not m or not isinstance(v, (int, float)) or math.isnan(v):
                continue
            if model == "ties" and m["outcome"] == "ties":
                won.append(float(v))
            elif (m["outcome"] == "drafter_wins" and m["drafter"] == model) or (m["outcome"] == "reader_wins" and m["reader"] == model):
                won.append(float(v))
        if won:
            steps.append(step)
            rates.append(sum(won) / len(won))
    return steps, rates


def _smooth(y: list[float], window: int) -> list[float]:
    """Trailing moving average: per-step duel outcomes are noisy at small batch sizes."""
    out = []
    for i in range(len(y)):
        part = y[max(0, i - window + 1): i + 1]
        out.append(sum(part) / len(part))
    return out


def plot_training_curves(config: dict, layout: Layout, methods: Sequence[str], figures_dir: str | Path, meta: dict,
                         smooth: int = 5) -> list[Path]:
    """Hard-split pass@1 against step and against generated tokens, Agon vs GRPO, per model.

    Two panels (vs step, vs tokens) per (family, task); two (family, task) pairs per row
    once there are more than two, so the paper config's six pairs fit one page. If the
    trainers logged no hard-split evaluation at all, the curves show each model's
    correctness on its own training drafts instead, and the figure says so."""
    split = config["eval"]["split"]
    runs = {(f["name"], t["name"], m, seed): read_jsonl(layout.train_metrics(f["name"], t["name"], m, seed))
            for f in config["families"] for t in config["tasks"] for m in methods for seed in config["seeds"]}
    use_hard = any(hard_curve(rows, model)[2] for rows in runs.values() for model in ("A", "B"))

    def curve(rows: list[dict], model: str):
        return hard_curve(rows, model) if use_hard else train_curve(rows, model, smooth)

    plt = _style()
    pairs = [(f["name"], t["name"]) for f in config["families"] for t in config["tasks"]]
    per_row = 1 if len(pairs) <= 2 else 2
    nrows = math.ceil(len(pairs) / per_row)
    fig, axes = plt.subplots(nrows, 2 * per_row, figsize=(PAPER_WIDTH_IN, (2.3 if per_row == 1 else 2.0) * nrows), squeeze=False)
    handles: dict[str, Any] = {}
    for i, (f, t) in enumerate(pairs):
        ax_step, ax_tok = axes[i // per_row, 2 * (i % per_row)], axes[i // per_row, 2 * (i % per_row) + 1]
        drawn, top = 0, 0.0
        for m in methods:
            for model, style in (("A", "-"), ("B", "--")):
                for j, seed in enumerate(config["seeds"]):
                    steps, toks, ys = curve(runs[(f, t, m, seed)], model)
                    if not ys:
                        continue
                    kw = {"color": COLORS[m], "ls": style, "lw": 1.0, "alpha": 1.0 if j == 0 else 0.5}
                    if use_hard:
                        kw.update(marker="o", ms=2)
                    (line,) = ax_step.plot(steps, [100 * y for y in ys], **kw)
                    ax_tok.plot(toks, [100 * y for y in ys], **kw)
                    handles.setdefault(f"{m} {model}", line)
                    drawn += 1
                    top = max(top, 100 * max(ys))
        for ax, xl in ((ax_step, "training step"), (ax_tok, "tokens generated")):
            ax.set_xlabel(xl)
            ax.set_ylabel("pass@1 (%)" if use_hard else "correct drafts (%)")
            # from 0, so gains are not exaggerated; a little below, so a curve at 0 stays visible
            hi = min(100.0, max(10.0, 1.15 * top))
            ax.set_ylim(-0.02 * hi, hi)
            ax.set_title(f"{f} / {t}")
            ax.grid(lw=0.3, alpha=0.6)
            if not drawn:
                ax.text(0.5, 0.5, "no curves\nin metrics.jsonl", ha="center", va="center", transform=ax.transAxes)
        # 100000, 120000, ... run into each other at paper size; 100k, 120k do not
        from matplotlib.ticker import EngFormatter

        ax_tok.xaxis.set_major_formatter(EngFormatter(sep=""))
    for ax in axes.flat[2 * len(pairs):]:
        ax.axis("off")
    what = (f"{split}-split pass@1 during training" if use_hard else
            f"correctness of each model's own training drafts ({smooth}-step mean; no {split}-split evaluations were logged)")
    if handles:
        fig.legend(handles.values(), handles.keys(), loc="upper center", ncol=len(handles), frameon=False,
                   title=f"{what}\nmodel A solid, B dashed; seeds after the first faded")
    legend_in = 0.6  # room for the two-line legend above the panels
    fig.tight_layout(rect=(0, 0, 1, 1 - legend_in / fig.get_size_inches()[1]))
    paths = _save(fig, figures_dir, "training_curves", meta)
    plt.close(fig)
    return paths


def plot_duel_dynamics(config: dict, layout: Layout, figures_dir: str | Path, meta: dict, smooth: int) -> list[Path]:
    """Each Agon model's duel win rate over training (ties count as neither model's win)."""
    plt = _style()
    pairs = [(f["name"], t["name"]) for f in config["families"] for t in config["tasks"]]
    ncols = min(2, len(pairs))
    fig, axes = _grid(plt, len(pairs), ncols, 2.3)
    for ax, (f, t) in zip(axes.flat, pairs):
        drawn = 0
        for j, seed in enumerate(config["seeds"]):
            rows = read_jsonl(layout.train_metrics(f, t, "agon", seed))
            for model, color, label in (("A", "#d62728", "model A wins"), ("B", "#1f77b4", "model B wins"),
                                        ("ties", "#9e9e9e", "ties")):
                steps, rates = win_rates(rows, model)
                if rates:
                    ax.plot(steps, [100 * r for r in _smooth(rates, smooth)], color=color, lw=1.0,
                            ls=":" if model == "ties" else "-", alpha=1.0 if j == 0 else 0.5, label=label if j == 0 else None)
                    drawn += 1
        ax.set_xlabel("training step")
        ax.set_ylabel(f"share of duels (%), {smooth}-step mean")
        ax.set_ylim(-2, 102)  # curves at 0 or 100 stay visible
        ax.set_title(f"{f} / {t}")
        ax.grid(lw=0.3, alpha=0.6)
        if drawn:
            ax.legend(frameon=False)
        else:
            ax.text(0.5, 0.5, "no duel outcomes\nin metrics.jsonl", ha="center", va="center", transform=ax.transAxes)
    for ax in list(axes.flat)[len(pairs):]:
        ax.axis("off")
    fig.tight_layout()
    paths = _save(fig, figures_dir, "duel_dynamics", meta)
    plt.close(fig)
    return paths


# ----------------------------------------------------------------------------- entry points


def build_report(config: dict, layout: Layout, smooth: int = 5) -> dict[str, list[Path]]:
    """Write table1.csv (+ provenance JSON), table1.md and the figures; return what was written."""
    from agon.config import config_hash
    from agon.provenance import atomic_write_text, write_results

    systems = systems_for_methods(config["methods"])
    trained = [m for m in TRAIN_METHODS if any(SYSTEMS[s].train == m for s in systems)]
    rows = build_table(config, layout)
    chash = config_hash(config)
    meta = {"config_hash": chash, "source": "agon report"}
    written: dict[str, list[Path]] = {}
    written["csv"] = [atomic_write_text(layout.table_csv(), table_csv(rows))]
    written["md"] = [atomic_write_text(layout.table_md(), table_markdown(rows, systems, chash))]
    figs = plot_pass1(rows, systems, layout.figures_dir, meta)
    if "training_curves" in layout.figure_names(trained):
        figs += plot_training_curves(config, layout, trained, layout.figures_dir, meta, smooth)
    if "duel_dynamics" in layout.figure_names(trained):
        figs += plot_duel_dynamics(config, layout, layout.figures_dir, meta, smooth)
    written["figures"] = figs
    # the provenance sidecar is written last: its presence means the rest is complete
    inputs = [layout.eval_summary(f["name"], t["name"], s, seed) for f in config["families"]
              for t in config["tasks"] for s in systems for seed in config["seeds"]]
    written["provenance"] = [write_results(
        layout.table_provenance(),
        {"table": layout.table_csv(), "markdown": layout.table_md(), "figures": [str(p) for p in figs],
         "rows": len(rows), "inputs": inputs},
        config=config, seed=None)]
    return written


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register `agon report`."""
    p = sub.add_parser("report", help="table 1 (CSV + Markdown) and the paper figures")
    p.add_argument("--config", required=True, help="agon config YAML (the one the results were made with)")
    p.add_argument("--figures", default="figures", help="folder for the PNG and PDF figures")
    p.add_argument("--smooth", type=int, default=5, help="steps in the moving average of duel win rates")
    p.set_defaults(func=_cli)


def _cli(args: argparse.Namespace) -> int:
    from agon.config import load_config

    config = load_config(args.config)
    config.pop("resources", None)  # resources never change results (same as the workflow)
    written = build_report(config, Layout(config["out_dir"], args.figures), smooth=args.smooth)
    for kind, paths in written.items():
        for p in paths:
            print(f"wrote {kind}: {p}")
    return 0
