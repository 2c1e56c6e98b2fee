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
EXIT_CODES = "SEARCHPLAY_EXIT_CODES"  # the folder where each launched process that failed writes its exit code
DETERMINISTIC = (2, 3)  # searchplay.cliutil: bad input or params, a failed data-quality gate: no retry helps


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


def record_exit_code(code: object) -> None:
    """In a launched process that fails, its exit code into ``$SEARCHPLAY_EXIT_CODES/rank<RANK>``: torchrun and
    ``accelerate launch`` exit 1 whatever their processes exited with, and a Prefect task retries a 1."""
    folder = os.environ.get(EXIT_CODES)
    if folder and under_launcher() and isinstance(code, int) and code != 0:
        (Path(folder) / f"rank{os.environ.get('RANK', '0')}").write_text(str(code))


def launched_exit_code(folder: Path, launcher_code: int) -> int:
    """The exit code of a launch that failed: a process's 2 or 3 (the larger), else the launcher's own."""
    codes = [int(path.read_text()) for path in folder.glob("rank*")]
    return max((code for code in codes if code in DETERMINISTIC), default=launcher_code)
