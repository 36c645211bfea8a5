"""The GRPO baseline: TRL's GRPOTrainer with the project's grader as its reward.

Nothing about GRPO is reimplemented here: this module only translates the config (the shared
``train`` section, the family row and the ``grpo`` section) into a ``GRPOConfig``, turns a task
into a prompt dataset, and wraps ``Task.grade`` as a TRL reward function. The reward is the
verifier's verdict through the same code path evaluation uses (1.0 correct, 0.0 wrong, None
when it cannot score, which TRL keeps out of the group baseline).

Metrics: TRL's logs of every step go to ``metrics.jsonl`` (and to TensorBoard / W&B through
``train.report_to``), with the duel trainer's names added (``A/drafter/correct``,
``A/entropy``, ...) so the report plots both methods from one schema. With
``train.eval_every`` > 0, the model is also evaluated on ``train.eval_split`` (by default the
hard problems of the validation split) at the duel trainer's steps and into the same keys
(``eval/hard_pass@1/A``; :mod:`agon.training.probe`).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import torch

from agon.engines import engine_options
from agon.engines.hf import HFEngine, load_model, load_tokenizer
from agon.provenance import atomic_write_text
from agon.registry import Trainer
from agon.tasks import task_from_config
from agon.tasks.base import Task
from agon.training import logbook
from agon.training import metrics as mk
from agon.training.budget import from_settings
from agon.training.checkpoint import save_model, truncate_jsonl
from agon.training.policy import adamw_class, distributed_info
from agon.training.probe import describe, hard_pass1, hard_problems, wrong_drafts
from agon.training.settings import TrainSettings, setting
from agon.training.shell import master_precision, run_summary
from baselines.grpo.data import make_reward_fn, prompt_dataset
from baselines.grpo.metrics import _metrics_callback

log = logging.getLogger("agon.grpo")


@dataclass
class GRPOSettings(TrainSettings):
    """The shared training settings plus the config's ``grpo`` section (and ``train.report_to``);
    each field maps to one ``GRPOConfig`` field in :meth:`grpo_config`."""

    report_to: list[str] = setting("train.report_to")  # tensorboard, wandb
    use_vllm: bool = setting("grpo.use_vllm")
    vllm_mode: str = setting("grpo.vllm_mode")  # colocate | server
    vllm_server_base_url: str | None = setting("grpo.vllm_server_base_url")
    extra: dict = setting("grpo.extra")  # any further GRPOConfig fields, as given

    SECTIONS: ClassVar[tuple[str, ...]] = ("grpo",)

    @classmethod
    def from_config(cls, config: dict, family: dict | None = None, seed: int = 0, **fixed: Any):
        """From a validated config; ``grpo.extra`` keys must be ``GRPOConfig`` fields."""
        bad = sorted(set((config.get("grpo") or {}).get("extra") or {}) - _grpo_config_fields())
        if bad:
            raise ValueError(f"grpo.extra: {bad} are not GRPOConfig fields")
        return super().from_config(config, family, seed=seed, **fixed)

    def batch_shape(self, world: int = 1) -> tuple[int, int]:
        """(per-device batch, gradient accumulation): one optimizer step sees P x G completions,
        over ``world`` processes together (each generates and trains on its 1/world of them)."""
        total = self.problems_per_step * self.num_generations
        if world > 1:
            if total % world:
                raise ValueError(
                    f"problems_per_step x num_generations = {total} completions per step do not "
                    f"split over {world} processes"
                )
            share = total // world
            per_device = min(share, self.micro_batch_size)
            while share % per_device:
                per_device -= 1
            return per_device, share // per_device
        per_device = min(total, self.micro_batch_size)
        # the micro-batch must split the step evenly and hold whole groups
        while total % per_device or per_device % self.num_generations:
            per_device -= 1
            if per_device < self.num_generations:
                return total, 1
        return per_device, total // per_device

    def grpo_config(
        self,
        output_dir: str | Path,
        bf16: bool = False,
        chat_template_kwargs: dict | None = None,
        max_steps: int | None = None,
    ) -> Any:
        """The TRL GRPOConfig of this run (``max_steps``: default ``steps``)."""
        # lazy: trl: off import baselines.grpo (agon train's checks; bench_paper_scale keeps trl
        # to its last phase)
        from trl import GRPOConfig

        per_device, accum = self.batch_shape(int(os.environ.get("WORLD_SIZE", "1")))
        kw = dict(
            output_dir=str(output_dir),
            max_steps=max_steps or self.steps,
            per_device_train_batch_size=per_device,
            gradient_accumulation_steps=accum,
            num_generations=self.num_generations,
            max_completion_length=self.max_new_tokens,
            learning_rate=self.learning_rate,
            weight_decay=self.weight_decay,
            lr_scheduler_type=self.lr_scheduler,
            warmup_steps=self.warmup_steps,
            max_grad_norm=self.max_grad_norm,
            loss_type=self.loss_type,
            beta=self.beta,
            use_bias_correction_kl=self.kl_ratio_correction,
            epsilon=self.epsilon,
            epsilon_high=self.epsilon_high,
            num_iterations=self.num_iterations,
            scale_rewards=self.scale_rewards,
            temperature=self.temperature,
            top_p=self.top_p,
            top_k=0,  # no top-k: the same sampling distribution as the duel trainer's engine
            disable_dropout=True,  # as the duel trainer
            use_vllm=self.use_vllm,
            vllm_mode=self.vllm_mode,
            vllm_server_base_url=self.vllm_server_base_url,
            chat_template_kwargs=chat_template_kwargs or None,
            bf16=bf16,
            use_cpu=not torch.cuda.is_available(),
            seed=self.seed,
            data_seed=self.seed,
            logging_steps=1,
            save_strategy="steps" if self.checkpoint_every else "no",
            save_steps=self.checkpoint_every or max_steps or self.steps,
            save_total_limit=self.keep_checkpoints or None,
            report_to=list(self.report_to) or "none",
            log_completions=False,
        )
        # transformers renamed gradient_checkpointing activation_checkpointing (the old name
        # warns, and goes in v6); pass whichever this version has
        fields = {f.name for f in dataclasses.fields(GRPOConfig)}
        name = "activation_checkpointing"
        kw[name if name in fields else "gradient_checkpointing"] = self.gradient_checkpointing
        kw.update(self.extra)
        return GRPOConfig(**kw)


def _grpo_config_fields() -> set[str]:

    # lazy: trl: off import baselines.grpo
    from trl import GRPOConfig

    return {f.name for f in dataclasses.fields(GRPOConfig)}


def train_grpo(
    config: dict,
    fam: dict,
    task: Task,
    settings: GRPOSettings,
    row: str,
    out_model: Path,
    work_dir: Path,
) -> Path:
    """Train the family's model ``row`` ("a" or "b") alone with GRPO; save it to ``out_model``.

    Checkpoints go to ``work_dir`` (TRL's own); a rerun resumes from the last one. Returns the
    model's own ``metrics.jsonl``.
    """
    # lazy: trl (baselines.grpo.zero_advantage imports it): off import baselines.grpo
    from baselines.grpo.zero_advantage import SkipZeroAdvantageGRPOTrainer

    name = row.upper()
    mrow = fam[f"model_{row}"]
    work_dir.mkdir(parents=True, exist_ok=True)
    tok = load_tokenizer(mrow["model"], revision=mrow.get("revision"))
    # train.master_dtype float32: an fp32 model (masters and AdamW's moments) whose forward and
    # backward TRL autocasts to bf16 (its bf16 mixed precision); else the family's dtype alone
    weights, autocast = master_precision(settings, fam["dtype"])
    if autocast not in (None, torch.bfloat16):
        raise ValueError(
            f"grpo: train.master_dtype {settings.master_dtype} autocasts to the family's dtype "
            f"through TRL's bf16 mixed precision; the family's dtype is {fam['dtype']}: set it "
            "to bfloat16, or train.master_dtype to null"
        )
    model = load_model(mrow["model"], dtype=weights, revision=mrow.get("revision"))
    bf16 = fam["dtype"] == "bfloat16" and (autocast is not None or torch.cuda.is_available())
    args = settings.grpo_config(
        work_dir,
        bf16=bf16,
        chat_template_kwargs=mrow.get("chat_template_kwargs"),
        max_steps=settings.model_steps(name),
    )
    dataset = prompt_dataset(task, settings.split, mrow.get("system_prompt"))
    metrics = work_dir / "metrics.jsonl"
    last = last_complete_checkpoint(work_dir)
    resumed_step = int(last.rsplit("-", 1)[1]) if last else 0
    shares = work_dir.parent.parent / "shares" / name  # which problems each process had
    for part in [metrics, *sorted(shares.glob("rank-*.jsonl"))]:
        truncate_jsonl(part, keep=lambda r: r.get(mk.STEP, -1) < resumed_step)
    per_step = settings.problems_per_step * settings.num_generations
    evaluate = _hard_eval(fam, task, settings, row, tok) if settings.eval_every else None
    budget = from_settings(settings)
    callback = _metrics_callback(metrics, name, per_step, evaluate, settings.eval_every, budget)
    trainer = SkipZeroAdvantageGRPOTrainer(
        model=model,
        reward_funcs=[make_reward_fn(task, task.problems(settings.split), shares)],
        args=args,
        train_dataset=dataset,
        processing_class=tok,
        callbacks=[callback],
    )
    # train.bf16_update on 16-bit weights: the Trainer builds that AdamW (its own parameter
    # groups, lr, betas and eps); plain, or float32 weights: TRL's own AdamW, as before
    adamw, extra = adamw_class(settings.bf16_update, {p.dtype for p in model.parameters()})
    if adamw is not torch.optim.AdamW:
        betas = (args.adam_beta1, args.adam_beta2)
        kwargs = {**extra, "lr": args.learning_rate, "betas": betas, "eps": args.adam_epsilon}
        trainer.optimizer_cls_and_kwargs = (adamw, kwargs)  # GRPOTrainer's init does not take it
    trainer.train(resume_from_checkpoint=last)
    save_model(trainer.model, tok, out_model)
    if trainer.accelerator.is_main_process:
        info = distributed_info(trainer.accelerator)
        (work_dir / "distributed.json").write_text(json.dumps(info))
    return metrics


def _hard_eval(
    fam: dict, task: Task, settings: GRPOSettings, row: str, tokenizer: Any
) -> Callable[[Any], dict]:
    """model -> its greedy pass@1 on ``train.eval_split`` (``eval/hard_pass@1/NAME``), as the
    duel trainer probes it: the same engine as the duel's rollouts (the live model, the row's
    persona and chat-template kwargs), so both methods are scored alike."""
    options = engine_options(fam[f"model_{row}"], fam)
    problems = hard_problems(task, settings.eval_problems, settings.eval_split)
    wrong = wrong_drafts(task, problems)  # the same robustness probe as the duel's

    def evaluate(model: Any) -> dict:
        engine = HFEngine(model, tokenizer, batch_size=settings.rollout_batch_size, **options)
        m = hard_pass1(
            {row.upper(): engine},
            task,
            problems,
            settings.max_new_tokens,
            models=[model],
            wrong=wrong,
        )
        print(f"[grpo {row.upper()}] {settings.eval_split} pass@1: {describe(m)}", flush=True)
        return m

    return evaluate


def train_pair(config: dict, fam: dict, task_name: str, settings: GRPOSettings, out: Path) -> dict:
    """`agon train --method grpo`: A and B each trained alone with GRPO (for the ``grpo`` and
    ``grpo_cascade`` columns); one merged ``metrics.jsonl``; the summary payload."""

    task = task_from_config(config, task_name)
    paths = []
    try:
        for row in ("a", "b"):
            name = row.upper()
            work = out / "checkpoints" / f"grpo_{name}"
            paths.append(train_grpo(config, fam, task, settings, row, out / name, work))
    finally:
        task.close()
    distributed = json.loads((out / "checkpoints" / "grpo_A" / "distributed.json").read_text())
    rows = logbook.merge_metrics(paths)
    atomic_write_text(out / "metrics.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    return run_summary(out, settings) | {"distributed": distributed}


# what a checkpoint the Trainer finished saving holds (it writes trainer_state.json after the
# weights and the optimizer); a folder without them was cut short (a kill, a full disk)
COMPLETE_CHECKPOINT = ("trainer_state.json", "optimizer.pt")
WEIGHTS = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin")


def last_complete_checkpoint(work_dir: Path) -> str | None:
    """The newest ``checkpoint-N`` under ``work_dir`` that the Trainer finished writing, or None.

    ``transformers``' ``get_last_checkpoint`` takes the newest folder by name, so a run killed
    while saving (or on a full disk) resumes from a folder without weights and fails ("Can't
    find a valid checkpoint"); the folders newer than the complete one are removed, so the
    resumed run writes them again whole."""
    if not work_dir.is_dir():
        return None
    found = sorted(
        (int(m[1]), d)
        for d in work_dir.iterdir()
        if d.is_dir() and (m := re.fullmatch(r"checkpoint-(\d+)", d.name))
    )
    for _, d in reversed(found):
        files = {f.name for f in d.iterdir()}
        if set(COMPLETE_CHECKPOINT) <= files and files & set(WEIGHTS):
            return str(d)
        log.warning("checkpoint %s was not finished (a killed save); writing it again", d)
        shutil.rmtree(d)
    return None


TRAINER = Trainer("grpo", GRPOSettings, train_pair)
