"""Helpers shared by every stage's CLI verbs (kept apart from cli.py to avoid import cycles)."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape

from searchplay.config import ConfigError, Params, load_params
from searchplay.model_paths import selfplay_variants

console = Console(stderr=True)


def get_params(ctx: typer.Context, **cli_overrides) -> Params:
    """The validated params for this invocation; ``cli_overrides`` maps dotted keys to flag values. The variants
    they name must be registered ones (the CLI has loaded the recipes by now), or no verb starts."""
    obj = ctx.find_root().obj or {}
    merged = {**obj.get("overrides", {}), **{k: v for k, v in cli_overrides.items() if v is not None}}
    try:
        explicit = obj.get("params_explicit", False)  # --params FILE: layered over params.yaml
        return load_params(obj.get("params_file", Path("params.yaml")), merged,
                           base=Path("params.yaml") if explicit else None, variants=selfplay_variants())
    except ConfigError as exc:
        print_error("configuration error", str(exc))
        raise typer.Exit(2) from None


def print_error(kind: str, message: str) -> None:
    """``kind: message`` on stderr, never wrapped (a message is one line per problem) nor read as markup; outside
    a project's folder (no ``./params.yaml``, no ``--params``) it says so, since the paths named are the defaults'."""
    console.print(f"[red]{kind}:[/red] {escape(message)}{escape(outside_project_hint())}", soft_wrap=True)


_params_given: bool | None = None  # set by the CLI's root command: --params FILE given; None outside the CLI


def note_params_given(given: bool) -> None:
    """The root command records whether ``--params`` named a file (``outside_project_hint`` reads it)."""
    global _params_given
    _params_given = given


def outside_project_hint() -> str:
    """`` (no params.yaml in <cwd>: ...)`` where a CLI command runs on the built-in defaults for want of a params
    file, so that an error naming a default path (``data/index``) is not read as the project's."""
    if _params_given is not False or Path("params.yaml").exists():  # a folder there is named by its own error
        return ""
    return (f" (no params.yaml in {Path.cwd()}: the built-in defaults and their paths apply; run in the project's "
            "folder, or give --params)")


EXIT_BAD_PARAMS = 2  # not retried by the Prefect tasks: a retry would fail the same way
EXIT_DATA_QUALITY = 3  # a failed Great Expectations gate: likewise deterministic
EXIT_UNWRITABLE = 2  # a read-only folder, a full disk, an output path that is a file: a retry fails the same way
OTHER_PATH = "or choose another output path (the verb's --out, or the stage's *_dir / out_dir via --set)"


def path_error_message(error: OSError) -> str | None:
    """One line naming the path, the cause and what to do, for the file-system errors a retry cannot fix
    (permission, read-only file system, full disk or quota, a file where a folder belongs); None for others."""
    path = error.filename or "an output file"
    if error.errno in (errno.ENOSPC, errno.EDQUOT):
        detail = f": {error.strerror}" if error.strerror and error.strerror != os.strerror(error.errno) else ""
        return (f"no space left on the device (writing {path}{detail}); free disk space (old checkpoints under "
                "selfplay.checkpoint_dir, caches) or write to another disk, then run the command again")
    if isinstance(error, PermissionError) or error.errno == errno.EROFS:
        return f"{path}: permission denied (a read-only folder?); make it writable for this user {OTHER_PATH}"
    if isinstance(error, NotADirectoryError):
        return f"{path}: a part of this path is a file, not a folder; move that file away {OTHER_PATH}"
    if isinstance(error, FileExistsError):
        found = "is a file where a folder is needed" if Path(path).is_file() else "already exists"
        return f"{path} {found}; move it away {OTHER_PATH}"
    if isinstance(error, IsADirectoryError):
        return f"{path} is a folder where a file is needed; move it away {OTHER_PATH}"
    return None


def exit_code_for(error: BaseException) -> int:
    """3 for a failed data-quality gate, 2 for an input a stage cannot use (``searchplay.io.InputError``: a
    missing, cut or malformed file), 1 for any other stage failure (a flow retries only those)."""
    from searchplay.io import InputError
    from searchplay.quality import DataQualityError

    if isinstance(error, InputError) and not error.retryable:
        return EXIT_BAD_PARAMS  # a retry reads the same file
    return EXIT_DATA_QUALITY if isinstance(error, DataQualityError) else 1
