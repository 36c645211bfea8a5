"""Load and validate an agon config.

One function, :func:`load_config`, used by the Snakefile (when the DAG is built) and by every
CLI entry point, so a bad family row fails before any job starts, with a message that names
the row, the field and what was expected.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import platform
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from jsonschema import Draft202012Validator, validators

from agon.methods import METHODS, RELATED_DEFAULT, TABLE1_METHODS
from agon.tasks import TaskParamsError, available_tasks, check_task_params

SCHEMA_PATH = Path(__file__).with_name("schemas") / "config.schema.yaml"


class ConfigError(ValueError):
    """A config that does not match the schema; the message says where and why."""


@functools.cache
def config_schema() -> dict:
    """The config's JSON schema, parsed once per process (with libyaml where it is there), with
    the method names of ``methods`` and ``related.methods`` and the default of
    ``related.methods`` filled in from the registry (:mod:`agon.methods`), their one home. The
    one reader of :data:`SCHEMA_PATH`: validation here and every settings field's default and
    range (:mod:`agon.training.settings`) read this copy; treat it as read-only."""
    with open(SCHEMA_PATH) as f:
        schema = yaml.load(f, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    props = schema["properties"]
    props["methods"]["items"]["enum"] = list(TABLE1_METHODS)
    related = props["related"]["properties"]["methods"]
    related["items"]["enum"] = list(METHODS)
    related["default"] = list(RELATED_DEFAULT)
    return schema


def _validator_with_defaults(schema: dict):
    """A Draft 2020-12 validator that also fills in each property's `default`."""

    base_props = Draft202012Validator.VALIDATORS["properties"]

    def set_defaults(validator, properties, instance, schema):
        if isinstance(instance, dict):
            for name, sub in properties.items():
                if isinstance(sub, Mapping) and "default" in sub and name not in instance:
                    instance[name] = copy.deepcopy(sub["default"])
        yield from base_props(validator, properties, instance, schema)

    cls = validators.extend(Draft202012Validator, {"properties": set_defaults})
    return cls(schema)


def _describe(error, config: dict) -> str:
    """Turn a jsonschema error into 'families[1] (name 'qwen3'): field 'model_a.model': ...'."""
    path = list(error.absolute_path)
    where = "config"
    rest = path
    if len(path) >= 2 and isinstance(path[1], int):
        section, index = path[0], path[1]
        where = f"{section}[{index}]"
        row = config.get(section, [None] * (index + 1))[index]
        if isinstance(row, dict) and "name" in row:
            where += f" (name {row['name']!r})"
        rest = path[2:]
    # a missing property is reported on the parent; name the field itself
    if error.validator == "required":
        # jsonschema reports each missing property as an error of its own; name that one
        missing = [p for p in error.validator_value if p not in (error.instance or {})]
        named = [p for p in missing if error.message.startswith(repr(p))]
        rest = rest + (named or missing)[:1]
        expected = "a value (required field is missing)"
    elif error.validator == "additionalProperties":
        extra = sorted(set(error.instance) - set(error.schema.get("properties", {})))
        rest = rest + extra[:1]
        expected = f"no such field; allowed: {sorted(error.schema.get('properties', {}))}"
    elif error.validator == "enum":
        expected = f"one of {error.validator_value}"
    elif error.validator == "type":
        expected = f"type {error.validator_value}, got {type(error.instance).__name__}"
    else:
        expected = error.message
    field = ".".join(str(p) for p in rest) or "(whole section)"
    got = (
        ""
        if error.validator in ("required", "additionalProperties")
        else f" (got {error.instance!r:.80})"
    )
    return f"{where}: field {field!r}: expected {expected}{got}"


def validate_config(config: dict) -> dict:
    """Validate ``config`` in place against the schema, fill defaults, and return it.

    Raises :class:`ConfigError` listing every problem found.
    """
    validator = _validator_with_defaults(config_schema())
    errors = sorted(validator.iter_errors(config), key=lambda e: list(map(str, e.absolute_path)))
    if errors:
        problems = list(dict.fromkeys(_describe(e, config) for e in errors))  # each once
        lines = "\n  ".join(problems)
        raise ConfigError(f"invalid config ({len(problems)} problem(s)):\n  {lines}")
    _check_semantics(config)
    return config


def _check_semantics(config: dict) -> None:
    """Checks JSON Schema cannot express: unique names, k <= n, registered tasks."""
    problems = []
    for section in ("families", "tasks"):
        names = [row["name"] for row in config[section]]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            problems.append(f"{section}: names must be unique, repeated: {dup}")
    ev = config["eval"]
    bad_k = [k for k in ev["k"] if k > ev["n_samples"]]
    if bad_k:
        problems.append(
            f"eval: field 'k': expected values <= n_samples={ev['n_samples']}, got {bad_k}"
        )

    known = available_tasks()
    for i, row in enumerate(config["tasks"]):
        if row["name"] not in known:
            problems.append(
                f"tasks[{i}] (name {row['name']!r}): field 'name': expected one of {known}"
            )
        else:
            try:
                check_task_params(row["name"], row["params"])
            except TaskParamsError as err:
                problems += [f"tasks[{i}] (name {row['name']!r}): {p}" for p in err.problems]
    problems += _ablation_problems(config)
    if problems:
        raise ConfigError("invalid config:\n  " + "\n  ".join(problems))


