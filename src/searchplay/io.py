"""Small file helpers shared by every stage: atomic writes (a temp file or folder, then a rename) and JSONL.

``jsonl_records`` never takes a cut file for a whole one: a truncated file raises ``TruncatedInputError``
(the CLI exits 2) instead of losing its tail.
"""

from __future__ import annotations

import bz2
import gzip
import hashlib
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

log = logging.getLogger(__name__)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextmanager
def atomic_write(path: str | Path, mode: str = "w", encoding: str | None = "utf-8") -> Iterator[IO[Any]]:
    """Write to a temp file beside ``path`` and rename it into place only if the block succeeds.

    A crash or an exception leaves the previous file (or no file) untouched, never a torn one.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; a shared team folder needs the user's umask
        with os.fdopen(fd, mode, encoding=None if "b" in mode else encoding) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@contextmanager
def restored_afterwards(path: str | Path) -> Iterator[None]:
    """``path``'s bytes are put back when the block ends, fails or is interrupted, if the block changed them
    (atomically: ``atomic_write``); a file the block created goes. For params.yaml around a run that writes
    one-run overrides into it. The bytes wait in ``.<name>.before-run`` beside it while the block runs, so a
    block killed outright (SIGKILL skips ``finally``) is put back by the next block on the same file."""
    path = Path(path)
    kept = put_back_after_a_kill(path)
    original = path.read_bytes() if path.exists() else None
    if original is not None:
        with atomic_write(kept, "wb") as handle:
            handle.write(original)
    try:
        yield
    finally:
        if original is None:
            path.unlink(missing_ok=True)
        else:
            _put_back(path, original)
            kept.unlink(missing_ok=True)


def put_back_after_a_kill(path: str | Path) -> Path:
    """Put back the bytes a ``restored_afterwards`` block killed outright left beside ``path``; returns where a
    block keeps them (``.<name>.before-run``)."""
    path = Path(path)
    kept = path.with_name(f".{path.name}.before-run")
    if kept.exists():
        log.warning("%s: putting back the bytes a run killed before it could left in %s", path, kept.name)
        _put_back(path, kept.read_bytes())
        kept.unlink()
    return kept


def _put_back(path: Path, original: bytes) -> None:
    if not path.exists() or path.read_bytes() != original:
        with atomic_write(path, "wb") as handle:
            handle.write(original)


def follow_umask(folder: str | Path) -> None:
    """Give every file under ``folder`` the mode the user's umask gives (0644 under 022).

    safetensors writes its files 0600, so a checkpoint that a library saved would be readable by its writer
    only, while everything else the project writes follows the umask.
    """
    mode = 0o666 & ~_umask()
    for path in Path(folder).rglob("*"):
        if path.is_file() and not path.is_symlink() and path.stat().st_mode & 0o777 != mode:
            os.chmod(path, mode)


@contextmanager
def atomic_dir(path: str | Path) -> Iterator[Path]:
    """Build a folder in ``.<name>.building-<pid>`` beside ``path``; swap it in only if the block succeeds.

    The previous folder stays in place until the new one is complete (two renames). An exception or
    Ctrl-C removes the staging folder; staging folders of processes that were killed are removed here.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    _remove_dead_staging(path)
    staging = path.with_name(f".{path.name}.building-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    try:
        yield staging
        old = path.with_name(f".{path.name}.old-{os.getpid()}")
        if path.exists():
            path.rename(old)
        staging.rename(path)
        shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _remove_dead_staging(path: Path) -> None:
    """Remove ``.<name>.building-<pid>`` / ``.<name>.old-<pid>`` beside ``path`` whose process is gone.

    An ``.old`` folder is the previous ``path`` of a process killed between its two renames: it is put
    back when ``path`` is missing.
    """
    prefix = f".{path.name}."
    for leftover in [p for p in path.parent.iterdir() if p.name.startswith(prefix)]:
        kind, _, pid = leftover.name.removeprefix(prefix).partition("-")
        if kind not in ("building", "old") or not pid.isdigit() or process_alive(int(pid)):
            continue
        if kind == "old" and not path.exists():
            leftover.rename(path)
        else:
            shutil.rmtree(leftover, ignore_errors=True)


def process_alive(pid: int) -> bool:
    """Whether a process with this id exists on this host (another user's counts as alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def write_json(path: str | Path, data: Any) -> None:
    with atomic_write(path) as handle:
        json.dump(data, handle, indent=2, ensure_ascii=False, sort_keys=False)
        handle.write("\n")


def write_jsonl(path: str | Path, records: Iterable[dict[str, Any]]) -> int:
    """Write records atomically, one JSON object per line; returns the count."""
    count = 0
    with atomic_write(path) as handle:
        for record in records:
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
            count += 1
    return count


def read_json(path: str | Path) -> Any:
    """The JSON value in ``path``; a file that does not parse raises a ``ValueError`` naming it."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not valid JSON ({exc}); a cut or hand-edited file: write it again with the "
                         "command that made it") from None


