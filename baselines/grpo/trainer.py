# long: the GRPO baseline whole: its settings, one model's TRL run, and where each model runs
"""The GRPO baseline: TRL's GRPOTrainer with the project's grader as its reward.

Nothing about GRPO is reimplemented here: this module only translates the config (the shared
``train`` section, the family row and the ``grpo`` section) into a ``GRPOConfig``, turns a task
into a prompt dataset, and wraps ``Task.grade`` as a TRL reward function. The reward is the
verifier's verdict through the same code path evaluation uses (1.0 correct, 0.0 wrong, None
when it cannot score, which TRL keeps out of the group baseline).

Where each model trains is :func:`agon.engines.placement.place`'s ``trl`` placement: on GPUs,
each model in a process of its own that sees one GPU (``CUDA_VISIBLE_DEVICES``), A and B at
once on two GPUs, one after the other on one. One process seeing several GPUs would have
transformers' Trainer wrap the model in ``nn.DataParallel``, which TRL's GRPOTrainer refuses;
and a process holds one colocated vLLM (TRL's colocate mode), torn down when the process exits.
Under ``accelerate launch`` the ranks train A, then B, themselves (A's engine torn down first,
:func:`release_engine`); on the CPU, one process trains A, then B, as it always has. The
colocated engine takes each update through vLLM's in-place reload
(:func:`agon.engines.vllm.reload_in_place`): TRL's own tensor-by-tensor load fails where vLLM
has repacked a layer for its kernels (every linear layer of its CPU build).

Metrics: TRL's logs of every step go to ``metrics.jsonl`` (and to TensorBoard / W&B through
``train.report_to``), with the duel trainer's names added (``A/drafter/correct``,
``A/entropy``, ...) so the report plots both methods from one schema. With
``train.eval_every`` > 0, the model is also evaluated on ``train.eval_split`` (by default the
hard problems of the validation split) at the duel trainer's steps and into the same keys
(``eval/hard_pass@1/A``; :mod:`agon.training.probe`).
"""

from __future__ import annotations

import dataclasses
import gc
import json
import logging
import multiprocessing
import os
import re
import shutil
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import torch

from agon.engines import engine_options
from agon.engines.hf import HFEngine, load_model, load_tokenizer
from agon.engines.placement import POLICIES, Placement, place, visible_gpus
from agon.engines.vllm import reload_in_place
from agon.provenance import atomic_write_text
from agon.registry import Trainer
from agon.tasks import task_from_config
from agon.tasks.base import Task
from agon.training import logbook
from agon.training import metrics as mk
from agon.training.budget import from_settings
from agon.training.checkpoint import truncate_jsonl
from agon.training.policy import adamw_class, distributed_info
from agon.training.probe import describe, hard_pass1, hard_problems, wrong_drafts
from agon.training.settings import TrainSettings, setting
from agon.training.shell import master_precision, run_summary, save_final
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
    if settings.use_vllm and settings.vllm_mode == "colocate":
        reload_in_place(trainer.vllm_generation)
    # train.bf16_update on 16-bit weights: the Trainer builds that AdamW (its own parameter
    # groups, lr, betas and eps); plain, or float32 weights: TRL's own AdamW, as before
    adamw, extra = adamw_class(settings.bf16_update, {p.dtype for p in model.parameters()})
    if adamw is not torch.optim.AdamW:
        betas = (args.adam_beta1, args.adam_beta2)
        kwargs = {**extra, "lr": args.learning_rate, "betas": betas, "eps": args.adam_epsilon}
        trainer.optimizer_cls_and_kwargs = (adamw, kwargs)  # GRPOTrainer's init does not take it
    trainer.train(resume_from_checkpoint=last)
    # every rank gets here; under several processes rank 0 alone writes the folder
    acc = trainer.accelerator
    save_final(trainer.model, tok, out_model, acc if acc.num_processes > 1 else None)
    if trainer.accelerator.is_main_process:
        info = distributed_info(trainer.accelerator)
        (work_dir / "distributed.json").write_text(json.dumps(info))
    release_engine(trainer)
    return metrics


