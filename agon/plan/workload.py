# long: a job's work and the lengths and counts it is made of, measured in an out_dir or capped
"""What each job computes: its generations, training passes and extra forwards, as sequence
counts and mean lengths; each length and count says where it came from (the caps, means
measured in an existing ``out_dir`` with ``agon plan --lengths-from DIR``, problem counts).

- **The duel** (``agon``, ``agon_independent``, each ablation variant): per step the drafter
  samples ``num_generations`` drafts of each of ``problems_per_step`` problems and the reader
  ``num_reads`` reads of each; ``role_schedule`` alternates the roles by step or splits the
  problems (``both``); each model trains on its completions; probes every ``eval_every`` steps.
- **Budget-matched methods** (``agon.methods.BUDGET_MATCHED``) train each model alone until it
  has generated what it did in the ``agon`` run (``train.budget.match``), at most
  ``max_steps_factor x steps``; how each runs and its helpers' work come from its registry row
  (:class:`agon.registry.Method`), never its name; a row with no helpers is priced as GRPO.
- **Evaluations**: ``eval.n_samples`` per hard problem, by a single model, a cascade (drafts
  then reads) or MoA (``layers`` x ``proposers`` proposals and an aggregator).

Measured means are read from an out_dir, nothing else: training runs' ``metrics.jsonl``
(``{model}/{role}/mean_length`` weighted by ``{model}/{role}/completions``; a GRPO sample counts
as a draft), a budget-matched run's ``summary.json`` where its metrics have nothing,
evaluations' ``summary.json`` (``mean_completion_tokens``, ``mean_draft_tokens``) and
single-model ``samples.jsonl`` (``prompt_tokens``), and data splits' ``split.json`` (``sizes``).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from agon.config import config_value
from agon.methods import BUDGET_MATCHED, COLUMNS
from agon.plan.dims import PlanError
from agon.registry import TRAINERS, Helper, Method
from agon.tasks import expected_split_sizes
from agon.training.settings import DuelSettings, RLSettings, TrainSettings


@dataclass(frozen=True)
class Count:
    """A number and where it came from."""

    value: float
    source: str


# ----------------------------------------------------------------------------- measured lengths

ROLE_LENGTH = re.compile(r"^(?P<model>[^/]+)/(?P<role>drafter|reader)/mean_length$")
MAX_PROMPT_SAMPLES = 2000  # samples.jsonl lines read per file for the mean prompt length


@dataclass
class Mean:
    """A running weighted mean and the files it came from."""

    total: float = 0.0
    weight: float = 0.0
    files: set[str] = field(default_factory=set)

    def add(self, value: float, weight: float, path: str) -> None:
        if weight > 0 and value == value:  # skip NaN
            self.total += value * weight
            self.weight += weight
            self.files.add(path)

    @property
    def value(self) -> float | None:
        return self.total / self.weight if self.weight else None


@dataclass
class MeasuredLengths:
    """Means read from one ``out_dir`` (empty when none is given)."""

    root: str | None = None
    # (family, task, method, model, role) -> mean completion tokens
    roles: dict[tuple[str, str, str, str, str], Mean] = field(default_factory=dict)
    # (family, task, system) -> {"completion": Mean, "draft": Mean}
    evals: dict[tuple[str, str, str], dict[str, Mean]] = field(default_factory=dict)
    prompts: dict[tuple[str, str], Mean] = field(default_factory=dict)  # mean solve prompt
    sizes: dict[tuple[str, str], dict[str, int]] = field(default_factory=dict)
    eval_problems: dict[tuple[str, str], int] = field(default_factory=dict)  # problems evaluated

    def role(
        self, family: str, task: str, model: str, role: str, method: str | None = None
    ) -> Count | None:
        """Mean completion tokens of ``model`` in ``role``: the method's own runs first, then
        any run of (family, task); None when none."""
        keys = [k for k in self.roles if k[:2] == (family, task) and k[3:] == (model, role)]
        own = [k for k in keys if k[2] == method]
        for group in (own, keys):
            mean = Mean()
            for k in group:
                m = self.roles[k]
                mean.total, mean.weight = mean.total + m.total, mean.weight + m.weight
                mean.files |= m.files
            if mean.value is not None:
                return Count(mean.value, f"measured: {len(mean.files)} run file(s) in {self.root}")
        return None

    def evaluated(self, family: str, task: str, system: str, which: str) -> Count | None:
        """Mean tokens of an evaluated system's ``completion`` or ``draft``; None when none."""
        m = self.evals.get((family, task, system), {}).get(which)
        if m is None or m.value is None:
            return None
        return Count(m.value, f"measured: {len(m.files)} eval summary(ies) in {self.root}")

    def prompt(self, family: str, task: str) -> Count | None:
        """Mean solve-prompt tokens of (family, task); None when none."""
        m = self.prompts.get((family, task))
        if m is None or m.value is None:
            return None
        return Count(m.value, f"measured: prompt_tokens of {len(m.files)} samples file(s)")


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise PlanError(
            f"{path}: unreadable ({err}); remove it or point --lengths-from elsewhere"
        ) from None