def read_jsonl(path: str | Path) -> Iterator[dict[str, Any]]:
    """Yield the records of a JSONL file; a malformed line raises with its line number."""
    with Path(path).open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                yield json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{number}: not valid JSON ({exc.msg})") from None


class InputError(Exception):
    """An input a stage cannot use (a file missing, cut, malformed or too small; checkpoints of another run): a
    retry finds it the same way, so the CLI exits 2 (``searchplay.cliutil.exit_code_for``) and a flow does not
    retry it. Stage errors derive from it beside their usual base (ValueError, RuntimeError). ``retryable``
    marks the one raised for what may pass (an I/O error mid-read, an endpoint that answered nothing): exit 1."""

    def __init__(self, *args: object, retryable: bool = False) -> None:
        super().__init__(*args)
        self.retryable = retryable


class TruncatedInputError(InputError, ValueError):
    """An input file that ends early (a cut copy or download); a retry reads the same file, so the CLI exits 2."""


COMPRESSED = {".gz": gzip.open, ".bz2": bz2.open}


def open_input(path: str | Path, mode: str = "rt") -> IO[Any]:
    """Open ``path`` for reading (UTF-8 in text mode), decompressing ``.gz`` / ``.bz2`` by suffix."""
    path = Path(path)
    opener = COMPRESSED.get(path.suffix, open)
    return opener(path, mode, encoding=None if "b" in mode else "utf-8")


def jsonl_records(path: str | Path,
                  error: type[Exception] = TruncatedInputError) -> Iterator[tuple[int, Any | json.JSONDecodeError]]:
    """``(line number, parsed value)`` per non-blank line of a JSONL file (``.jsonl``, ``.jsonl.gz``, ``.jsonl.bz2``).

    A line that does not parse comes back as its ``JSONDecodeError``, for the caller to count or
    reject. A truncated file raises ``error`` (a ``TruncatedInputError`` subclass): a compressed
    stream that ends before its end-of-stream marker, a last line without its newline that does not
    parse, or text cut inside a UTF-8 character.
    """
    number = 0
    try:
        with open_input(path) as handle:
            for number, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                try:
                    yield number, json.loads(line)
                except json.JSONDecodeError as exc:
                    if not line.endswith("\n"):
                        raise error(f"{path} is truncated: its last line ({number}) has no newline and is not valid "
                                    f"JSON ({exc.msg}); copy or download the file again") from None
                    yield number, exc
    except EOFError:
        raise error(f"{path} is truncated: the compressed stream ends before its end-of-stream marker (after "
                    f"{number} lines); copy or download the file again") from None
    except UnicodeDecodeError as exc:
        raise error(f"{path}: invalid UTF-8 after line {number} ({exc.reason}): the file is cut inside a character "
                    "or is not UTF-8 text; copy or download it again, or convert it to UTF-8") from None


