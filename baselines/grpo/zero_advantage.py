"""TRL's GRPOTrainer, skipping the forward and backward of micro-batches that cannot move the
weights: every advantage 0, no KL term, no auxiliary loss.

Such a micro-batch's loss is exactly 0 for every loss type TRL offers (each multiplies the
advantage in), and so is its gradient; TRL still runs its forward and backward. This trainer
gives the parameters zero gradients instead (so AdamW steps as it would have: its moments carry
on, weight decay applies) and returns a zero loss with no graph: the weights move exactly as
TRL's would, at none of the cost. The duel's and in-house GRPO's update do the same
(:func:`agon.rl.update`).

Over several processes a micro-batch is skipped only when it is empty of signal on every
process (one collective per micro-batch), and only when each optimizer step is one micro-batch:
under gradient accumulation the processes synchronize their gradients in the last micro-batch's
backward, which a skip would leave out, so there nothing is skipped.

TRL's log then carries ``zero_advantage``: the share of the step's micro-batches skipped
(1: the whole step), which the metrics callback writes as ``{model}/zero_advantage``.
"""

from __future__ import annotations

import torch
from trl import GRPOTrainer

ZERO_ADVANTAGE_LOG = "zero_advantage"  # TRL's log key: the share of micro-batches skipped


class SkipZeroAdvantageGRPOTrainer(GRPOTrainer):
    """GRPOTrainer whose micro-batches with no signal run no forward or backward."""

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        skip = self._no_signal(inputs["advantages"])
        if model.training:
            self._metrics["train"][ZERO_ADVANTAGE_LOG].append(float(skip))
        if not skip:
            return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
        for p in model.parameters():
            if p.requires_grad and p.grad is None:
                p.grad = torch.zeros_like(p)
        return torch.zeros((), device=inputs["advantages"].device, requires_grad=True)

    def _no_signal(self, advantages: torch.Tensor) -> bool:
        """Whether this micro-batch's loss is exactly 0 with a gradient of exactly 0, on every
        process, and skipping it leaves the processes' gradients in step."""
        if self.beta != 0.0 or self.aux_loss_enabled:
            return False
        world = self.accelerator.num_processes
        if world > 1 and self.current_gradient_accumulation_steps > 1:
            return False
        signal = torch.tensor([float(bool((advantages != 0).any()))], device=advantages.device)
        if world > 1:
            signal = self.accelerator.gather(signal)
        return not bool(signal.any())