def _metrics(lengths: MeasuredLengths, path: Path, family: str, task: str, method: str) -> None:
    for line in path.read_text().splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue  # a torn last line of a killed run
        for key, value in row.items():
            m = ROLE_LENGTH.match(key)
            if not m or not isinstance(value, (int, float)):
                continue
            n = row.get(f"{m['model']}/{m['role']}/completions", 1.0) or 0.0
            k = (family, task, method, m["model"], m["role"])
            lengths.roles.setdefault(k, Mean()).add(float(value), float(n), str(path))


def _summary(lengths: MeasuredLengths, path: Path, family: str, task: str, method: str) -> None:
    """A budget-matched run's tokens over completions where its metrics gave nothing (a duel's
    summary pools drafts and reads: left out)."""
    if method not in BUDGET_MATCHED:
        return
    body = _read_json(path)
    for model in ("A", "B"):
        key = (family, task, method, model, "drafter")
        tokens, n = body.get(f"{model}/tokens_generated"), body.get(f"{model}/completions")
        if key in lengths.roles or not (isinstance(tokens, (int, float)) and n):
            continue
        lengths.roles.setdefault(key, Mean()).add(float(tokens) / float(n), float(n), str(path))


def read_lengths(root: str | Path) -> MeasuredLengths:
    """Every mean :class:`MeasuredLengths` knows, read from ``root`` (an ``out_dir``)."""
    base = Path(root)
    if not base.is_dir():
        raise PlanError(f"--lengths-from {root}: not a folder; give an out_dir holding runs")
    out = MeasuredLengths(root=str(base))
    for path in sorted(base.glob("*/*/train/*/seed*/metrics.jsonl")):
        family, task, _, method = path.parts[-6:-2]
        _metrics(out, path, family, task, method)
    for path in sorted(base.glob("*/*/train/*/seed*/summary.json")):
        family, task, _, method = path.parts[-6:-2]
        _summary(out, path, family, task, method)
    for path in sorted(base.glob("*/*/ablations/*/train/seed*/metrics.jsonl")):
        family, task = path.parts[-7:-5]
        _metrics(out, path, family, task, "agon")
    for path in sorted(base.glob("*/*/eval/*/seed*/summary.json")):
        family, task, _, system = path.parts[-6:-2]
        body = _read_json(path)
        n = float(body.get("n_samples") or body.get("n_problems") or 1)
        if isinstance(body.get("n_problems"), int):
            key = (family, task)
            out.eval_problems[key] = max(out.eval_problems.get(key, 0), body["n_problems"])
        slot = out.evals.setdefault((family, task, system), {"completion": Mean(), "draft": Mean()})
        for which, key in (
            ("completion", "mean_completion_tokens"),
            ("draft", "mean_draft_tokens"),
        ):
            if isinstance(body.get(key), (int, float)):
                slot[which].add(float(body[key]), n, str(path))
        samples = path.with_name("samples.jsonl")
        if samples.is_file() and system in COLUMNS and COLUMNS[system].kind == "single":
            mean = out.prompts.setdefault((family, task), Mean())
            with open(samples) as f:
                for i, line in enumerate(f):
                    if i >= MAX_PROMPT_SAMPLES:
                        break
                    try:
                        tokens = json.loads(line).get("prompt_tokens")
                    except ValueError:
                        continue
                    if isinstance(tokens, (int, float)):
                        mean.add(float(tokens), 1.0, str(samples))
    for path in sorted(base.glob("*/*/data/split.json")):
        family, task = path.parts[-4:-2]
        sizes = _read_json(path).get("sizes")
        if isinstance(sizes, dict):
            out.sizes[(family, task)] = {k: int(v) for k, v in sizes.items()}
    return out


