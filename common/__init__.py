"""Pieces every layer may import: logging set-up and the context logger."""