def portable_name(value: str | Path, root: Path | None = None) -> str:
    """A model or file name fit to commit (reports, run.json, stats.json): an absolute path inside ``root``
    (default: the working directory, the repository root under DVC) becomes relative to it; anything else
    is unchanged.

    >>> portable_name("/repo/checkpoints/kg_wcr/model", Path("/repo"))
    'checkpoints/kg_wcr/model'
    >>> portable_name("bundled:smollm2"), portable_name("Qwen/Qwen2.5-7B-Instruct")
    ('bundled:smollm2', 'Qwen/Qwen2.5-7B-Instruct')
    """
    path = Path(str(value))
    if not path.is_absolute():
        return str(value)
    root = (root or Path.cwd()).resolve()
    try:
        return path.resolve().relative_to(root).as_posix()
    except ValueError:
        return str(value)


class TrackingStoreError(RuntimeError):
    """The MLflow tracking store cannot be opened, the same way however often it is tried: a file that is not an
    MLflow sqlite store, or a URI whose scheme MLflow has no store for (``searchplay.tracking.use_store``)."""


class OutputsBusyError(RuntimeError):
    """Another process is writing the same outputs; the message names it."""


@contextmanager
def exclusive_outputs(folder: str | Path, command: str, wait: bool = False) -> Iterator[None]:
    """Hold an exclusive lock on writing ``folder`` for the block: a second process asking for it fails at once
    with ``OutputsBusyError`` naming the holder's pid and command, instead of interleaving its files with ours
    (``wait``: it waits for the holder instead).

    The lock file sits beside the folder (``.<name>.lock``), outside any output; the kernel frees the lock when
    the holder exits, even by SIGKILL, so a stale file never blocks.
    """
    import fcntl

    folder = Path(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    path = folder.parent / f".{folder.name}.lock"
    handle = path.open("a+", encoding="utf-8")
    try:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            raise OutputsBusyError(f"{folder} is being written by {holder}; wait for it to finish (or stop it), "
                                   "then run this again") from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()} (`searchplay {command}`)")
        handle.flush()
        yield
    finally:
        handle.close()


def files_digest(root: Path, paths: Iterable[Path]) -> str:
    """sha256 over each file's path (relative to ``root``) and bytes, in path order."""
    digest = hashlib.sha256()
    for path in sorted(paths):
        digest.update(str(path.relative_to(root)).encode() + b"\0")
        with path.open("rb") as handle:
            digest.update(hashlib.file_digest(handle, "sha256").digest())
    return digest.hexdigest()[:16]


RECIPES_ENV = "SEARCHPLAY_RECIPES"  # comma-separated modules of recipes outside this package (searchplay.recipes)


def outside_recipes() -> list[str]:
    """The recipe modules ``SEARCHPLAY_RECIPES`` names, in its order."""
    return [name.strip() for name in os.environ.get(RECIPES_ENV, "").split(",") if name.strip()]


def package_digest(package: Path = Path(__file__).parent) -> str:
    """``files_digest`` of a searchplay source folder's Python files (by default the package that runs)."""
    return files_digest(package, package.rglob("*.py"))


def code_digest() -> str:
    """The searchplay package's Python source, and that of the recipes ``SEARCHPLAY_RECIPES`` adds from outside
    it: a run never continues, nor reuses what another run wrote, on other code than it started with (a resumed
    self-play run; an evaluation's resume log)."""
    outside = outside_recipes()
    if not outside:
        return package_digest()
    entries = [package_digest(), *(f"{name}={_module_digest(name)}" for name in outside)]
    return hashlib.sha256("\n".join(entries).encode()).hexdigest()[:16]


def _module_digest(name: str) -> str:
    """``files_digest`` of an importable module's source (a package: every ``.py`` file under it), or 'absent'."""
    import importlib.util

    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        spec = None
    if spec is None or (spec.origin is None and not spec.submodule_search_locations):
        return "absent"  # the recipes' loader names it in its own error
    if spec.submodule_search_locations:
        return package_digest(Path(next(iter(spec.submodule_search_locations))))
    return files_digest(Path(spec.origin).parent, [Path(spec.origin)])
