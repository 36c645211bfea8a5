"""lm-eval task YAMLs of agon (a package so that a wheel ships utils.py next to them)."""
