"""The tables' columns and the methods behind them: what the CLI, the workflow, the config
schema and the report read.

A config's ``methods`` names column groups (``agon_single`` is A's and B's column); each
:class:`Column` says which system kind runs it (:data:`agon.registry.SYSTEM_KINDS`), which
training run its models come from (a name in :data:`agon.registry.TRAINERS`; None for the
untrained bases), which of that run's two models plays each part, and its colour in the
figures. The trained methods themselves, with what the tables and the workflow need of them
(table, compute matching, teacher, colours), are the registry's rows
(:attr:`agon.registry.TRAINERS.rows`): a method registered for the related table gets its
three columns here with no further line.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from agon.registry import TRAINERS


@dataclass(frozen=True)
class Column:
    """One evaluated system of table 1 and the models it runs.

    ``model`` is set for a single-model column, ``drafter``/``reader`` for a cascade ("A" or
    "B": which of the run's two models plays the part).
    """

    name: str
    method: str  # the config's `methods` entry that asks for this column
    kind: str  # single | cascade | moa (a system kind)
    train: str | None = None  # the trainer whose run the models come from; None: the bases
    model: str | None = None
    drafter: str | None = None
    reader: str | None = None
    cli_system: str | None = None  # the `agon eval --system` value when not the name
    color: str = "#555555"  # in the figures

    @property
    def eval_system(self) -> str:
        """The `agon eval --system` value."""
        return self.cli_system or self.name


# Ordered as the table's columns. Single-model columns show model A under the method's name
# and model B as `<name>_b` (the same `agon eval` system run on the other model), so each
# trainer's effect on each model reads against that model's own base.
COLUMNS: dict[str, Column] = {
    c.name: c
    for c in (
        Column("base", "base", "single", color="#9e9e9e"),
        Column("base_b", "base", "single", model="B", cli_system="base", color="#d0d0d0"),
        Column("base_cascade", "base_cascade", "cascade", color="#bdbdbd"),
        Column("moa", "moa", "moa", color="#8d6e63"),
        Column("grpo", "grpo", "single", train="grpo", model="A", color="#1f77b4"),
        Column(
            "grpo_b", "grpo", "single", train="grpo", model="B", cli_system="grpo", color="#9ecae1"
        ),
        Column(
            "grpo_cascade",
            "grpo_cascade",
            "cascade",
            train="grpo",
            drafter="A",
            reader="B",
            color="#6baed6",
        ),
        Column("agon", "agon", "cascade", train="agon", drafter="A", reader="B", color="#d62728"),
        Column(
            "agon_rev",
            "agon_rev",
            "cascade",
            train="agon",
            drafter="B",
            reader="A",
            color="#ff7f0e",
        ),
        # the same duel with reward.scheme independent: what the contest itself adds
        Column(
            "agon_independent",
            "agon_independent",
            "cascade",
            train="agon_independent",
            drafter="A",
            reader="B",
            color="#2ca02c",
        ),
        Column("agon_single", "agon_single", "single", train="agon", model="A", color="#e377c2"),
        Column(
            "agon_single_b",
            "agon_single",
            "single",
            train="agon",
            model="B",
            cli_system="agon_single",
            color="#f7b6d2",
        ),
    )
}

# The methods published beside Agon (results/related.csv; docs/method.md), as registered: each
# trains A and B alone, so each has GRPO's three columns: A alone, B alone (`<name>_b`) and the
# A -> B cascade of the two (`<name>_cascade`, read against grpo_cascade and agon).
RELATED: tuple[str, ...] = tuple(n for n, m in TRAINERS.rows.items() if m.table == "related")
for _m in RELATED:
    _a, _b = TRAINERS.rows[_m].colors
    COLUMNS |= {
        _m: Column(_m, _m, "single", train=_m, model="A", color=_a),
        f"{_m}_b": Column(f"{_m}_b", _m, "single", train=_m, model="B", cli_system=_m, color=_b),
        f"{_m}_cascade": Column(
            f"{_m}_cascade", _m, "cascade", train=_m, drafter="A", reader="B", color=_a
        ),
    }

# results/related.csv's `methods` where the config does not list them (the schema's
# related.methods default, filled in from here when it loads): the bases, GRPO and Agon that
# each related method is read against, then every method the registry puts in that table
RELATED_DEFAULT: tuple[str, ...] = (
    "base",
    "base_cascade",
    "grpo",
    "grpo_cascade",
    "agon",
    *RELATED,
)

# each model alone against that model's own base: (model, its base column, its trained columns)
GAINS = (
    ("A", "base", ("grpo", "agon_single", *RELATED)),
    ("B", "base_b", ("grpo_b", "agon_single_b", *(f"{m}_b" for m in RELATED))),
)

# Matched compute (``train.budget``): these trainers run, per model, until they have spent
# what the same model spent in the reference run (same family, task and seed); the duel
# variants are matched by construction (the same steps, drafts and reads).
(BUDGET_REFERENCE,) = (n for n, m in TRAINERS.rows.items() if m.budget == "reference")
BUDGET_MATCHED: tuple[str, ...] = tuple(
    n for n, m in TRAINERS.rows.items() if m.budget == "matched"
)
# trainers that learn from the family's teacher row (the workflow builds or prepares it first)
TEACHER_METHODS: tuple[str, ...] = tuple(n for n, m in TRAINERS.rows.items() if m.teacher)

# the trained methods, in the order of their first column (the report's order)
TRAINED_METHODS: tuple[str, ...] = tuple(
    dict.fromkeys(c.train for c in COLUMNS.values() if c.train)
)
# every `methods` entry, in column order; table 1's are the config's `methods`, every one may
# be in `related.methods` (the config schema's lists, filled from these when it loads)
METHODS: tuple[str, ...] = tuple(dict.fromkeys(c.method for c in COLUMNS.values()))
TABLE1_METHODS: tuple[str, ...] = tuple(m for m in METHODS if m not in RELATED)
# untrained columns resolve from the family row alone: `agon eval --system base` etc.
UNTRAINED: dict[str, str] = {c.eval_system: c.kind for c in COLUMNS.values() if not c.train}


def columns_for_methods(methods: Iterable[str]) -> list[str]:
    """The columns evaluated for the config's ``methods``, in table order."""
    wanted = set(methods)
    unknown = wanted - set(METHODS)
    if unknown:
        raise ValueError(f"methods: unknown {sorted(unknown)}; known: {sorted(METHODS)}")
    return [name for name, c in COLUMNS.items() if c.method in wanted]


def eval_seeds(column: str, seeds: Sequence[int], seeded_bases: bool = False) -> list[int]:
    """The seeds ``column`` is evaluated with: every training seed for a trained column, and
    for an untrained one when the family's base models are drawn per training seed
    (``seeded_bases``: the toy world's, :func:`agon.config.seeded_bases`); else the first seed
    only (one pair of base models; its sampling variance is in the ``n_samples`` per
    problem)."""
    seeds = [int(s) for s in seeds]
    return seeds if COLUMNS[column].train or seeded_bases else seeds[:1]


def trained_methods_for(columns: Iterable[str]) -> list[str]:
    """The trained methods some of ``columns`` need, in report order."""
    needed = {COLUMNS[c].train for c in columns}
    return [m for m in TRAINED_METHODS if m in needed]