def _ablation_problems(config: dict) -> list[str]:
    """Each ablation variant's agon section (the config's, with its changes) must be valid."""
    variants = (config.get("ablations") or {}).get("variants") or []
    names = [v["name"] for v in variants]
    repeated = sorted({n for n in names if names.count(n) > 1})
    out = [f"ablations.variants: names must be unique, repeated: {repeated}"] if repeated else []
    reference = (config.get("ablations") or {}).get("reference")
    if reference is not None and reference not in names:
        out.append(f"ablations.reference: {reference!r} is not a variant; variants: {names}")
    schema = config_schema()["properties"]["agon"]
    for i, v in enumerate(variants):
        section = deep_merge(config.get("agon") or {}, v.get("agon") or {})
        validator = _validator_with_defaults(schema)
        for err in validator.iter_errors(section):
            where = ".".join(str(p) for p in err.absolute_path) or "(whole section)"
            out.append(
                f"ablations.variants[{i}] (name {v['name']!r}): agon field {where!r}: {err.message}"
            )
    return out


CONTROL_FAMILY = "control"  # the family row of the positive control's base models


CONTROL_ARMS = ("drafter", "curriculum")  # arm 1 (results/control.csv) and arm 2
CONTROL_KEPT = ("out_dir", "figures_dir", "cpu_kernels", "grading", "resources")  # not the world


CONTROL_DIRECTIONS = {"AB": ("a", "b"), "BA": ("b", "a")}  # direction -> (drafter, reader) rows


def control_stage(config: dict, stage: str) -> tuple[str | None, float | None]:
    """(scheme, learning rate) of a control stage: ``base`` (none), a scheme (the section's
    rate), or ``lr{i}``: independent at the pilot's i-th learning rate."""
    if stage == "base":
        return None, None
    if stage.startswith("lr") and stage[2:].isdigit():
        rates = config["control"]["pilot"]["learning_rates"]
        i = int(stage[2:])
        if i >= len(rates):
            raise ConfigError(f"control.pilot.learning_rates has no entry {i}: {rates}")
        return "independent", float(rates[i])
    return stage, None


def control_config(
    config: dict,
    models: str,
    scheme: str | None = None,
    arm: str = "drafter",
    learning_rate: float | None = None,
) -> dict:
    """The config the positive control's jobs run with: the ``control`` section's own task,
    family, toy, train, agon and eval over the schema's defaults (arm ``curriculum``: with its
    changes merged in), one family ``control`` whose models are ``{models}/A`` and
    ``{models}/B``, and of the rest only what is not the world (where results go, the CPU
    kernels, grading, resources). Table 1's sections never reach it, so changing table 1's world
    leaves the control as it was. A scheme's runs get ``agon.reward.scheme``; ``learning_rate``
    replaces ``train.learning_rate`` (the pilot's sweep). Validated as a whole config."""
    if arm not in CONTROL_ARMS:
        raise ConfigError(f"control: no arm {arm!r}; arms: {list(CONTROL_ARMS)}")
    ctl = config["control"]
    sections = {s: copy.deepcopy(ctl.get(s) or {}) for s in ("toy", "train", "agon", "eval")}
    if arm == "curriculum":
        changes = ctl.get("curriculum") or {}
        sections = {s: deep_merge(v, changes.get(s) or {}) for s, v in sections.items()}
    fam = {**copy.deepcopy(ctl["family"]), "name": CONTROL_FAMILY, "toy": True}
    fam |= {f"model_{r}": {"model": f"{models}/{r.upper()}"} for r in ("a", "b")}
    out = {k: copy.deepcopy(config[k]) for k in CONTROL_KEPT if k in config}
    out |= {"families": [fam], "tasks": [copy.deepcopy(ctl["task"])], "methods": ["agon"]}
    out |= sections
    if scheme is not None:
        out["agon"] = deep_merge(out["agon"], {"reward": {"scheme": scheme}})
    if learning_rate is not None:
        out["train"]["learning_rate"] = float(learning_rate)
    try:
        return validate_config(out)
    except ConfigError as err:
        raise ConfigError(f"control ({arm}): {err}") from None


