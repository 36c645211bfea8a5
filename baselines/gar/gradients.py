"""GAR's cosine: a sequence's gradient at the output projection against an anchor's.

For a sequence of completion tokens ``y_1..y_n`` after a prompt, with ``h_t`` the final hidden
state (after the final norm) that predicts ``y_t``, the loss ``L = -sum_t log p(y_t)`` (p at
the policy's sampling temperature ``T``, after the model's logit softcap if it has one, as the
GRPO loss scores tokens) has the gradient at the LM head's weight ``W`` (``V x d``)

    dL/dW = sum_t r_t h_t^T,    r_t = (softmax(z_t / T) - onehot(y_t)) / T * c'(W h_t),

where ``z_t = c(W h_t)`` and ``c'`` is the softcap's derivative (1 without one). The *sum*
over tokens is the reduction (``gar.reduction: sum``); the mean differs by the factor ``1/n``,
which a cosine does not see. ``gar.reduction: token_mean`` is the mean over a sequence's
tokens of each token's own gradient ``r_t h_t^T`` against the anchor's (summed) gradient.

The cosine of two such ``V x d`` gradients is ``<G1, G2> / (|G1| |G2|)``, computed one way
or the other (``gar.compute``; the numbers agree to float rounding, ``tests/test_gar.py``):

- ``explicit``: form ``G = R^T H`` one vocabulary chunk (``gar.vocab_chunk`` rows) at a
  time and take the inner products there; about ``V d`` multiply-adds per token.
- ``gram``: never form ``G``: ``<G1, G2> = sum_{t,s} <r_t, r'_s> <h_t, h'_s>`` from the token
  Gram matrices (``R1 R2^T`` accumulated over the vocabulary chunks, ``H1 H2^T``); about
  ``(V + d)`` times the number of token pairs a rollout makes with itself and the anchor.
- ``auto`` (default): per problem, the one with fewer multiply-adds by those counts: ``gram``
  while a rollout plus the anchor are shorter than the hidden size, about.

Either way the softmax needs every vocabulary entry: with several chunks a first pass takes
each token's log-sum-exp and a second the chunk's probabilities, so no more than
``tokens x vocab_chunk`` logits exist at once. Everything is float32.

Only the final hidden states and the head are needed, no backward pass. A sample's hidden
states are those its rollout recorded while sampling it (:mod:`baselines.gar.step`); an
anchor's, or a sample's the rollout could not record, come from an extra no-grad forward of
the backbone, :func:`completion_hidden_states` (the policy's training forward goes through
TRL's fused LM head, which returns log-probs and no hidden states, and comes after the
reward); it needs the whole model on the process (one process, or DDP's replicas; not FSDP's
shards).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch

from agon.logprobs import collate
from agon.packing import pack, supports_packing

REDUCTIONS = ("sum", "token_mean")
COMPUTES = ("auto", "explicit", "gram")


def unwrap(model: torch.nn.Module) -> torch.nn.Module:
    """The model under a DDP (or other ``.module``) wrapper."""
    while not hasattr(model, "config") and hasattr(model, "module"):
        model = model.module
    return model


@dataclass(frozen=True)
class Head:
    """The output projection as the loss sees it: weight (and bias), softcap, temperature.
    (A logit multiplier that some other families have, e.g. Granite's, is not applied.)"""

    weight: torch.Tensor  # (V, d), detached, in the model's dtype (a chunk is cast at a time)
    bias: torch.Tensor | None = None  # (V,)
    softcap: float | None = None
    temperature: float = 1.0

    @classmethod
    def of(cls, model: torch.nn.Module, temperature: float = 1.0) -> Head:
        """The LM head of ``model`` (unwrapped), and its config's ``final_logit_softcapping``."""
        net = unwrap(model)
        lm = net.get_output_embeddings()
        weight, bias = lm.weight.detach(), getattr(lm, "bias", None)
        if hasattr(weight, "full_tensor"):  # a sharded (DTensor) head: the whole of it
            weight = weight.full_tensor()
            bias = bias.full_tensor() if bias is not None else None
        config = net.config.get_text_config() if hasattr(net.config, "get_text_config") else None
        softcap = getattr(config or net.config, "final_logit_softcapping", None)
        return cls(
            weight,
            bias.detach().float() if bias is not None else None,
            float(softcap) if softcap else None,
            float(temperature),
        )

    @property
    def vocab(self) -> int:
        return self.weight.size(0)

    def logits(self, h: torch.Tensor, lo: int, hi: int) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``(z / T, c'(W h))`` for vocabulary rows ``lo:hi`` of ``h`` (n, d); the second is
        None without a softcap."""
        z = h @ self.weight[lo:hi].float().T
        if self.bias is not None:
            z = z + self.bias[lo:hi]
        slope = None
        if self.softcap is not None:
            tanh = torch.tanh(z / self.softcap)
            z, slope = self.softcap * tanh, 1.0 - tanh * tanh
        return z / self.temperature, slope


def residual_chunks(
    head: Head, h: torch.Tensor, y: torch.Tensor, chunk: int | None
) -> Iterator[tuple[int, int, torch.Tensor]]:
    """``(lo, hi, R[:, lo:hi])``: the rows ``r_t`` of the module docstring, one vocabulary
    chunk at a time (``chunk`` None or >= V: all at once, and the logits computed once)."""
    V = head.vocab
    chunk = V if not chunk or chunk >= V else int(chunk)
    spans = [(lo, min(lo + chunk, V)) for lo in range(0, V, chunk)]
    if len(spans) == 1:
        lse = None
    else:  # first pass: each token's log-sum-exp over the whole vocabulary
        lse = torch.full((h.size(0),), float("-inf"), device=h.device)
        for lo, hi in spans:
            lse = torch.logaddexp(lse, torch.logsumexp(head.logits(h, lo, hi)[0], dim=-1))
    rows = torch.arange(h.size(0), device=h.device)
    for lo, hi in spans:
        z, slope = head.logits(h, lo, hi)
        r = torch.softmax(z, dim=-1) if lse is None else torch.exp(z - lse[:, None])
        inside = (y >= lo) & (y < hi)
        r[rows[inside], y[inside] - lo] -= 1.0
        r = r / head.temperature
        yield lo, hi, (r * slope if slope is not None else r)


def explicit_gradient(
    head: Head, h: torch.Tensor, y: torch.Tensor, chunk: int | None = None
) -> torch.Tensor:
    """``dL/dW`` (V, d) of one sequence, formed whole (small models and tests only)."""
    return torch.cat([r.T @ h for _, _, r in residual_chunks(head, h, y, chunk)])


def _cosine(dot: torch.Tensor, sq_a: torch.Tensor, sq_b: torch.Tensor) -> torch.Tensor:
    """``dot / sqrt(sq_a sq_b)``, 0 where either norm is 0."""
    den = torch.sqrt(sq_a.clamp(min=0.0) * sq_b.clamp(min=0.0))
    return torch.where(den > 0, dot / den.clamp(min=1e-30), torch.zeros_like(dot))


def costs(
    n_anchor: int, lengths: Sequence[int], vocab: int, hidden: int, reduction: str = "sum"
) -> dict[str, float]:
    """Multiply-adds of the inner products by each method, the logits (common) left out
    (``token_mean`` needs no pair of a rollout's tokens with each other)."""
    n = sum(lengths)
    pairs = n_anchor * n_anchor + n_anchor * n
    if reduction == "sum":
        pairs += sum(k * k for k in lengths)
    return {
        "explicit": float(vocab * hidden * (n + n_anchor)),
        "gram": float((vocab + hidden) * pairs),
    }


def problem_cosines(
    head: Head,
    anchor: tuple[torch.Tensor, torch.Tensor],
    rollouts: Sequence[tuple[torch.Tensor, torch.Tensor]],
    reduction: str = "sum",
    compute: str = "auto",
    chunk: int | None = None,
) -> torch.Tensor:
    """The cosine of each rollout's gradient with the anchor's: ``anchor`` and each rollout
    are ``(h, y)``, the ``(n, d)`` hidden states that predict a sequence's ``n`` tokens and the
    tokens. A rollout with no tokens has no gradient: cosine 0 (as has any, for an empty
    anchor). Returns a float32 ``(len(rollouts),)`` tensor."""
    if reduction not in REDUCTIONS:
        raise ValueError(f"gar.reduction must be one of {REDUCTIONS}, got {reduction!r}")
    if compute not in COMPUTES:
        raise ValueError(f"gar.compute must be one of {COMPUTES}, got {compute!r}")
    if not rollouts:
        return torch.zeros(0)
    lengths = [int(y.numel()) for _, y in rollouts]
    n_a = int(anchor[1].numel())
    if compute == "auto":
        c = costs(n_a, lengths, head.vocab, head.weight.size(1), reduction)
        compute = "gram" if c["gram"] < c["explicit"] else "explicit"
    dev = head.weight.device
    h = torch.cat([anchor[0], *(x for x, _ in rollouts)]).float().to(dev)
    y = torch.cat([anchor[1], *(t for _, t in rollouts)]).long().to(dev)
    ends = torch.tensor([n_a, *lengths]).cumsum(0).tolist()
    spans = list(zip(ends[:-1], ends[1:]))  # each rollout's rows of h
    fn = _gram if compute == "gram" else _explicit
    dot, sq, sq_a = fn(head, h, y, n_a, spans, reduction, chunk)
    if reduction == "sum":
        return _cosine(dot, sq, sq_a.expand_as(dot)).cpu()
    per_token = _cosine(dot, sq * (h[n_a:] ** 2).sum(-1), sq_a.expand_as(dot))
    return torch.stack(
        [
            per_token[a - n_a : b - n_a].mean() if b > a else per_token.new_zeros(())
            for a, b in spans
        ]
    ).cpu()


def _explicit(head, h, y, n_a, spans, reduction, chunk):
    """(dot, |G|^2, |A|^2) per rollout (``sum``) or per rollout token (``token_mean``: dot =
    ``<r_t h_t^T, A>``, the second ``|r_t|^2``), forming each gradient a chunk at a time."""
    per_token = reduction == "token_mean"
    k = (h.size(0) - n_a) if per_token else len(spans)
    dot, sq = h.new_zeros(k), h.new_zeros(k)
    sq_a = h.new_zeros(())
    h_a, h_r = h[:n_a], h[n_a:]
    for _, _, r in residual_chunks(head, h, y, chunk):
        g_a = r[:n_a].T @ h_a  # (Vc, d)
        sq_a += (g_a * g_a).sum()
        if per_token:
            dot += ((h_r @ g_a.T) * r[n_a:]).sum(-1)
            sq += (r[n_a:] ** 2).sum(-1)
            continue
        for i, (a, b) in enumerate(spans):
            g = r[a:b].T @ h[a:b]
            dot[i] += (g * g_a).sum()
            sq[i] += (g * g).sum()
    return dot, sq, sq_a


def _gram(head, h, y, n_a, spans, reduction, chunk):
    """As :func:`_explicit`, from token Gram matrices (no ``V x d`` gradient is formed)."""
    h_a, h_r = h[:n_a], h[n_a:]
    rr_a = h.new_zeros(n_a, n_a)  # <r_s, r_s'> over the anchor's tokens
    rr_x = h.new_zeros(h_r.size(0), n_a)  # rollout tokens x anchor tokens
    rr_self = [h.new_zeros(b - a, b - a) for a, b in spans]  # each rollout with itself
    sq_r = h.new_zeros(h_r.size(0))
    for _, _, r in residual_chunks(head, h, y, chunk):
        r_a, r_r = r[:n_a], r[n_a:]
        rr_a += r_a @ r_a.T
        rr_x += r_r @ r_a.T
        if reduction == "token_mean":
            sq_r += (r_r**2).sum(-1)
            continue
        for i, (a, b) in enumerate(spans):
            rr_self[i] += r[a:b] @ r[a:b].T
    sq_a = (rr_a * (h_a @ h_a.T)).sum()
    cross = (rr_x * (h_r @ h_a.T)).sum(-1)  # per rollout token: <r_t h_t^T, A>
    if reduction == "token_mean":
        return cross, sq_r, sq_a
    dot = torch.stack([cross[a - n_a : b - n_a].sum() for a, b in spans])
    sq = torch.stack([(m * (h[a:b] @ h[a:b].T)).sum() for m, (a, b) in zip(rr_self, spans)])
    return dot, sq, sq_a


@torch.no_grad()
def completion_hidden_states(
    model: torch.nn.Module,
    prompt_ids: Sequence[Sequence[int]],
    completion_ids: Sequence[Sequence[int]],
    pad_token_id: int,
    packing: bool = True,
    micro_batch_size: int = 64,
) -> list[torch.Tensor]:
    """For each (prompt, completion), the ``(len(completion), d)`` final hidden states (after
    the final norm) that predict the completion's tokens: one no-grad forward of the backbone,
    ``micro_batch_size`` sequences at a time, packed as :func:`agon.logprobs.
    completion_logprobs` packs them (or in its padded layout)."""
    net = unwrap(model)
    backbone = net.base_model
    device = next(net.parameters()).device
    out: list[torch.Tensor] = []
    for lo in range(0, len(completion_ids), max(int(micro_batch_size), 1)):
        prompts = prompt_ids[lo : lo + micro_batch_size]
        comps = completion_ids[lo : lo + micro_batch_size]
        width = max([len(c) for c in comps] + [1])
        if packing and supports_packing(net):
            p = pack([[*a, *b] for a, b in zip(prompts, comps)], pad_token_id)
            hidden = backbone(
                input_ids=p.input_ids.to(device),
                position_ids=p.position_ids.to(device),
                use_cache=False,
            ).last_hidden_state
            # column start + len(prompt) - 1 + j predicts completion token j
            rows = p.gather(hidden, [len(a) - 1 for a in prompts], width)
        else:
            ids, attn, _ = collate(prompts, comps, pad_token_id)
            hidden = backbone(
                input_ids=ids.to(device), attention_mask=attn.to(device), use_cache=False
            ).last_hidden_state
            first = max(len(a) for a in prompts) - 1
            rows = hidden[:, first : first + width]
        out.extend(rows[i, : len(c)] for i, c in enumerate(comps))
    return out
