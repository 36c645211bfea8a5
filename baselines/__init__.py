"""Baselines table 1 compares Agon against: GRPO (training) and Mixture-of-Agents (inference)."""