def release_engine(trainer: Any) -> None:
    """Tear down ``trainer``'s colocated vLLM (TRL's colocate mode) and free what it held, so
    that the next model's engine in this process starts on an empty GPU: vLLM keeps its model
    parallel groups in module state, which a second ``LLM`` would find taken. The process's
    own distributed group (accelerate's) is left alone."""
    generation = getattr(trainer, "vllm_generation", None)
    if getattr(generation, "llm", None) is not None:
        generation.llm = None
        try:
            # lazy: vllm: the GPU-only optional extra; only a colocated TRL engine has groups
            from vllm.distributed.parallel_state import destroy_model_parallel
        except ImportError:
            pass
        else:
            destroy_model_parallel()
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


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
    ``grpo_cascade`` columns), where :func:`grpo_placement` puts them; one merged
    ``metrics.jsonl``; the summary payload."""
    where = grpo_placement(settings)
    waves = launch_waves(where)
    if waves:  # on GPUs, in one launch: each model in a process of its own
        paths = train_apart(config, fam, task_name, settings, out, waves)
    else:
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


def grpo_placement(settings: GRPOSettings) -> Placement:
    """Where this process's GRPO run puts each model (:func:`agon.engines.placement.place`):
    the GPUs it sees, TRL's engine (vLLM, colocated or a server; or transformers), and the
    launcher's processes."""
    url = settings.vllm_server_base_url if settings.vllm_mode == "server" else None
    return place(
        "trl",
        "vllm" if settings.use_vllm else "hf",
        torch.cuda.device_count(),  # NVML's count: no CUDA context in this process
        servers={m: url for m in POLICIES},
        processes=int(os.environ.get("WORLD_SIZE", "1")),
    )


def launch_waves(where: Placement) -> list[list[tuple[str, str]]]:
    """The (model row, physical GPU) pairs trained together, wave after wave, when the
    placement gives each model a process of its own; ``[]`` when this process trains them
    itself (the CPU, or the ranks of a launcher)."""
    apart = [p for p in where.parts if p.kind == "policy" and p.process == p.model]
    if not apart:
        return []
    physical = visible_gpus(count=where.gpus)
    pairs = [(p.model.lower(), physical[p.gpu]) for p in apart]
    return [pairs] if where.at_once else [[pair] for pair in pairs]


def train_apart(
    config: dict,
    fam: dict,
    task_name: str,
    settings: GRPOSettings,
    out: Path,
    waves: list[list[tuple[str, str]]],
) -> list[Path]:
    """Train each model of each wave in a spawned process of its own that sees only its GPU;
    the models' ``metrics.jsonl``, A's first. A model that fails stops the others of its wave
    (they resume from their checkpoints on the next run) and raises with its traceback."""
    spawn = multiprocessing.get_context("spawn")  # a fresh interpreter: no CUDA state inherited
    paths: dict[str, Path] = {}
    for wave in waves:
        running = {}
        for row, gpu in wave:
            parent, child = spawn.Pipe(duplex=False)
            work = out / "checkpoints" / f"grpo_{row.upper()}"
            args = (child, gpu, config, fam, task_name, settings, row, out / row.upper(), work)
            proc = spawn.Process(target=_train_alone, args=args, name=f"grpo-{row.upper()}")
            proc.start()
            child.close()
            running[row] = (proc, parent)
        done = False
        try:
            for row, (proc, conn) in running.items():
                try:
                    ok, value = conn.recv()
                except EOFError:  # it died before it could say why (killed, out of memory)
                    proc.join()
                    ok, value = False, f"its process ended (exit {proc.exitcode})"
                if not ok:
                    raise RuntimeError(f"grpo: training model {row.upper()} failed:\n{value}")
                paths[row] = Path(value)
            done = True
        finally:
            for proc, _ in running.values():
                if not done and proc.is_alive():  # one failed: stop the rest of the wave
                    proc.terminate()
                proc.join()
    return [paths[row] for row in ("a", "b")]


def _train_alone(
    conn: Any,
    gpu: str,
    config: dict,
    fam: dict,
    task_name: str,
    settings: GRPOSettings,
    row: str,
    out_model: Path,
    work_dir: Path,
) -> None:
    """A spawned process's work: see only GPU ``gpu`` (set before anything starts CUDA here),
    train model ``row`` (:func:`train_grpo`), send back its metrics path or the traceback."""
    os.environ["CUDA_VISIBLE_DEVICES"] = gpu
    print(f"[grpo {row.upper()}] training on GPU {gpu}, in a process of its own", flush=True)
    try:
        task = task_from_config(config, task_name)
        try:
            metrics = train_grpo(config, fam, task, settings, row, out_model, work_dir)
        finally:
            task.close()
    except BaseException:
        conn.send((False, traceback.format_exc()))
        raise
    conn.send((True, str(metrics)))


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
