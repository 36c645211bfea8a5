"""docs/results.md (`agon report --docs`): every table the project publishes, on one page.

Each table is read back as the report wrote it (:func:`agon.report.write.write_table`): its
Markdown, under a short header drawn from its provenance sidecar (the commit, the config hash,
the kinds of machine its runs were computed on, the jobs' wall time from the Snakemake benchmark
files or the summaries' own, when it was written) and the command that regenerates it. A table
whose files are missing is listed as not generated, with that command, never left out. The
benchmarks (``bench/results.json``, ``bench/throughput/``) follow with their own commit and
machine where they record one, and last what regenerating every tree cost (its jobs' time
from the benchmark files, its size on disk). Nothing here computes a number of a table.

A table has a role: *published* (what ``all_tables`` and the real tier's command build, which
should share one commit), *input* (committed before the tables that read it, never rebuilt by
``all_tables``: the control's pilot) or *exploratory* (built by name only: the control's arm 2).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from agon.provenance import atomic_write_text
from agon.report.docs_costs import bench_section, commit_text, cost_section, count, duration
from agon.results import WALL_KEYS, Layout, TableFiles, benchmark_seconds, summary_number

DEFAULT_CONFIG = "config/config.yaml"
DEFAULT_OUT = "docs/results.md"
REAL_CONFIG = "config/real-cpu.yaml"
REAL_SUBDIR = "real-cpu"  # the real tier's out_dir under the toy world's (config/real-cpu.yaml)
BENCH_RESULTS = "bench/results.json"
BENCH_THROUGHPUT = "bench/throughput"


PUBLISHED, INPUT, EXPLORATORY = "published", "input", "exploratory"


@dataclass(frozen=True)
class Table:
    """One table of the page: its name, its title, its files, the command that makes them and
    its role (published, input or exploratory)."""

    name: str
    title: str
    files: TableFiles
    command: str
    role: str = PUBLISHED


# name, title, role; in the page's order (the real tier's table 1 comes after these)
TABLES = (
    ("table1", "Table 1", PUBLISHED),
    ("regime", "The regime: can table 1's world show the paper's claims?", PUBLISHED),
    ("control_pilot", "The positive control's pilot", INPUT),
    ("control", "The positive control (arm 1)", PUBLISHED),
    ("control_curriculum", "The positive control's arm 2 (exploratory)", EXPLORATORY),
    ("ablations", "Ablations: the Agon variants", PUBLISHED),
    ("related", "Related methods", PUBLISHED),
    ("budget", "Budget: table 1's trained systems at multiples of its steps", PUBLISHED),
)

# A results file (relative to its out_dir, its summary.json's folder) -> the Snakemake
# benchmark of the job that wrote it (relative to out_dir/benchmarks, no .tsv): the
# `benchmark:` paths of workflow/rules/{train,evaluate,ablations,regime,budget,control}.smk
_FT = r"(?P<f>[^/]+)/(?P<t>[^/]+)"  # a family's and a task's folders
BENCHMARK_OF = (
    (r"control/(?P<rest>.+)", "control/{rest}"),
    (_FT + r"/(?P<kind>train|eval)/(?P<x>[^/]+)/(?P<s>seed\d+)", "{kind}/{f}/{t}/{x}/{s}"),
    (_FT + r"/ablations/(?P<rest>.+)", "ablations/{f}/{t}/{rest}"),
    (_FT + r"/regime/(?P<rest>.+)", "regime/{f}/{t}/{rest}"),
    (_FT + r"/budget/(?P<x>x\d+)/(?P<rest>.+)", "budget/{f}/{t}/{x}/{rest}"),
)


def snakemake_command(target: str, config: str = DEFAULT_CONFIG, overrides: str = "") -> str:
    """The Snakemake command that builds ``target`` (the target before ``--configfile``, which
    takes every word after it)."""
    cmd = f"snakemake --cores all {target}"
    if config != DEFAULT_CONFIG:
        cmd += f" --configfile {config}"
    return cmd + (f" --config {overrides}" if overrides else "")


def tables(results: str | Path, config: str = DEFAULT_CONFIG) -> list[Table]:
    """The tables of ``results`` (an out_dir of ``config``) and the real tier's table 1 (its
    out_dir is ``results/real-cpu``, as config/real-cpu.yaml advises for one clone)."""
    layout = Layout(str(results))
    out = [
        Table(
            name,
            title,
            layout.table_files(name),
            snakemake_command(f"{results}/{name}.csv", config),
            role,
        )
        for name, title, role in TABLES
    ]
    real = Layout(f"{results}/{REAL_SUBDIR}")
    target = real.table_files("table1").csv
    dirs = f"out_dir={real.out_dir} figures_dir=figures/{REAL_SUBDIR}"
    command = "pip install -e '.[real]' && " + snakemake_command(target, REAL_CONFIG, dirs)
    title = "The real-model tier on CPU (config/real-cpu.yaml)"
    out.append(Table(f"{REAL_SUBDIR}/table1", title, real.table_files("table1"), command))
    return out


# ----------------------------------------------------------------------------- one table


def _git(prov: dict) -> tuple[str | None, bool]:
    git = prov.get("git") or {}
    return git.get("commit"), bool(git.get("dirty"))


def _read_files(sidecar: dict) -> list[str]:
    """Every results file the table read, as its sidecar lists them (its code versions)."""
    return list(
        dict.fromkeys(p for ps in (sidecar.get("code_versions") or {}).values() for p in ps)
    )


def benchmark_name(rel: str) -> str | None:
    """The benchmark (under out_dir/benchmarks, no .tsv) of the job that wrote the results file
    at ``rel`` (relative to out_dir); None for a file no benchmarked job writes."""
    folder = rel.removesuffix("/summary.json")
    for pattern, template in BENCHMARK_OF:
        m = re.fullmatch(pattern, folder)
        if m:
            return template.format(**m.groupdict())
    return None


def _in_tree(sidecar: dict) -> list[str | None]:
    """Every results file the table read, relative to the out_dir it was written in (None for
    one outside it)."""
    made_in = Path(sidecar.get("table", "")).parent
    out = []
    for p in _read_files(sidecar):
        try:
            out.append(Path(p).relative_to(made_in).as_posix())
        except ValueError:
            out.append(None)
    return out


def runs_commits(sidecar: dict, results: Path) -> str:
    """The commits the table's runs were made at (each read summary's own provenance), where
    one differs from the table's: '' when every run's is the table's."""
    found: Counter[str] = Counter()
    files = _in_tree(sidecar)
    for rel in files:
        key = "not here"
        if rel is not None:
            try:
                prov = json.loads((results / rel).read_text()).get("provenance") or {}
                key = commit_text(*_git(prov))
            except (OSError, json.JSONDecodeError):
                pass
        found[key] += 1
    if set(found) <= {commit_text(*_git(sidecar.get("provenance") or {}))}:
        return ""
    parts = [f"{c} ({n} of {len(files)})" for c, n in found.items()]
    return "; the runs it read: " + ", ".join(parts)


