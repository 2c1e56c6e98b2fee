"""Process-wide defaults for running offline and quietly (set before heavy libraries import)."""

from __future__ import annotations

import os

OFFLINE_DEFAULTS = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "MLFLOW_DISABLE_TELEMETRY": "true",
    "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false",
    "DO_NOT_TRACK": "true",
    "DVC_NO_ANALYTICS": "1",
    "GX_ANALYTICS_ENABLED": "false",
    "LANCEDB_LOG": "error",
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120",
}


def apply_offline_defaults(online: bool = False) -> None:
    """Set each default unless the user already set it; ``online`` leaves the hub reachable."""
    for key, value in OFFLINE_DEFAULTS.items():
        if online and key in {"HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"}:
            continue
        os.environ.setdefault(key, value)
