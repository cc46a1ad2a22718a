"""Test harness for a real Kubernetes control plane (no kubelet, no registry)."""

from harness.builds import ENVIRONMENTAL, environmental
from harness.controlplane import BinariesUnavailable, ControlPlane, ensure_binaries
from harness.processes import NotReadyError
from harness.rook import ROOK_VERSION, RookUnavailable, rook_crds_yaml

__all__ = [
    "ENVIRONMENTAL",
    "ROOK_VERSION",
    "BinariesUnavailable",
    "ControlPlane",
    "NotReadyError",
    "RookUnavailable",
    "ensure_binaries",
    "environmental",
    "rook_crds_yaml",
]
