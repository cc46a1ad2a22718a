"""Fixtures of the admission tests. The control plane itself (`control_plane`, `admin`) is
in tests/conftest.py, shared with tests/chart."""

from __future__ import annotations

import kubernetes.client
import pytest


@pytest.fixture(scope="session")
def namespace(admin: kubernetes.client.ApiClient) -> str:
    name = "admission"
    kubernetes.client.CoreV1Api(admin).create_namespace(
        kubernetes.client.V1Namespace(metadata=kubernetes.client.V1ObjectMeta(name=name))
    )
    return name