def wall_time(sidecar: dict, results: Path) -> str:
    """The summed wall time of the jobs whose results the table read: each job's Snakemake
    benchmark file where it exists, else its summary's own wall seconds."""
    total, from_bench, from_summary, unknown = 0.0, 0, 0, 0
    files = _in_tree(sidecar)
    for rel in files:
        if rel is None:
            unknown += 1
            continue
        name = benchmark_name(rel)
        secs = benchmark_seconds(results / "benchmarks" / f"{name}.tsv") if name else None
        if secs is not None:
            total, from_bench = total + secs, from_bench + 1
            continue
        summary = results / rel
        secs = (
            summary_number(json.loads(summary.read_text()), WALL_KEYS)
            if summary.is_file()
            else None
        )
        if secs is None:
            unknown += 1
        else:
            total, from_summary = total + secs, from_summary + 1
    if not files or unknown == len(files):
        return "not recorded"
    counts = (
        (from_bench, "from Snakemake benchmark files"),
        (from_summary, "from the summaries' wall_s"),
        (unknown, "not recorded"),
    )
    where = [f"{n} {what}" for n, what in counts if n]
    jobs = count(len(files), "job")
    return f"{duration(total)} summed over the {jobs} it read ({'; '.join(where)})"


def machine_kinds(sidecar: dict) -> str:
    """The kinds of machine the table's runs were computed on (its sidecar's ``machines``),
    else the host the report itself ran on."""
    kinds = [k for k in (sidecar.get("machines") or {}) if k != "unknown"]
    if kinds:
        return "; ".join(kinds) + (" (its runs)" if len(kinds) == 1 else " (its runs: mixed)")
    h = (sidecar.get("provenance") or {}).get("host") or {}
    if h.get("cpu_model"):
        return f"{h['cpu_model']}, {h.get('cpus')} CPUs (the report's; its runs' not recorded)"
    return "not recorded"


