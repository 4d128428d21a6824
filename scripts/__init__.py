"""Hydra entry points (``wmkit-eval``) and benchmark scripts."""
