"""Turning fio output and resource samples into step results (pure)."""