# ----------------------------------------------------------------------------- expected lengths

# a solve prompt (template, persona, problem) where none was measured: assumed, not measured
ASSUMED_SOLVE_PROMPT_TOKENS = 512
# a split whose size its task cannot tell from its params (agon.tasks.expected_split_sizes: None)
ASSUMED_SPLIT_PROBLEMS = 500


@dataclass(frozen=True)
class Expect:
    """Expected lengths and counts of one (family, task) and a method's runs on it: the family
    row's caps, the solve prompt, and the means ``lengths`` measured where it has them."""

    family: str
    task: dict  # the task's config row
    lengths: MeasuredLengths
    max_new: int
    max_prompt: int
    draft_view: str
    solve_prompt: Count

    @property
    def cap(self) -> Count:
        return Count(self.max_new, f"cap: max_new_tokens {self.max_new}")

    def reader_prompt(self, draft: float) -> float:
        """A reader prompt: the solve prompt and the draft as ``draft_view`` shows it
        (``last_tokens:N`` the last N tokens, else all of it: for ``answer_section`` an upper
        bound), cut to ``max_prompt_tokens``."""
        if self.draft_view.startswith("last_tokens:"):
            draft = min(draft, float(self.draft_view.split(":", 1)[1]))
        return min(float(self.max_prompt), self.solve_prompt.value + draft)

    def role(self, model: str, role: str, method: str | None = None) -> Count:
        """Expected completion tokens of ``model`` in ``role``: measured, else the cap."""
        n = self.lengths.role(self.family, self.task["name"], model, role, method)
        return self.cap if n is None else Count(min(n.value, self.max_new), n.source)

    def evaluated(self, system: str, which: str) -> Count:
        """Expected tokens of an evaluated system's ``completion`` or ``draft``: measured or the
        cap."""
        n = self.lengths.evaluated(self.family, self.task["name"], system, which)
        return self.cap if n is None else n

    def problems(self, split: str, cap: int | None = None) -> Count:
        """How many problems of ``split`` a job reads, at most ``cap``: measured, else the size
        its task expects from its params (:func:`agon.tasks.expected_split_sizes`; a hard split
        the task cannot size, its whole split's as an upper bound), else assumed."""
        task, lengths = self.task["name"], self.lengths
        params = self.task.get("params") or {}
        test_side = split in ("hard", "test")
        sizes = lengths.sizes.get((self.family, task))
        evaluated = lengths.eval_problems.get((self.family, task)) if test_side else None
        if sizes and split in sizes:
            n = Count(sizes[split], f"measured: split.json in {lengths.root}")
        elif evaluated:
            n = Count(evaluated, f"measured: evaluations in {lengths.root}")
        else:
            expected = expected_split_sizes(task, params)
            whole = "test" if test_side else "validation"
            if split == "hard" and expected["hard"] is not None:
                n = Count(expected["hard"], f"the hard split's {expected['hard']} problems")
            elif expected[whole] is not None:
                bound = "upper bound: " if split.endswith("hard") else ""
                size = expected[whole]
                n = Count(size, f"{bound}the {whole} split's {size} problems")
            else:
                n = Count(ASSUMED_SPLIT_PROBLEMS, f"assumed {ASSUMED_SPLIT_PROBLEMS} problems")
        if cap is not None and cap < n.value:
            return Count(cap, f"capped by the config at {cap}")
        return n


def expect(family_row: dict, task_row: dict, lengths: MeasuredLengths) -> Expect:
    """The family row's caps and the solve prompt's expected length on the task."""
    for key in ("max_new_tokens", "max_prompt_tokens"):
        if not isinstance(family_row.get(key), int):
            raise PlanError(
                f"families (name {family_row.get('name')!r}): no {key}; validate the config"
            )
    family = family_row["name"]
    prompt = lengths.prompt(family, task_row["name"])
    if prompt is None:
        n = min(ASSUMED_SOLVE_PROMPT_TOKENS, family_row["max_prompt_tokens"])
        prompt = Count(n, f"assumed {ASSUMED_SOLVE_PROMPT_TOKENS}-token solve prompt")
    row = family_row
    return Expect(
        family, task_row, lengths, row["max_new_tokens"], row["max_prompt_tokens"],
        row["draft_view"], prompt,
    )  # fmt: skip


# ----------------------------------------------------------------------------- the work

