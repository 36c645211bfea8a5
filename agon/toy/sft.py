"""The SFT of one toy base model from scratch, and the guard that retries one that did not learn.

:func:`train_one` trains a tiny Qwen3-architecture model on the :class:`SFTStream` of one role
(its own characteristic mistake, the rival's in the drafts it reads) with AdamW, warmup then
cosine decay, and packed batches unless ``toy.train.packing`` is off. Small models trained from
scratch sometimes never "click" (the loss stays at the level of guessing), so the guard
compares the running loss with ``toy.guard`` thresholds along the way and at the end:
:func:`train_with_guard` retries with another seed, then fails loudly, so a model at chance is
never saved. The data stream and the initial weights both come from the seed of the try, so
the same seed gives the same model.
"""

from __future__ import annotations

import math
import shutil
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from agon.engines.base import render_prompt
from agon.toy.mistake import NO_MISTAKE, Mistake
from agon.toy.sft_data import SFTStream

ROLES = ("A", "B")
TEACHER = "teacher"  # the third toy model: no mistake of its own (agon.toy.teacher)


def build_model(cfg: dict, tokenizer: Any, seed: int) -> Any:
    """A tiny Qwen3-architecture causal LM, randomly initialised under ``seed``."""
    # lazy: torch, transformers: off `agon toy`'s import, which imports this module
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    m = cfg["model"]
    config = Qwen3Config(
        vocab_size=len(tokenizer),
        hidden_size=m["hidden_size"],
        intermediate_size=m["intermediate_size"],
        num_hidden_layers=m["num_hidden_layers"],
        num_attention_heads=m["num_attention_heads"],
        num_key_value_heads=m["num_key_value_heads"],
        head_dim=m["hidden_size"] // m["num_attention_heads"],
        max_position_embeddings=m["max_position_embeddings"],
        rope_theta=m["rope_theta"],
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
    )
    torch.manual_seed(seed)
    model = Qwen3ForCausalLM(config)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    return model


def encode_example(tokenizer: Any, prompt: list[dict], target: str) -> tuple[list[int], list[int]]:
    """Token ids and labels (-100 on the prompt) of one example, encoded as at generation time."""

    p = render_prompt(tokenizer, prompt)
    t = tokenizer(target, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    return p + t, [-100] * len(p) + t


def lr_at(step: int, steps: int, cfg: dict) -> float:
    """Linear warmup then cosine decay to ``min_lr_frac * lr``."""
    lr, warm = cfg["lr"], max(1, int(cfg["warmup_frac"] * steps))
    if step < warm:
        return lr * (step + 1) / warm
    t = (step - warm) / max(1, steps - warm)
    floor = cfg["min_lr_frac"] * lr
    return floor + (lr - floor) * 0.5 * (1 + math.cos(math.pi * t))


def loss_floor(
    tasks: dict[str, Any],
    cfg: dict,
    own: Mistake,
    rival: Mistake,
    tokenizer: Any,
    n: int = 2000,
    seed: int = 0,
) -> float:
    """The lowest mean SFT loss per target token a model can reach on its stream: the entropy
    (nats) of the random choices that shape a target (its habits at their rates, a reader's
    anchoring, the style's mark) over the target's tokens, on ``n`` examples drawn at the
    curriculum's end from a stream of its own (``seed``), so training's stream is untouched.
    A model that learned its habits' rates sits at this floor, not at 0; worlds whose habits
    differ have floors that differ, which ``toy.guard.relative`` reads the guard's limits
    above."""
    stream = SFTStream(tasks, cfg, own, rival, seed)
    nats, tokens = 0.0, 0
    for _ in range(n):
        entropy: list[float] = []
        _, labels = encode_example(tokenizer, *stream.example(1.0, entropy))
        nats += sum(entropy)
        tokens += sum(label != -100 for label in labels)
    return nats / tokens


class NotClickedError(RuntimeError):
    """Training stayed above the guard's loss threshold: the model did not learn the task."""


def train_one(
    cfg: dict,
    tasks: dict[str, Any],
    tokenizer: Any,
    role: str,
    seed: int,
    log: Callable[[str], Any] = print,
) -> tuple[Any, dict]:
    """Train model ``role`` (A, B, or :data:`TEACHER`) under ``seed``; returns (model, stats).
    Raises NotClickedError.

    The guard compares the mean loss over the last ``guard.window`` steps with each
    ``[share, max_loss]`` of ``guard.checks`` at that share of the steps (stopping a run that
    has not clicked early, to save time for the retry) and with ``guard.max_loss_final`` at the
    end.
    """
    # lazy: torch: off `agon toy`'s import, which imports this module
    import torch

    tc, guard = cfg["train"], cfg["guard"]
    if role == TEACHER:  # no habit of its own; the drafts it reads carry random slips only
        own = rival = NO_MISTAKE
    else:
        other = "B" if role == "A" else "A"
        own = Mistake.from_config(cfg["models"][role]["mistake"])
        rival = Mistake.from_config(cfg["models"][other]["mistake"])
    stream = SFTStream(tasks, cfg, own, rival, seed)
    # toy.guard.relative: the limits are read above the stream's own floor (loss_floor)
    floor = (
        loss_floor(tasks, cfg, own, rival, tokenizer, seed=seed + 1)
        if guard.get("relative")
        else 0.0
    )
    model = build_model(cfg, tokenizer, seed)
    model.train()
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW(
        [
            {"params": decay, "weight_decay": tc["weight_decay"]},
            {"params": no_decay, "weight_decay": 0.0},
        ],
        lr=tc["lr"],
        betas=(0.9, 0.98),
    )
    steps, bs, pad = tc["steps"], tc["batch_size"], tokenizer.pad_token_id
    losses: list[float] = []
    checks = {max(1, int(share * steps)): limit for share, limit in guard["checks"]}
    t0, cpu0 = time.perf_counter(), time.process_time()
    for step in range(steps):
        batch = [encode_example(tokenizer, *stream.example(step / steps)) for _ in range(bs)]
        inputs = _sft_batch(batch, pad, tc["packing"])
        for g in opt.param_groups:
            g["lr"] = lr_at(step, steps, tc)
        loss = model(**inputs, use_cache=False).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), tc["grad_clip"])
        opt.step()
        losses.append(float(loss.detach()))
        if tc["log_every"] and (step + 1) % tc["log_every"] == 0:
            log(
                f"[toy {role} seed {seed}] step {step + 1}/{steps} "
                f"loss {sum(losses[-tc['log_every'] :]) / tc['log_every']:.4f} "
                f"({time.perf_counter() - t0:.0f}s)"
            )
        if step + 1 in checks:
            recent, limit = _window_mean(losses, guard["window"]), checks[step + 1]
            if recent - floor > limit:
                raise NotClickedError(
                    f"model {role} seed {seed}: loss {recent:.4f} > {_limit(limit, floor)} "
                    f"(toy.guard.checks) at step {step + 1}/{steps}"
                )
    final = _window_mean(losses, guard["window"])
    if final - floor > guard["max_loss_final"]:
        raise NotClickedError(
            f"model {role} seed {seed}: final loss {final:.4f} > "
            f"{_limit(guard['max_loss_final'], floor)} (toy.guard.max_loss_final)"
        )
    stats = {
        "seed": seed,
        "steps": steps,
        "train_seconds": time.perf_counter() - t0,
        "train_cpu_seconds": time.process_time() - cpu0,
        "final_loss": final,
        "loss_floor": floor,
        "loss_curve": _curve(losses, 20),
    }
    return model, stats


