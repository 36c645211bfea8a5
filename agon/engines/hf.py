# long: one backend whole: batches, seeded per-row sampling, logprobs and hidden states of a call.
"""The transformers backend: batched ``generate`` on CPU or GPU.

Prompts are rendered with the family's chat template (:func:`agon.engines.base.render_prompt`),
left-padded into batches of ``batch_size`` rows (``n`` samples of a prompt are ``n`` rows), and
decoded with the KV cache by ``model.generate``. Rows are sorted by prompt length before
batching so that little compute goes to padding; results come back in the caller's order.

Sampling (temperature, top-p) is done by one logits processor of ours rather than by
``generate``'s warpers, so the same processor can record each sampled token's logprob, under the
raw or the processed distribution, without keeping ``steps x batch x vocab`` logits in memory.
The checkpoint's own ``generation_config`` (e.g. Qwen3's ``top_k=20``) is deliberately NOT
applied: every sampling knob comes from :class:`SamplingParams`, so both backends sample the
same distribution.

Seeded sampling: with ``SamplingParams.seed`` set, batch ``i`` is drawn under
``torch.manual_seed(seed + i)`` inside a forked RNG, so the caller's global RNG is untouched and
the same prompts, ``n`` and ``batch_size`` give the same samples. With
``SamplingParams.prompt_seeds``, every row (sample ``j`` of prompt ``i``) draws its tokens from
a generator of its own, seeded from ``(prompt_seeds[i], j)``, by inverse-CDF on the processed
distribution; ``generate`` is then handed that one token. A prompt's samples are then the same
whatever else shares its batch (up to the float rounding of padded batches).

Hidden states: inside ``with engine.recording_hidden_states() as hidden:``, every ``generate``
call also keeps, for each completion, the final hidden states (the LM head's input, after the
final norm) that predicted its tokens, ``hidden.of(completion)``: what GAR's LM-head gradient is
made of (``baselines/gar``), taken from the forward that sampled the tokens instead of a second
one. Recording reads the head's input and changes nothing the model computes.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig, LogitsProcessorList

from agon.engines.base import (
    Completion,
    Messages,
    SamplingParams,
    TemplatedEngine,
)

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def hub_offline() -> bool:
    """True when ``HF_HUB_OFFLINE`` (or the older ``TRANSFORMERS_OFFLINE``) asks for no network."""
    return any(
        os.environ.get(v, "").strip().lower() in ("1", "true", "yes", "on")
        for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    )


def resolve_dtype(dtype: str | torch.dtype) -> Any:
    """A torch dtype (or ``"auto"``: the checkpoint's own) from a config string."""
    if isinstance(dtype, torch.dtype) or dtype == "auto":
        return dtype
    if dtype not in DTYPES:
        raise ValueError(f"unknown dtype {dtype!r}; expected one of {sorted(DTYPES)} or 'auto'")
    return DTYPES[dtype]


def load_tokenizer(name_or_path: str | Path, revision: str | None = None) -> Any:
    """Load a tokenizer from a hub id or local folder, offline when ``HF_HUB_OFFLINE`` is set."""
    try:
        return AutoTokenizer.from_pretrained(
            str(name_or_path), revision=revision, local_files_only=hub_offline()
        )
    except OSError as err:
        raise OSError(
            f"cannot load tokenizer {name_or_path!r} (offline={hub_offline()}): {err}"
        ) from err


def load_model(
    name_or_path: str | Path,
    dtype: str | torch.dtype = "auto",
    device: str | torch.device | None = None,
    revision: str | None = None,
) -> Any:
    """Load a causal LM from a hub id or local folder, offline when ``HF_HUB_OFFLINE`` is set.
    Hub kernels stay off: by default transformers 5 fetches them on a GPU at ``train()``/``eval()``
    (offline that fails; online the numbers follow whatever the Hub serves that day)."""
    try:
        model = AutoModelForCausalLM.from_pretrained(
            str(name_or_path),
            dtype=resolve_dtype(dtype),
            revision=revision,
            local_files_only=hub_offline(),
            use_kernels=False,
        )
    except OSError as err:
        raise OSError(
            f"cannot load model {name_or_path!r} (offline={hub_offline()}): {err}"
        ) from err
    return model.to(device or default_device())


def default_device() -> torch.device:
    """The first GPU when there is one, else the CPU."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


class _SampleAndRecord:
    """Logits processor: applies temperature / top-p and records the sampled tokens' logprobs.

    ``generate`` calls it once per step with the sequence so far; the last column of
    ``input_ids`` is the token sampled from the previous step's distribution, so its logprob is
    gathered one step late from the one stored distribution (``batch x vocab``). The last
    token's logprob is gathered by :meth:`finish`.
    """

    def __init__(self, sampling: SamplingParams, row_seeds: list[int] | None = None):
        self.sampling = sampling
        self.prev: torch.Tensor | None = None  # log-distribution of the previous step
        self.logprobs: list[torch.Tensor] = []  # one (batch,) tensor per generated token
        self.uniforms: torch.Tensor | None = None  # (rows, max_new_tokens): each row's draws
        self.step = 0
        if row_seeds is not None and not sampling.greedy:
            # a row draws one float32 uniform per step from its own generator: all of them at
            # once, the same numbers (the CPU generator fills a tensor one value at a time, in
            # order), without a call per row and step
            self.uniforms = torch.stack(
                [
                    torch.rand(
                        sampling.max_new_tokens,
                        generator=torch.Generator().manual_seed(x),
                        dtype=torch.float32,
                    )
                    for x in row_seeds
                ]
            )

    @property
    def picks(self) -> bool:
        """Whether the processor picks each row's token itself (every other score -inf)."""
        return self.uniforms is not None

    def _gather(self, tokens: torch.Tensor) -> None:
        if self.prev is not None:  # kept on the device: one copy at the end, not one per step
            self.logprobs.append(self.prev.gather(1, tokens[:, None]).squeeze(1).float())

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        self._gather(input_ids[:, -1])
        scores = scores.float()
        s = self.sampling
        if s.logprobs == "raw":
            self.prev = torch.log_softmax(scores, dim=-1)
        if not s.greedy:
            if s.temperature != 1.0:
                scores = scores / s.temperature
            if s.top_p < 1.0:
                scores = _top_p_mask(scores, s.top_p)
        if s.logprobs != "raw":
            self.prev = torch.log_softmax(scores, dim=-1)
        if self.uniforms is not None:
            return self._sample_rows(scores)
        return scores

    def _sample_rows(self, scores: torch.Tensor) -> torch.Tensor:
        """Draw each row's token from its own (CPU) generator; ``generate`` gets only that token."""
        cdf = torch.softmax(scores, dim=-1).cumsum(dim=-1)
        if self.uniforms.device != cdf.device:
            self.uniforms = self.uniforms.to(cdf.device)
        u = self.uniforms[:, self.step]
        self.step += 1
        # the first token whose cumulative mass exceeds u * total: never a zero-mass token
        tokens = torch.searchsorted(cdf, (u * cdf[:, -1])[:, None], right=True)
        tokens = tokens.clamp(max=cdf.size(-1) - 1)
        one_hot = torch.full_like(scores, float("-inf"))
        return one_hot.scatter(1, tokens, 0.0)

    def finish(self, sequences: torch.Tensor) -> torch.Tensor:
        """All recorded logprobs as a ``(batch, new_tokens)`` tensor, on the CPU."""
        self._gather(sequences[:, -1])
        self.prev = None
        return (
            torch.stack(self.logprobs, dim=1).cpu()
            if self.logprobs
            else torch.zeros(sequences.shape[0], 0)
        )


def _top_p_mask(scores: torch.Tensor, top_p: float) -> torch.Tensor:
    """Nucleus filtering: keep the smallest set of tokens whose probability reaches ``top_p``."""
    sorted_scores, order = torch.sort(scores, descending=True, dim=-1)
    cum = torch.softmax(sorted_scores, dim=-1).cumsum(dim=-1)
    # drop a token when the mass before it already reaches top_p (the top token always stays)
    drop_sorted = (cum - torch.softmax(sorted_scores, dim=-1)) >= top_p
    drop = drop_sorted.scatter(1, order, drop_sorted)
    return scores.masked_fill(drop, float("-inf"))


class HiddenStates:
    """The hidden states :meth:`HFEngine.recording_hidden_states` recorded: per completion, the
    ``(len(token_ids), d)`` final hidden states that predicted its tokens, in the model's dtype,
    on its device (row ``t`` predicts ``token_ids[t]``: the prompt's last position, then each
    sampled token's)."""

    def __init__(self) -> None:
        self._rows: dict[int, tuple[Completion, torch.Tensor]] = {}

    def add(self, completion: Completion, hidden: torch.Tensor) -> None:
        """Record ``hidden`` as ``completion``'s."""
        self._rows[id(completion)] = (completion, hidden)

    def of(self, completion: Completion) -> torch.Tensor | None:
        """``completion``'s hidden states; None for a completion not sampled while recording."""
        got = self._rows.get(id(completion))
        # keyed by identity: an id is reused once its object is gone, so check it is this one
        return got[1] if got is not None and got[0] is completion else None

    def clear(self) -> None:
        """Drop every recorded row (and the memory it holds)."""
        self._rows.clear()

    def __len__(self) -> int:
        return len(self._rows)


class HFEngine(TemplatedEngine):
    """Generation with a transformers model; see the module docstring for the details.

    ``model`` is a hub id, a local folder, or an already-loaded ``PreTrainedModel`` (the duel
    trainer generates with the live policy it trains; the model is put in eval mode for the
    call and its training mode restored after). ``tokenizer`` defaults to the model's own.
    ``max_prompt_tokens`` rejects longer prompts rather than truncating them.
    """

    def __init__(
        self,
        model: str | Path | Any,
        tokenizer: Any = None,
        *,
        system_prompt: str | None = None,
        chat_template_kwargs: dict | None = None,
        dtype: str | torch.dtype = "auto",
        device: str | torch.device | None = None,
        batch_size: int = 64,
        max_prompt_tokens: int | None = None,
        revision: str | None = None,
        autocast_dtype: torch.dtype | None = None,
    ):
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if isinstance(model, (str, Path)):
            self.model = load_model(model, dtype=dtype, device=device, revision=revision)
            self.tokenizer = (
                tokenizer if tokenizer is not None else load_tokenizer(model, revision=revision)
            )
        else:
            self.model = model
            if device is not None:
                self.model.to(device)
            if tokenizer is None:
                source = getattr(model, "name_or_path", None) or getattr(
                    getattr(model, "config", None), "_name_or_path", None
                )
                if not source:
                    raise ValueError(
                        "HFEngine got a loaded model without a tokenizer and the model has no "
                        "name_or_path; pass tokenizer="
                    )
                tokenizer = load_tokenizer(source)
            self.tokenizer = tokenizer
        self.set_template(self.tokenizer, system_prompt, chat_template_kwargs, max_prompt_tokens)
        self.batch_size = batch_size
        self.autocast_dtype = autocast_dtype  # train.master_dtype: generate as it trains
        self.eos_ids = self._eos_ids()
        pad = self.tokenizer.pad_token_id
        self.pad_id = pad if pad is not None else self.eos_ids[0]
        self._hidden: HiddenStates | None = None  # recording_hidden_states' sink, while open

    def _eos_ids(self) -> list[int]:
        """Every token that ends a completion: the tokenizer's eos and the model's eos list."""
        ids: list[int] = []
        gen_eos = getattr(getattr(self.model, "generation_config", None), "eos_token_id", None)
        for e in (self.tokenizer.eos_token_id, gen_eos):
            for i in e if isinstance(e, (list, tuple)) else [e]:
                if i is not None and i not in ids:
                    ids.append(int(i))
        if not ids:
            raise ValueError(
                "neither the tokenizer nor the model's generation_config defines an eos token"
            )
        return ids

    @property
    def device(self) -> torch.device:
        """Where the model's weights are."""
        return next(self.model.parameters()).device

    @contextlib.contextmanager
    def recording_hidden_states(self) -> Iterator[HiddenStates]:
        """Within the block, :meth:`generate` also records each completion's final hidden
        states (:class:`HiddenStates`); the samples are the same as without it."""
        if self.model.get_output_embeddings() is None:
            raise ValueError("recording_hidden_states needs a model with an output projection")
        sink = self._hidden = HiddenStates()
        try:
            yield sink
        finally:
            self._hidden = None

    def generate(
        self, prompts: Sequence[Messages], n: int = 1, sampling: SamplingParams | None = None
    ) -> list[list[Completion]]:
        """For each prompt, ``n`` completions with token ids and logprobs."""
        if n < 1:
            raise ValueError(f"n must be >= 1, got {n}")
        sampling = sampling or SamplingParams()
        encoded = [self.encode(p) for p in prompts]
        prompt_seeds = sampling.seeds_for(len(encoded))
        rows = [(i, j) for i in range(len(encoded)) for j in range(n)]
        # longest first: similar lengths share a batch, and an out-of-memory shows up at once
        rows.sort(key=lambda r: -len(encoded[r[0]]))
        out: list[list[Completion | None]] = [[None] * n for _ in encoded]
        was_training = self.model.training
        self.model.eval()
        try:
            for b, start in enumerate(range(0, len(rows), self.batch_size)):
                chunk = rows[start : start + self.batch_size]
                seed = None if sampling.seed is None else sampling.seed + b
                row_seeds = (
                    None
                    if prompt_seeds is None
                    else [row_seed(prompt_seeds[i], j) for i, j in chunk]
                )
                done = self._generate_batch(
                    [encoded[i] for i, _ in chunk], sampling, seed, row_seeds
                )
                for (i, j), completion in zip(chunk, done):
                    out[i][j] = completion
        finally:
            self.model.train(was_training)
        return out  # type: ignore[return-value]

    @torch.inference_mode()
    def _generate_batch(
        self,
        prompts: list[list[int]],
        sampling: SamplingParams,
        seed: int | None,
        row_seeds: list[int] | None = None,
    ) -> list[Completion]:
        width = max(len(p) for p in prompts)
        input_ids = torch.full((len(prompts), width), self.pad_id, dtype=torch.long)
        attention = torch.zeros((len(prompts), width), dtype=torch.long)
        for r, p in enumerate(prompts):  # left padding: every row's next token is at the end
            input_ids[r, width - len(p) :] = torch.tensor(p, dtype=torch.long)
            attention[r, width - len(p) :] = 1
        recorder = _SampleAndRecord(sampling, row_seeds)
        # a row with its own generator gets its token from the recorder, every other score
        # -inf: generate's greedy path takes it as its draw would, without a softmax over the
        # vocabulary and a multinomial (and its warpers) at every step
        greedy = sampling.greedy or recorder.picks
        config = GenerationConfig(
            max_new_tokens=sampling.max_new_tokens,
            do_sample=not greedy,
            # temperature / top-p are applied by the recorder; neutral values keep generate's
            # own warpers (and the checkpoint's defaults such as top_k) out of the way
            temperature=1.0,
            top_p=1.0,
            top_k=None if greedy else 0,  # greedy ignores it (and warns if it is set)
            # generate fills every knob left None from the checkpoint's generation_config:
            # pin the ones that reshape the distribution to their neutral values
            repetition_penalty=1.0,
            min_p=None if greedy else 0.0,
            typical_p=1.0,
            epsilon_cutoff=0.0,
            eta_cutoff=0.0,
            no_repeat_ngram_size=0,
            min_new_tokens=0,
            eos_token_id=self.eos_ids,
            pad_token_id=self.pad_id,
            stop_strings=list(sampling.stop) or None,
            use_cache=True,
        )
        device = self.device
        cast = self.autocast_dtype  # float32 masters generate in the dtype they train in
        autocast = torch.autocast(device.type, cast) if cast else contextlib.nullcontext()
        steps: list[torch.Tensor] = []  # per decode step, the head's input at the last position
        hook = None
        if self._hidden is not None:
            hook = self.model.get_output_embeddings().register_forward_pre_hook(
                lambda _module, args: steps.append(args[0][:, -1])
            )
        try:
            forked = torch.random.fork_rng(devices=[device] if device.type == "cuda" else [])
            with forked, autocast:
                if seed is not None:
                    torch.manual_seed(seed)
                sequences = self.model.generate(
                    input_ids=input_ids.to(device),
                    attention_mask=attention.to(device),
                    generation_config=config,
                    logits_processor=LogitsProcessorList([recorder]),
                    tokenizer=self.tokenizer if sampling.stop else None,
                )
        finally:
            if hook is not None:
                hook.remove()
        new = sequences[:, width:].cpu()
        logprobs = recorder.finish(sequences)
        done = [
            self._completion(prompts[r], new[r].tolist(), logprobs[r].tolist(), sampling)
            for r in range(len(prompts))
        ]
        if self._hidden is not None:
            self._record_hidden(done, steps, new.size(1))
        return done

    def _record_hidden(
        self, done: list[Completion], steps: list[torch.Tensor], new_tokens: int
    ) -> None:
        """Give each completion of a batch its rows of the recorded head inputs (one forward
        per sampled token: the prefill's last position, then each decode step)."""
        if len(steps) != new_tokens:
            raise RuntimeError(
                f"recording_hidden_states saw {len(steps)} forwards of the output projection "
                f"for {new_tokens} sampled tokens: this model's generate does not call its head "
                "once per token, so the hidden states cannot be matched to the tokens"
            )
        hidden = torch.stack(steps, dim=1)  # (rows, new tokens, d)
        for r, completion in enumerate(done):
            self._hidden.add(completion, hidden[r, : len(completion.token_ids)])

    def _completion(
        self, prompt: list[int], ids: list[int], logprobs: list[float], sampling: SamplingParams
    ) -> Completion:
        """Cut a generated row at its end (eos or stop string) and decode it."""
        finish = "length"
        cut = len(ids)
        for k, t in enumerate(ids):
            if t in self.eos_ids:
                cut, finish = (
                    k + 1,
                    "stop",
                )  # the eos is kept in the ids (it was sampled) but not the text
                break
        if finish == "length":
            # a row that ended on a stop string before the others is padded to the batch's width
            while cut > 0 and ids[cut - 1] == self.pad_id:
                cut -= 1
            if cut < sampling.max_new_tokens:
                finish = (
                    "stop"  # a stopping criterion ended it (e.g. a stop string spanning the prompt)
                )
        body = (
            ids[: cut - 1]
            if finish == "stop" and cut and ids[cut - 1] in self.eos_ids
            else ids[:cut]
        )
        text = self.tokenizer.decode(body, skip_special_tokens=False)
        hit = _first_stop(text, sampling.stop)
        if hit is not None:
            # the stop string precedes any padding, so cutting at it is right even when pad == eos
            stop_at = hit[0]
            m = len(body)
            while (
                m > 0
                and _first_stop(
                    self.tokenizer.decode(body[: m - 1], skip_special_tokens=False), sampling.stop
                )
                is not None
            ):
                m -= 1
            body, cut, finish = body[:m], m, "stop"
            text = text[:stop_at]
        return Completion(
            text=text,
            token_ids=ids[:cut],
            logprobs=logprobs[:cut],
            prompt_token_ids=list(prompt),
            finish_reason=finish,
        )

    def close(self) -> None:
        """Drop the model reference and free cached GPU memory."""
        self.model = None
        if torch.cuda.is_available():
            torch.cuda.empty_cache()


def row_seed(prompt_seed: int, j: int) -> int:
    """The generator seed of sample ``j`` of a prompt seeded ``prompt_seed``."""
    return (prompt_seed * 1_000_003 + j) % 2**63


def _first_stop(text: str, stops: Sequence[str]) -> tuple[int, int] | None:
    """(index, length) of the earliest stop string in ``text``, or None."""
    best = None
    for s in stops:
        i = text.find(s)
        if i >= 0 and (best is None or i < best[0]):
            best = (i, len(s))
    return best
