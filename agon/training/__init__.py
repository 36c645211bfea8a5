"""Training: settings, policies, the duel's loop, checkpoints, probes and the metrics schema.

The algorithm itself is :mod:`agon.duel`; this package is what runs it (and what the GRPO
baseline shares with it). Importing the package imports nothing heavy.
"""
