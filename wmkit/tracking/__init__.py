"""Loggers behind one interface (local JSONL now; W&B and TensorBoard later)."""