def world(sidecar: dict) -> str:
    """What the table was measured on: the config's families, tasks and seeds, or for a
    positive-control table its own world's arm (the control section sets its seeds)."""
    if sidecar.get("arm"):
        return f"the positive control's own world, arm {sidecar['arm']}"
    cfg = (sidecar.get("provenance") or {}).get("config") or {}
    names = [", ".join(str(r.get("name")) for r in cfg.get(k) or []) for k in ("families", "tasks")]
    seeds = ", ".join(str(s) for s in cfg.get("seeds") or [])
    return f"families {names[0] or '?'}; tasks {names[1] or '?'}; seeds {seeds or '?'}"


def demoted(markdown: str, levels: int = 2) -> str:
    """``markdown`` with every heading ``levels`` deeper (outside code fences), so a table's own
    headings sit under its section of the page."""
    out, fenced = [], False
    for line in markdown.rstrip("\n").splitlines():
        if line.startswith("```"):
            fenced = not fenced
        out.append("#" * levels + line if not fenced and re.match(r"#+ ", line) else line)
    return "\n".join(out)


ROLE_LINES = {
    INPUT: "an input, committed before the tables that read it (the control's verdict reads its "
    "effect); `all_tables` never rebuilds it",
    EXPLORATORY: "exploratory (no rule was stated before its first run); built by name only, "
    "not by `all_tables`",
}


def table_section(table: Table) -> tuple[str, tuple[str | None, bool] | None]:
    """A table's section of the page, and its (commit, dirty), None when not generated."""
    files = {
        "CSV": table.files.csv,
        "Markdown": table.files.md,
        "provenance": table.files.provenance,
    }
    missing = [f"{what} ({p})" for what, p in files.items() if not Path(p).is_file()]
    lines = [f"## {table.title}", ""]
    if table.role in ROLE_LINES:
        lines.append(f"- role: {ROLE_LINES[table.role]}")
    if missing:
        state = (
            "not generated"
            if len(missing) == len(files)
            else "incomplete: missing " + ", ".join(missing)
        )
        lines += [f"- **{state}**", f"- regenerate: `{table.command}`", ""]
        return "\n".join(lines), None
    sidecar = json.loads(Path(table.files.provenance).read_text())
    tree = Path(table.files.csv).parent  # the table's own out_dir (the real tier's is nested)
    prov = sidecar.get("provenance") or {}
    commit, dirty = _git(prov)
    lines += [
        f"- commit: {commit_text(commit, dirty)}{runs_commits(sidecar, tree)}",
        f"- config hash: `{prov.get('config_hash') or 'not recorded'}`; {world(sidecar)}",
        f"- machine: {machine_kinds(sidecar)}",
        f"- wall time: {wall_time(sidecar, tree)}",
        f"- written: {prov.get('timestamp') or 'not recorded'}; files: `{table.files.csv}`, "
        f"`{table.files.md}`, `{table.files.provenance}`",
        f"- regenerate: `{table.command}`",
        "",
        demoted(Path(table.files.md).read_text()),
        "",
    ]
    return "\n".join(lines), (commit, dirty)


