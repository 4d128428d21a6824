"""Evaluation: metrics, the episode runner and leaderboards (installed as ``wmkit.evals``)."""
