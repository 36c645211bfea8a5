"""What the jobs of one plan share (:class:`PlanContext`), and one job's plan (:class:`JobPlan`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from agon.plan.dims import ModelDims
from agon.plan.errors import PlanError
from agon.plan.hardware import Efficiency, efficiency, get_gpu_kind, read_measurements
from agon.plan.hf_config import dims_from_config, load_dims
from agon.plan.jobs import Job
from agon.plan.lengths import MeasuredLengths
from agon.plan.placement import Memory


@dataclass
class JobPlan:
    """One job's plan."""

    job: Job
    resources: dict[str, int]
    tokens_generated: float = 0.0  # the policies' samples (rollouts, evaluation answers)
    tokens_helpers: float = 0.0  # probes' and teachers' generated tokens, counted apart
    tokens_trained: float = 0.0
    flops_generation: float = 0.0
    flops_training: float = 0.0
    memory: Memory | None = None
    seconds: float | None = 0.0
    gpu_hours: float = 0.0
    lengths: list[str] = field(default_factory=list)
    throughput: list[str] = field(default_factory=list)
    assumed: bool = False
    flags: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # said once for the plan (render.warnings)
    steps: dict[str, float] = field(default_factory=dict)
    phases: list[dict] = field(default_factory=list)


class PlanContext:
    """What the jobs of one plan share: config, GPU kind, lengths, measurements, dims."""

    def __init__(
        self,
        config: dict,
        gpu: str,
        lengths: MeasuredLengths,
        measurements_dir: str | Path | None,
    ) -> None:
        self.config = config
        self.kind = get_gpu_kind(gpu)
        self.lengths = lengths
        self.measurements = read_measurements(measurements_dir)
        self.families = {f["name"]: f for f in config["families"]}
        self.tasks = {t["name"]: t for t in config["tasks"]}
        self.references: dict[tuple[str, str], dict] = {}

    @cache  # noqa: B019 (one context per plan call; the cache dies with it)
    def dims(self, family: str, key: str, model: str | None = None) -> ModelDims:
        """Dims of a family's model ``key``: A, B or its teacher row; or of ``model``, a helper's
        model the config names (a method's section, agon.registry.Helper's ``model_key``)."""
        fam = self.families[family]
        row: dict = {}
        if model:
            pass
        elif key in ("A", "B"):
            row = fam[f"model_{key.lower()}"]
            model = row["model"]
        elif key == "teacher":
            row = fam.get("teacher") or {}
            model = row.get("model")
            if not model:
                raise PlanError(
                    f"families (name {family!r}): a method's helper runs the family's teacher "
                    "(agon.registry.Helper), and the family has no teacher row"
                )
        else:
            raise PlanError(f"families (name {family!r}): no model {key!r} (A, B or teacher)")
        built = (Path(model) / "config.json").is_file()
        if fam["toy"] and not built:
            return self.toy_dims(model)
        if "source" in row and not built:
            raise PlanError(
                f"model {model!r} is built from its GGUF checkpoint (the row's source) by the "
                "prepare_model rule; prepare it first (agon model prepare), then plan"
            )
        return load_dims(model)

    def toy_dims(self, name: str) -> ModelDims:
        """A toy model not built yet: its shape from the config's ``toy`` section."""
        toy = self.config["toy"]
        m = dict(toy["model"])
        return dims_from_config(
            {
                **m,
                "model_type": "qwen3",
                "vocab_size": toy["tokenizer"]["vocab_size"],
                "head_dim": m["hidden_size"] // m["num_attention_heads"],
                "tie_word_embeddings": True,
                "dtype": "float32",
            },
            name=name,
            source="the config's toy.model section (built by agon toy pretrain)",
        )

    @cache  # noqa: B019 (as above: one context per plan call)
    def efficiency(self, kind: str, engine: str, dims: ModelDims) -> Efficiency:
        """The efficiencies of ``dims`` on ``engine`` and GPU ``kind`` (agon.plan.hardware)."""
        return efficiency(kind, engine, dims, self.measurements)