# ----------------------------------------------------------------------------- the page


def _by_commit(commits: dict[str, tuple[str | None, bool]]) -> str:
    by_commit: dict[tuple[str | None, bool], list[str]] = {}
    for name, c in commits.items():
        by_commit.setdefault(c, []).append(name)
    return "; ".join(f"{commit_text(*c)}: {', '.join(names)}" for c, names in by_commit.items())


def commits_line(commits: dict[str, tuple[str | None, bool]], what: str = "generated") -> str:
    """Whether every generated table (of a role: ``what``) comes from one commit (and which),
    or each table's."""
    if not commits:
        return f"No {what} table has been generated yet."
    distinct = set(commits.values())
    if len(distinct) == 1:
        one = commit_text(*next(iter(distinct)))
        if len(commits) == 1:
            return f"The one {what} table comes from commit {one}."
        return f"All {len(commits)} {what} tables come from one commit: {one}."
    return f"The {what} tables come from {len(distinct)} commits: {_by_commit(commits)}."


def role_lines(tables: list[Table], commits: dict[str, tuple[str | None, bool]]) -> list[str]:
    """The page's opening lines: the published tables' commit(s), then the inputs' and the
    exploratory tables' own, then what is not generated."""
    role = {t.name: t.role for t in tables}
    published = {n: c for n, c in commits.items() if role[n] == PUBLISHED}
    lines = [commits_line(published, PUBLISHED)]
    for kind, label in (
        (INPUT, "Inputs, committed before the tables that read them"),
        (EXPLORATORY, "Exploratory, built by name only"),
    ):
        own = {n: c for n, c in commits.items() if role[n] == kind}
        if own:
            lines.append(f"{label}: {_by_commit(own)}.")
    missing = [t.name for t in tables if t.name not in commits]
    lines.append(
        f"Not generated: {', '.join(missing)}." if missing else "Every table is generated."
    )
    return [x for line in lines for x in (line, "")]


def results_page(
    results: str | Path,
    config: str = DEFAULT_CONFIG,
    bench: str | Path = BENCH_RESULTS,
    throughput: str | Path = BENCH_THROUGHPUT,
) -> str:
    """docs/results.md's text: every table of ``results`` (an out_dir of ``config``) and the
    real tier's, present or not, then the benchmarks."""
    sections, commits = [], {}
    page_tables = tables(results, config)
    for table in page_tables:
        text, commit = table_section(table)
        sections.append(text)
        if commit is not None:
            commits[table.name] = commit
    header = [
        "# Results",
        "",
        f"Generated by `agon report --docs` from `{results}`; do not edit this file by hand, "
        "rerun the command. Each table is its Markdown as the report wrote it, under a header "
        "from its provenance sidecar; wall time sums the jobs that made the results it read "
        "(the base models' pretraining aside). The published tables are what `snakemake "
        "--cores all all_tables` and the real tier's command build.",
        "",
        *role_lines(page_tables, commits),
    ]
    tail = [bench_section(Path(bench), Path(throughput)), cost_section(Path(results))]
    return "\n".join(header + sections + tail).rstrip() + "\n"


def write_results_page(
    results: str | Path,
    out: str | Path = DEFAULT_OUT,
    config: str = DEFAULT_CONFIG,
    bench: str | Path = BENCH_RESULTS,
    throughput: str | Path = BENCH_THROUGHPUT,
) -> dict[str, list[Path]]:
    """Write :func:`results_page` to ``out``; return it by kind, as every report does."""
    return {"docs": [atomic_write_text(out, results_page(results, config, bench, throughput))]}