GREEDY_LENGTH_NOTE = "probes and teachers decode greedily to the cap"
TRL_VLLM_SHARE = 0.3  # GRPOConfig's default vllm_gpu_memory_utilization
TRL_SECTION = "grpo"  # the config section of the runs on TRL's GRPOTrainer (Method.runs "trl")
UNDECLARED = Method("", table=None)  # a trainer registered without a row: solo, nothing declared


# the settings class a run reads its train.* and agon.* knobs from, by how it runs
# (agon.registry.RUNS): the duel's; an in-house solo trainer's shared ones (its own section's keys
# are its helpers', read by Helper); TRL's GRPO's shared ones (its grpo section: TRL_SECTION)
RUN_SETTINGS: dict[str, type[TrainSettings]] = {
    "duel": DuelSettings,
    "solo": RLSettings,
    "trl": TrainSettings,
}


def method_row(method: str) -> Method:
    return TRAINERS.rows.get(method, UNDECLARED)


def run_settings(config: dict, family: dict, runs: str) -> TrainSettings:
    """The settings of a run of ``family`` that runs as ``runs``, made as its trainer makes them
    (:meth:`~agon.training.settings.TrainSettings.from_config`); what the trainer would refuse
    is a :class:`PlanError` naming the key."""
    try:
        return RUN_SETTINGS[runs].from_config(config, family)
    except ValueError as err:
        raise PlanError(f"families (name {family.get('name')!r}), {runs} run: {err}") from None


def rollout(config: dict, s: TrainSettings, runs: str) -> tuple[str, int]:
    """(engine, sequences handed to it at once) of a run's own samples: on TRL's GRPOTrainer
    (``runs`` "trl") vLLM where the config's ``grpo.use_vllm`` says so, else transformers, a
    step's P x G completions at once; the in-house trainers ``train.backend`` at
    ``rollout_batch_size`` (``s``: the run's settings)."""
    if runs == "trl":
        engine = "vllm" if (config.get(TRL_SECTION) or {}).get("use_vllm") else "hf"
        return engine, s.problems_per_step * s.num_generations
    return s.backend, s.rollout_batch_size


@dataclass(frozen=True)
class Generation:
    """Sampling ``sequences`` completions of ``length`` tokens after ``prompt`` tokens, on
    ``engine``, ``rows`` sequences handed to it at once."""

    what: str
    model: str  # "A", "B" or a helper ("teacher")
    sequences: float
    prompt: float
    length: Count
    engine: str  # vllm | hf
    rows: int
    helper: bool = False  # a probe's or a teacher's tokens, counted apart from the samples

    @property
    def completion(self) -> float:
        return self.length.value

    @property
    def source(self) -> str:
        return self.length.source


@dataclass(frozen=True)
class Training:
    """Training ``model`` on ``sequences`` of its own completions (one optimizer pass each)."""

    what: str
    model: str
    sequences: float
    prompt: float
    completion: float


class Scoring(Training):
    """No-grad forwards, the head on the completion (a teacher's log-probs, GAR's anchors)."""


@dataclass(frozen=True)
class Resident:
    """A helper model held for the whole run: its weights and, when it ``generates``, an
    engine's KV cache for ``rows`` sequences of ``context`` tokens."""

    model: str
    rows: int
    context: int
    generates: bool


@dataclass(frozen=True)
class Logits:
    """A transient of ``tokens`` x ``vocab_chunk`` float32 logits (``name``: its component)."""

    name: str
    tokens: float
    vocab_chunk: int