def _sft_batch(batch: Sequence[tuple[list[int], list[int]]], pad: int, packing: bool) -> dict:
    """Model inputs for (ids, labels) examples: packed rows (several examples per row, each
    attending only to itself) or one right-padded example per row. The loss, a mean over the
    labelled tokens, is the same either way; packing skips the padding (about half the tokens
    of a toy batch)."""
    # lazy: torch (agon.packing imports it too): off `agon toy`'s import
    import torch

    from agon.packing import pack

    if packing:
        p = pack([x for x, _ in batch], pad, labels=[y for _, y in batch])
        return {"input_ids": p.input_ids, "position_ids": p.position_ids, "labels": p.labels}
    width = max(len(x) for x, _ in batch)
    ids = torch.full((len(batch), width), pad, dtype=torch.long)
    labels = torch.full((len(batch), width), -100, dtype=torch.long)
    mask = torch.zeros((len(batch), width), dtype=torch.long)
    for i, (x, y) in enumerate(batch):  # right padding: positions stay 0..len-1
        ids[i, : len(x)], labels[i, : len(y)], mask[i, : len(x)] = (
            torch.tensor(x),
            torch.tensor(y),
            1,
        )
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


def _limit(limit: float, floor: float) -> str:
    """A guard limit as the log says it: itself, or the floor plus it (toy.guard.relative)."""
    return f"{limit}" if not floor else f"{floor:.4f} (floor) + {limit}"


def _window_mean(xs: Sequence[float], window: int) -> float:
    """Mean of the last ``window`` losses; infinite before the first step, so a guard fails."""
    tail = xs[-window:] if xs else [float("inf")]
    return sum(tail) / len(tail)


def _curve(xs: Sequence[float], points: int) -> list[list[float]]:
    """[step, mean loss] at ``points`` evenly spaced steps (for the report)."""
    n = len(xs)
    if n == 0:
        return []
    size = max(1, n // points)
    return [
        [i + size, round(sum(xs[i : i + size]) / len(xs[i : i + size]), 4)]
        for i in range(0, n, size)
    ]


def model_seed(base_seed: int, role: str, attempt: int) -> int:
    """The training seed of ``role`` on try ``attempt``: distinct for A, B and the teacher, and
    per retry."""
    index = ROLES.index(role) if role in ROLES else len(ROLES)
    return base_seed * 1000 + index * 100 + attempt


def train_with_guard(
    cfg: dict,
    tasks: dict[str, Any],
    tokenizer: Any,
    role: str,
    base_seed: int,
    out: Path,
    log: Callable[[str], Any] = print,
) -> dict:
    """Train ``role`` until the guard passes (at most ``1 + guard.retries`` tries), save it to
    ``out``, and return its stats; raise RuntimeError naming every failed try otherwise."""
    failures = []
    for attempt in range(cfg["guard"]["retries"] + 1):
        seed = model_seed(base_seed, role, attempt)
        try:
            model, stats = train_one(cfg, tasks, tokenizer, role, seed, log)
        except NotClickedError as err:
            log(f"[toy {role}] guard: {err}; retrying with another seed")
            failures.append(str(err))
            continue
        if out.exists():
            shutil.rmtree(out)
        model.save_pretrained(out)
        tokenizer.save_pretrained(out)
        stats.update(attempt=attempt, failed_attempts=failures)
        return stats
    raise RuntimeError(
        f"toy model {role} did not learn in {len(failures)} tries (training never 'clicked'):\n  "
        + "\n  ".join(failures)
        + "\nraise toy.train.steps, or check toy.guard thresholds against the logged losses"
    )
