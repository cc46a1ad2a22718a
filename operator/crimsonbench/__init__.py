"""crimsonbench: CPU-pinned fio sweeps against Ceph Crimson and classic OSDs.

Layers (enforced by import-linter, see pyproject.toml):
    spec -> plan -> results -> reports      pure, no I/O
    local (and later k8s)                   executors, the I/O shell
    cli, operator handlers                  thin wiring
"""

__version__ = "0.1.0"
