"""kafkalite: a real, replicated Kafka cluster in one Python process."""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_LAZY = {
    "Cluster": "kafkalite.cluster",
    "EmbeddedCluster": "kafkalite.embedded",
    "COORDINATION": "kafkalite.cluster",
    "PREFERRED_ELECTION": "kafkalite.cluster",
    "UNCLEAN_ELECTION": "kafkalite.cluster",
    "ElectionOutcome": "kafkalite.cluster",
}
"""Each public name and the module that defines it, imported on first use."""

__all__ = [*_LAZY, "__version__"]


def __getattr__(name: str) -> Any:
    """Import the cluster only when asked: `kafkalite --version` should not pay for Trio and the brokers."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'kafkalite' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
