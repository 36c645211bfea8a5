"""What each job computes: its generations, training passes and extra forwards, as sequence
counts and mean lengths (:mod:`agon.plan.lengths`).

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
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from agon.methods import COLUMNS
from agon.plan.lengths import Count, Expect, MeasuredLengths, eval_length, role_length, split_size
from agon.registry import TRAINERS, Helper, Method

GREEDY_LENGTH_NOTE = "probes and teachers decode greedily to the cap"
TRL_VLLM_SHARE = 0.3  # GRPOConfig's default vllm_gpu_memory_utilization
TRL_SECTION = "grpo"  # the config section of the runs on TRL's GRPOTrainer (Method.runs "trl")
UNDECLARED = Method("", table=None)  # a trainer registered without a row: solo, nothing declared


def method_row(method: str) -> Method:
    return TRAINERS.rows.get(method, UNDECLARED)


def config_value(config: dict, key: str) -> Any:
    """The value of dotted ``key`` (``"cliff.teacher"``) in ``config``; None where absent."""
    value: Any = config
    for part in key.split("."):
        if not isinstance(value, dict):
            return None
        value = value.get(part)
    return value


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


def _probes(
    config: dict,
    fam: dict,
    task: dict,
    e: Expect,
    lengths: MeasuredLengths,
    steps: int,
    engine: str,
    rows: int,
) -> list[Generation]:
    """Each model's greedy probes over the run (none with ``eval_every: 0``)."""
    tr = config["train"]
    every = int(tr.get("eval_every") or 0)
    if not every:
        return []
    count = steps // every + 1 + (1 if steps % every else 0)
    problems = split_size(task, fam["name"], tr["eval_split"], lengths, tr.get("eval_problems"))
    cap = Count(e.max_new, f"cap ({GREEDY_LENGTH_NOTE}); {problems.source}")
    solve, n = e.solve_prompt.value, count * problems.value
    return [Generation(f"{m} probes", m, n, solve, cap, engine, rows, True) for m in "AB"]


def duel_workload(
    config: dict,
    agon: dict,
    fam: dict,
    task: dict,
    e: Expect,
    lengths: MeasuredLengths,
    method: str,
) -> Workload:
    """The duel of ``method`` (its ``agon`` section ``agon``, a variant's for an ablation)."""
    tr = config["train"]
    steps, p, g, k = tr["steps"], tr["problems_per_step"], tr["num_generations"], agon["num_reads"]
    engine, rows = tr["backend"], tr["rollout_batch_size"]
    name, task_name = fam["name"], task["name"]
    draft = {m: role_length(lengths, e, name, task_name, m, "drafter", method) for m in "AB"}
    read = {m: role_length(lengths, e, name, task_name, m, "reader", method) for m in "AB"}
    if agon["role_schedule"] == "both":
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
    w.generations += _probes(config, fam, task, e, lengths, steps, engine, rows)
    return w


def budget_steps(config: dict, reference: dict[str, float] | None, per_step: dict[str, float]):
    """(steps, note) of a budget-matched model matching ``reference`` at ``per_step``."""
    tr = config["train"]
    match, steps = tr["budget"]["match"], tr["steps"]
    cap = max(steps, math.ceil(tr["budget"]["max_steps_factor"] * steps))
    if match == "steps" or reference is None:
        return steps, f"budget: {steps} steps"
    key = "tokens" if match == "tokens" else "completions"
    need = math.ceil(reference[key] / per_step[key])
    if need > cap:
        return cap, f"budget: {match} of the agon run need {need} steps; capped at {cap}"
    return need, f"budget: {match} of the agon run, {need} steps"


def solo_workload(
    config: dict,
    fam: dict,
    task: dict,
    e: Expect,
    lengths: MeasuredLengths,
    method: str,
    reference: dict[str, dict[str, float]] | None,
) -> Workload:
    """A budget-matched method's run: each model alone, with its row's helpers' work."""
    tr = config["train"]
    p, g = tr["problems_per_step"], tr["num_generations"]
    row = method_row(method)
    if row.runs == "trl":
        engine = "vllm" if (config.get(TRL_SECTION) or {}).get("use_vllm") else "hf"
        rows = p * g  # TRL generates a step's P x G completions at once
    else:
        engine, rows = tr["backend"], tr["rollout_batch_size"]
    w = Workload()
    for m in ("A", "B"):
        sample = role_length(lengths, e, fam["name"], task["name"], m, "drafter", method)
        per = {"tokens": p * g * sample.value, "completions": p * g}
        steps, note = budget_steps(config, (reference or {}).get(m), per)
        n = steps * p * g
        w.steps[m] = steps
        w.notes.append(f"{m}: {note}")
        solve = e.solve_prompt.value
        w.generations.append(Generation(f"{m} samples", m, n, solve, sample, engine, rows))
        w.trainings.append(Training(f"{m} on its samples", m, n, solve, sample.value))
        w.spend[m] = {"steps": steps, "completions": n, "tokens": n * sample.value}
        for h in row.helpers or ():
            _helper(config, fam, e, method, h, m, w, steps, sample)
    if row.helpers is None:
        w.notes.append(f"no helper work declared for {method}: priced as GRPO")
    # every trainer probes (GRPO through a callback, on the duel's rollout engine)
    probe_steps = max(w.steps.values())
    w.generations += _probes(
        config, fam, task, e, lengths, probe_steps, tr["backend"], tr["rollout_batch_size"]
    )
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
    fam: dict,
    e: Expect,
    method: str,
    h: Helper,
    m: str,
    w: Workload,
    steps: float,
    sample: Count,
) -> None:
    """Helper ``h``'s work for model ``m`` over ``steps`` steps, and what it holds."""
    if h.when is not None and config_value(config, h.when[0]) != h.when[1]:
        return
    tr = config["train"]
    p, g, rows = tr["problems_per_step"], tr["num_generations"], tr["rollout_batch_size"]
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
        engine = h.engine or tr["backend"]
        w.generations.append(Generation(what, model, count, prompt, length, engine, rows, True))
    else:
        w.scorings.append(Scoring(what, model, count, prompt, length.value))
    if h.memory == "engine":  # one engine per model trained, even for one checkpoint
        w.residents.append(Resident(model, rows, int(prompt + length.value), True))
    elif h.memory == "weights" and (r := Resident(model, 1, 1, False)) not in w.residents:
        w.residents.append(r)
    if h.logits_chunk is not None:
        chunk = int(config_value(config, h.logits_chunk))
        t = Logits(f"{method}_logits", (g + 1) * fam["max_new_tokens"], chunk)
        if t not in w.logits:
            w.logits.append(t)


def eval_workload(
    config: dict,
    fam: dict,
    task: dict,
    e: Expect,
    lengths: MeasuredLengths,
    system: str,
) -> Workload:
    """An evaluation of column ``system`` on ``eval.backend``."""
    ev, col = config["eval"], COLUMNS[system]
    problems = split_size(task, fam["name"], ev["split"], lengths, ev.get("max_problems"))
    n = problems.value * ev["n_samples"]
    engine, rows = ev.get("backend", "hf"), ev["batch_size"]
    name, task_name = fam["name"], task["name"]
    final = eval_length(lengths, e, name, task_name, system, "completion")
    before = eval_length(lengths, e, name, task_name, system, "draft")
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