@dataclass
class Workload:
    """One job's work, per model what it spent, the helper models the config names (plan name
    -> path) and the helpers' memory beside the policies."""

    generations: list[Generation] = field(default_factory=list)
    trainings: list[Training] = field(default_factory=list)
    scorings: list[Scoring] = field(default_factory=list)
    steps: dict[str, float] = field(default_factory=dict)
    spend: dict[str, dict[str, float]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    models: dict[str, str] = field(default_factory=dict)
    residents: list[Resident] = field(default_factory=list)
    logits: list[Logits] = field(default_factory=list)


def _probes(s: TrainSettings, e: Expect, steps: int, engine: str, rows: int) -> list[Generation]:
    """Each model's greedy probes over the run (none with ``eval_every: 0``)."""
    every = s.eval_every
    if not every:
        return []
    count = steps // every + 1 + (1 if steps % every else 0)
    problems = e.problems(s.eval_split, s.eval_problems)
    cap = Count(e.max_new, f"cap ({GREEDY_LENGTH_NOTE}); {problems.source}")
    solve, n = e.solve_prompt.value, count * problems.value
    return [Generation(f"{m} probes", m, n, solve, cap, engine, rows, True) for m in "AB"]


def duel_workload(config: dict, s: DuelSettings, e: Expect, method: str) -> Workload:
    """The duel of ``method`` under its settings ``s`` (a variant's for an ablation)."""
    steps, p, g, k = s.steps, s.problems_per_step, s.num_generations, s.num_reads
    engine, rows = rollout(config, s, "duel")
    draft = {m: e.role(m, "drafter", method) for m in "AB"}
    read = {m: e.role(m, "reader", method) for m in "AB"}
    if s.role_schedule == "both":
        drafts = {m: steps * (p / 2) * g for m in "AB"}
    else:  # alternate: A drafts on even steps
        drafts = {"A": math.ceil(steps / 2) * p * g, "B": (steps // 2) * p * g}
    w = Workload(steps={"A": steps, "B": steps})
    solve = e.solve_prompt.value
    for m, rival in (("A", "B"), ("B", "A")):
        reads = drafts[rival] * k
        reader = e.reader_prompt(draft[rival].value)
        w.generations += [
            Generation(f"{m} drafts", m, drafts[m], solve, draft[m], engine, rows),
            Generation(f"{m} reads {rival}'s drafts", m, reads, reader, read[m], engine, rows),
        ]
        w.trainings += [
            Training(f"{m} on its drafts", m, drafts[m], solve, draft[m].value),
            Training(f"{m} on its reads", m, reads, reader, read[m].value),
        ]
        w.spend[m] = {
            "steps": steps,
            "completions": drafts[m] + reads,
            "tokens": drafts[m] * draft[m].value + reads * read[m].value,
        }
    w.generations += _probes(s, e, steps, engine, rows)
    return w


def budget_steps(
    s: TrainSettings, reference: dict[str, float] | None, per_step: dict[str, float]
) -> tuple[int, str]:
    """(steps, note) of a budget-matched model matching ``reference`` at ``per_step``."""
    match, steps, cap = s.budget_match, s.steps, s.max_steps
    if match == "steps" or reference is None:
        return steps, f"budget: {steps} steps"
    key = "tokens" if match == "tokens" else "completions"
    need = math.ceil(reference[key] / per_step[key])
    if need > cap:
        return cap, f"budget: {match} of the agon run need {need} steps; capped at {cap}"
    return need, f"budget: {match} of the agon run, {need} steps"


def solo_workload(
    config: dict,
    s: TrainSettings,
    e: Expect,
    method: str,
    reference: dict[str, dict[str, float]] | None,
) -> Workload:
    """A budget-matched method's run under its settings ``s``: each model alone, with its row's
    helpers' work (their own keys read from ``config``)."""
    p, g = s.problems_per_step, s.num_generations
    row = method_row(method)
    engine, rows = rollout(config, s, row.runs)
    w = Workload()
    for m in ("A", "B"):
        sample = e.role(m, "drafter", method)
        per = {"tokens": p * g * sample.value, "completions": p * g}
        steps, note = budget_steps(s, (reference or {}).get(m), per)
        n = steps * p * g
        w.steps[m] = steps
        w.notes.append(f"{m}: {note}")
        solve = e.solve_prompt.value
        w.generations.append(Generation(f"{m} samples", m, n, solve, sample, engine, rows))
        w.trainings.append(Training(f"{m} on its samples", m, n, solve, sample.value))
        w.spend[m] = {"steps": steps, "completions": n, "tokens": n * sample.value}
        for h in row.helpers or ():
            _helper(config, s, e, method, h, m, w, steps, sample)
    if row.helpers is None:
        w.notes.append(f"no helper work declared for {method}: priced as GRPO")
    # every trainer probes (GRPO through a callback, on the duel's rollout engine)
    probe_steps = max(w.steps.values())
    w.generations += _probes(s, e, probe_steps, s.backend, s.rollout_batch_size)
    return w


def _helper_model(config: dict, h: Helper, m: str) -> tuple[str, str | None]:
    """The plan's name of helper ``h``'s model for ``m``, and its path where the config names it."""
    named = config_value(config, h.model_key) if h.model_key else None
    if named:
        return f"{h.model_key.split('.')[0]}_teacher", str(named)
    if h.model == "self":
        return m, None
    if h.model == "other":  # the family's other base model, with its persona
        return ("B" if m == "A" else "A"), None
    return "teacher", None


def _helper(
    config: dict,
    s: TrainSettings,
    e: Expect,
    method: str,
    h: Helper,
    m: str,
    w: Workload,
    steps: float,
    sample: Count,
) -> None:
    """Helper ``h``'s work for model ``m`` over ``steps`` steps, and what it holds (its own keys
    read from ``config``, the shared ones from ``s``)."""
    if h.when is not None and config_value(config, h.when[0]) != h.when[1]:
        return
    p, g, rows = s.problems_per_step, s.num_generations, s.rollout_batch_size
    if h.first_steps is not None and (first := config_value(config, h.first_steps)) is not None:
        steps = min(int(first), steps)
    count = steps * p if h.over == "anchors" else steps * p * g  # wrong_samples: all of them
    model, named = _helper_model(config, h, m)
    if named is not None:
        w.models[model] = named
    prompt = e.reader_prompt(sample.value) if h.prompt == "read" else e.solve_prompt.value
    length = sample
    if h.completion is not None:
        tokens = config_value(config, h.completion) or e.max_new
        length = Count(tokens, f"cap ({GREEDY_LENGTH_NOTE})")
    what = h.what.format(m=m, helper=model)
    if h.kind == "generate":
        engine = h.engine or s.backend
        w.generations.append(Generation(what, model, count, prompt, length, engine, rows, True))
    else:
        w.scorings.append(Scoring(what, model, count, prompt, length.value))
    if h.memory == "engine":  # one engine per model trained, even for one checkpoint
        w.residents.append(Resident(model, rows, int(prompt + length.value), True))
    elif h.memory == "weights" and (r := Resident(model, 1, 1, False)) not in w.residents:
        w.residents.append(r)
    if h.logits_chunk is not None:
        chunk = int(config_value(config, h.logits_chunk))
        t = Logits(f"{method}_logits", (g + 1) * e.max_new, chunk)
        if t not in w.logits:
            w.logits.append(t)


def eval_workload(config: dict, e: Expect, system: str) -> Workload:
    """An evaluation of column ``system`` on ``eval.backend``."""
    ev, col = config["eval"], COLUMNS[system]
    problems = e.problems(ev["split"], ev.get("max_problems"))
    n = problems.value * ev["n_samples"]
    engine, rows = ev.get("backend", "hf"), ev["batch_size"]
    final = e.evaluated(system, "completion")
    before = e.evaluated(system, "draft")
    w = Workload(notes=[f"problems: {problems.source}"])
    solve = e.solve_prompt.value
    if col.kind == "single":
        model = col.model or "A"
        w.generations.append(Generation(f"{model} answers", model, n, solve, final, engine, rows))
    elif col.kind == "cascade":
        d, r, reader = col.drafter or "A", col.reader or "B", e.reader_prompt(before.value)
        w.generations += [
            Generation(f"{d} drafts", d, n, solve, before, engine, rows),
            Generation(f"{r} reads", r, n, reader, final, engine, rows),
        ]
    else:  # moa
        moa = config["moa"]
        layers, proposers = moa["layers"], moa["proposers"]
        per = before.value / (layers * proposers) if "measured" in before.source else before.value
        shown = solve + proposers * per  # a prompt that shows a layer's proposals
        for layer in range(layers):
            prompt = solve if layer == 0 else shown
            for i in range(proposers):
                model = "A" if i % 2 == 0 else "B"
                what = f"layer {layer + 1} proposal {i + 1} ({model})"
                w.generations.append(
                    Generation(what, model, n, prompt, Count(per, before.source), engine, rows)
                )
        agg = "A" if moa["aggregator"] == "a" else "B"
        w.generations.append(Generation(f"{agg} aggregates", agg, n, shown, final, engine, rows))
        worst = proposers * e.max_new  # the proposals alone, at the cap
        if worst > e.max_prompt:
            w.notes.append(
                f"MoA prompts show {proposers} proposals of up to {e.max_new} tokens, {worst} "
                f"tokens without the problem: each keeps an equal tail to fit max_prompt_tokens="
                f"{e.max_prompt} (the aggregator reads the proposals' endings)"
            )
    return w
