"""kafkalite: a real, replicated Kafka cluster in one Python process."""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

__all__ = ["Cluster", "EmbeddedCluster", "__version__"]


def __getattr__(name: str) -> Any:
    """Import the cluster only when asked: `kafkalite --version` should not pay for Trio and the brokers."""
    if name == "Cluster":
        from kafkalite.cluster import Cluster

        return Cluster
    if name == "EmbeddedCluster":
        from kafkalite.embedded import EmbeddedCluster

        return EmbeddedCluster
    raise AttributeError(f"module 'kafkalite' has no attribute {name!r}")
