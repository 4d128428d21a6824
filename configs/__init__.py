"""Hydra config tree, installed as package data so ``wmkit-eval`` finds it anywhere."""
