"""One setting launches a self-play stage on N processes: ``pipeline.launch``.

``dvc repro`` and the Prefect tasks run each stage's plain command (``searchplay selfplay ...``). With
``pipeline.launch.processes`` above 1 that command starts itself again under a launcher, one process per
device, and waits for it: ``accelerate launch --config_file <config> --num_processes N`` where a config
names the setup (``accelerate_configs/fsdp.yaml``, ``ddp.yaml``), else ``torchrun --standalone`` (DDP; gloo
on CPU, which is how CI tests it). A process that a launcher started (``LOCAL_RANK`` is set) runs as it is.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

LAUNCHED = "LOCAL_RANK"  # set by torchrun and accelerate for every process they start


def under_launcher() -> bool:
    return LAUNCHED in os.environ


def launch_command(launch: Any, arguments: list[str]) -> list[str]:
    """The command that runs ``searchplay <arguments>`` on ``launch.processes`` processes."""
    scripts = Path(sys.executable).parent
    module = ["-m", "searchplay", *arguments]
    if launch.config:
        return [str(scripts / "accelerate"), "launch", "--config_file", str(launch.config), "--num_processes",
                str(launch.processes), *module]
    return [str(scripts / "torchrun"), "--standalone", "--nproc_per_node", str(launch.processes), *module]


def needs_launch(launch: Any) -> bool:
    """Whether this process should start the launcher instead of training itself."""
    return launch.processes > 1 and not under_launcher()