def ablation_config(config: dict, variant: str) -> dict:
    """``config`` with the ``agon`` changes of ablation variant ``variant`` merged in."""
    for v in (config.get("ablations") or {}).get("variants") or []:
        if v["name"] == variant:
            return deep_merge(config, {"agon": v.get("agon") or {}})
    known = [v["name"] for v in (config.get("ablations") or {}).get("variants") or []]
    raise ConfigError(f"no ablation variant {variant!r} in config; known: {known}")


def regime_section(config: dict) -> dict:
    """The config's ``regime`` section with the schema's defaults filled in, or those defaults
    alone where it has none: the schema fills no section default for it, so a world without one
    (the positive control's) keeps its snapshots as they were (agon/regime.py)."""
    section = copy.deepcopy(config.get("regime") or {})
    validator = _validator_with_defaults(config_schema()["properties"]["regime"])
    errors = [e.message for e in validator.iter_errors(section)]
    if errors:
        raise ConfigError(f"regime: {'; '.join(errors)}")
    return section


def load_config(path: str | Path, overrides: dict | None = None) -> dict:
    """Read a YAML config, apply ``overrides`` (a nested dict, merged), validate and return it."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file not found: {path}")
    with open(path) as f:
        config = yaml.safe_load(f) or {}
    if not isinstance(config, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level")
    if overrides:
        config = deep_merge(config, overrides)
    try:
        return validate_config(config)
    except ConfigError as err:
        raise ConfigError(f"{path}: {err}") from None


def deep_merge(base: dict, extra: Mapping) -> dict:
    """Return ``base`` with ``extra`` merged in recursively (lists and scalars replaced)."""
    out = copy.deepcopy(base)
    for key, value in extra.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def config_value(config: Mapping, key: str) -> Any:
    """The value of dotted config key ``key`` (``"train.budget.match"``) in ``config``; None
    where it is absent."""
    value: Any = config
    for part in key.split("."):
        if not isinstance(value, Mapping):
            return None
        value = value.get(part)
    return value


def config_hash(config: Any) -> str:
    """A short, stable content hash of any JSON-able config fragment."""
    blob = json.dumps(config, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


# `cpu_kernels`: the environment that pins torch's, MKL's and oneDNN's CPU kernels to one
# instruction set on x86-64, so that every machine of the architecture computes the same sums
KERNEL_ENV = {
    "default": {
        "ATEN_CPU_CAPABILITY": "default",
        "MKL_CBWR": "COMPATIBLE",
        "ONEDNN_MAX_CPU_ISA": "SSE41",
    },
    "avx2": {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"},
    "avx512": {
        "ATEN_CPU_CAPABILITY": "avx512",
        "MKL_CBWR": "AVX512",
        "ONEDNN_MAX_CPU_ISA": "AVX512_CORE",
    },
}
X86_64 = ("x86_64", "amd64")  # platform.machine() of the architectures the pin applies to


def kernel_env(config: dict, machine: str | None = None) -> dict[str, str]:
    """The environment variables that pin the CPU kernels to the config's ``cpu_kernels`` on
    this machine (``machine``: ``platform.machine()``); none when it is null or the machine
    is not x86-64, where these instruction sets do not exist."""
    kernels = config.get("cpu_kernels")
    machine = (machine or platform.machine()).lower()
    if kernels is None or machine not in X86_64:
        return {}
    return dict(KERNEL_ENV[kernels])


MODEL_ROWS = ("model_a", "model_b", "teacher")  # a family's rows that name a model
SEED_FIELD = "{seed}"  # in a row's model path: the base models of each training seed


def get_family(config: dict, name: str, seed: int | None = None) -> dict:
    """The family row called ``name``; a clear error if there is none. With ``seed``, a copy
    whose model paths have ``{seed}`` filled in: a family whose base models depend on the
    training seed (the toy world pretrains a pair per seed) names them ``.../seed{seed}/A``."""
    for row in config["families"]:
        if row["name"] == name:
            return row if seed is None else family_for_seed(row, seed)
    raise ConfigError(
        f"no family {name!r} in config; known: {[r['name'] for r in config['families']]}"
    )


def seeded_bases(family: dict) -> bool:
    """Whether the family's base models depend on the training seed (``{seed}`` in a path)."""
    return any(SEED_FIELD in str((family.get(k) or {}).get("model", "")) for k in MODEL_ROWS)


def family_for_seed(family: dict, seed: int) -> dict:
    """A copy of ``family`` with ``{seed}`` in its model paths replaced by ``seed``."""
    out = copy.deepcopy(family)
    for k in MODEL_ROWS:
        if out.get(k) and SEED_FIELD in str(out[k].get("model", "")):
            out[k]["model"] = out[k]["model"].replace(SEED_FIELD, str(int(seed)))
    return out


def get_task_row(config: dict, name: str) -> dict:
    """The task row called ``name``; a clear error if there is none."""
    for row in config["tasks"]:
        if row["name"] == name:
            return row
    raise ConfigError(f"no task {name!r} in config; known: {[r['name'] for r in config['tasks']]}")
