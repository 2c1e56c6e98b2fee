"""Fault drills: cause each fault for real and check that no data is lost and the error is clear.

    python benchmarks/drills.py [--only NAME ...] [--list]

Each drill runs the real ``searchplay`` CLI (``python -m searchplay``) in a subprocess whose working
folder is a scratch folder, so no ``params.yaml`` applies (the built-in defaults do) and nothing is
written to the repository; where a subprocess is impractical it makes the real calls in this process:
the retrieval server under uvicorn on 127.0.0.1 over a tiny LanceDB index (embedded by a hashing
bag-of-words embedder, so no model is loaded), and the MLflow sweep a stage start runs. Everything
lives in one ``tempfile.TemporaryDirectory`` (the subprocesses' TMPDIR included); nothing is reached
beyond 127.0.0.1. ``COLUMNS`` is dropped from the subprocesses' environment, so the CLI prints as it
does into a log file or a pipe (rich's 80 columns), where "one line" matters.

Prints one Markdown table row per drill (drill | expected | observed | data lost | held) and a final
line with how many held, a progress line per drill on stderr; exits 0 only when every drill held.
A drill that raises is reported as not held, with the exception's one-line summary.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import hashlib
import json
import math
import os
import re
import selectors
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

CLI_TIMEOUT_S = 300  # one CLI call; the slowest (kg extract with its data-quality gate) takes ~15 s on 2 shared cores
TINY_ITEMS = 50  # entities of the small Wikidata-format dump the truncation drills cut
KILL_ITEMS = 60_000  # entities of the dump killed mid-ingestion (~20 MB): seconds of work, ample time to kill it
BASELINE_SEEDS, RERUN_SEEDS = 8, 5  # subgraphs of the previous run and of the re-run (so the swap shows)
STARTUP_S = 30.0  # the in-process server must accept connections within this
REBUILDS = 3  # index swaps under the serving drill's traffic
CLIENTS = 2  # client threads of the serving drill
REQUESTS_AFTER_SWAP = 5  # requests answered on each new build before the next swap
EXPECTED_POOL = ["stats.json", "store", "subgraphs.jsonl"]  # what a finished kg extract leaves in its out folder


class Outcome(NamedTuple):
    observed: str
    data_lost: bool | None  # None: unknown (the drill raised)
    held: bool


@dataclass(frozen=True)
class Drill:
    name: str
    expected: str
    run: Callable[[Path], Outcome]


DRILLS: list[Drill] = []


def drill(name: str, expected: str) -> Callable[[Callable[[Path], Outcome]], Callable[[Path], Outcome]]:
    """Register a drill: ``run(work)`` gets a fresh folder inside the temporary directory."""
    def register(run: Callable[[Path], Outcome]) -> Callable[[Path], Outcome]:
        DRILLS.append(Drill(name, expected, run))
        return run
    return register


# --- the real CLI in a subprocess ---------------------------------------------------------------------------

def cli_env(work: Path) -> dict[str, str]:
    """The caller's environment with TMPDIR inside the scratch folder and no COLUMNS/LINES (a log's width)."""
    tmp = work / "tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    env.update(TMPDIR=str(tmp), PYTHONUNBUFFERED="1")
    return env


def cli_args(*args: str) -> list[str]:
    return [sys.executable, "-m", "searchplay", *args]


def searchplay(work: Path, *args: str, umask: int = -1) -> subprocess.CompletedProcess:
    """``searchplay ARGS`` run in ``work``; stdout and stderr together in ``.stdout``."""
    return subprocess.run(cli_args(*args), cwd=work, env=cli_env(work), stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=CLI_TIMEOUT_S, umask=umask)


def output_lines(result: subprocess.CompletedProcess) -> list[str]:
    return [line for line in result.stdout.splitlines() if line.strip()]


def said(result: subprocess.CompletedProcess, *words: str) -> bool:
    """Whether the output holds every word (rich wraps long lines at 80 columns: compared without line breaks)."""
    flat = " ".join(result.stdout.split())
    return all(word in flat for word in words)


def quote(result: subprocess.CompletedProcess, pattern: str) -> str:
    """The shortest phrase of the output that matches ``pattern``, for the observed column."""
    found = re.search(pattern, " ".join(result.stdout.split()))
    return f'"{found.group(0)}"' if found else "(message not found)"


# --- fixtures: a Wikidata-format dump, a previous kg run, folder snapshots -----------------------------------

def wikidata_item(n: int, count: int) -> bytes:
    """Item Q<n+1>: an English label, an enwiki sitelink and a P50 link to the next item (the items form a ring)."""
    target = {"type": "wikibase-entityid", "value": {"id": f"Q{(n + 1) % count + 1}"}}
    claim = {"mainsnak": {"snaktype": "value", "property": "P50", "datatype": "wikibase-item",
                          "datavalue": target}, "rank": "normal"}
    return json.dumps({"type": "item", "id": f"Q{n + 1}", "labels": {"en": {"language": "en", "value": f"Item {n}"}},
                       "sitelinks": {"enwiki": {"site": "enwiki", "title": f"Item {n}"}},
                       "claims": {"P50": [claim]}}).encode()


def wikidata_dump(count: int) -> bytes:
    """Laid out as Wikidata's own dump: ``[`` first, one entity per line ending in ``,``, ``]`` last."""
    return b"[\n" + b",\n".join(wikidata_item(n, count) for n in range(count)) + b"\n]\n"


def snapshot(folder: Path) -> dict[str, str]:
    """Relative path -> sha256 of every file under ``folder`` ('dir' for folders), hidden ones included."""
    if not folder.exists():
        return {}
    return {str(p.relative_to(folder)): "dir" if p.is_dir() else hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*"))}


def compare(before: dict[str, str], after: dict[str, str]) -> tuple[list[str], list[str]]:
    """(files of ``before`` changed or gone, paths new in ``after``)."""
    lost = [path for path, digest in before.items() if after.get(path) != digest]
    return lost, [path for path in after if path not in before]


def entities(store: Path) -> int:
    """Entities in a kg store (read-only: the file is not touched)."""
    db = sqlite3.connect(f"file:{store / 'graph.sqlite'}?mode=ro", uri=True)
    try:
        return db.execute("SELECT count(*) FROM entities").fetchone()[0]
    finally:
        db.close()


def bundled_sample() -> Path:
    """The Wikidata-format sample shipped in the package (what the kg stage reads by default)."""
    from searchplay.assets import bundled_sample_path

    return bundled_sample_path()


_BASELINE: dict[str, Path] = {}


def previous_run(work: Path) -> Path:
    """``work/out`` as a finished ``kg extract`` leaves it (store/, subgraphs.jsonl, stats.json of the bundled
    sample, BASELINE_SEEDS subgraphs). Built once by the real CLI, then copied for each drill."""
    if "out" not in _BASELINE:
        root = work.parent / "baseline"
        root.mkdir(exist_ok=True)
        result = searchplay(root, "kg", "extract", "--dump", str(bundled_sample()), "--out", "out",
                            "--selector", "random", "--num-seeds", str(BASELINE_SEEDS))
        if result.returncode != 0:
            raise RuntimeError(f"the baseline kg extract failed (exit {result.returncode}): "
                               f"{output_lines(result)[-1:] or 'no output'}")
        _BASELINE["out"] = root / "out"
    out = work / "out"
    shutil.copytree(_BASELINE["out"], out)
    return out


def kg_fault(work: Path, dump_name: str, dump: bytes | None, exit_code: int, pattern: str,
             one_line: bool = False) -> Outcome:
    """``kg extract --dump`` of a bad dump over a previous run: the exit code, the message (``one_line``: and
    nothing else but the progress bar), the previous run kept."""
    out = previous_run(work)
    before = snapshot(out)
    if dump is not None:
        (work / dump_name).write_bytes(dump)
    result = searchplay(work, "kg", "extract", "--dump", str(work / dump_name), "--out", str(out),
                        "--selector", "random")
    lost, stray = compare(before, snapshot(out))
    kept = "store and pool unchanged" if not lost else f"changed or gone: {', '.join(lost[:3])}"
    observed = (f"exit {result.returncode}, {quote(result, pattern)}; {kept}"
                + (f"; stray: {', '.join(stray[:3])}" if stray else "; nothing stray"))
    held = result.returncode == exit_code and said(result, dump_name) and not lost and not stray
    if one_line:
        lines = [line for line in output_lines(result) if "━" not in line]
        observed += f"; {len(lines)} line(s) of message"
        held &= len(lines) == 1
    return Outcome(observed, bool(lost), held)


# --- kg extract -----------------------------------------------------------------------------------------------

@drill("kg-missing-dump", "exit 2, names the path; previous store and pool intact")
def kg_missing_dump(work: Path) -> Outcome:
    return kg_fault(work, "missing.json", None, 2, r"not a readable file")


@drill("kg-cut-gzip", "exit 2 (truncated); previous store and pool intact")
def kg_cut_gzip(work: Path) -> Outcome:
    whole = gzip.compress(wikidata_dump(TINY_ITEMS))
    return kg_fault(work, "cut.json.gz", whole[: len(whole) // 2], 2, r"stream ends before its end-of-stream marker")


@drill("kg-unclosed-array", "exit 2 (truncated); previous store and pool intact")
def kg_unclosed_array(work: Path) -> Outcome:
    dump = wikidata_dump(TINY_ITEMS).removesuffix(b"]\n")
    return kg_fault(work, "no-bracket.json", dump, 2, r"not the closing '\]'")


@drill("kg-partial-line", "exit 2 (truncated); previous store and pool intact")
def kg_partial_line(work: Path) -> Outcome:
    lines = b",\n".join(wikidata_item(n, TINY_ITEMS) for n in range(TINY_ITEMS)) + b"\n"  # one entity a line
    return kg_fault(work, "partial.json", lines[:-40], 2, r"its last line has no newline and does not parse")


@drill("kg-bad-lines", "a dump with 30% corrupt lines: exit 2, one line (counts, setting, first bad line); "
      "previous store and pool intact")
def kg_bad_lines(work: Path) -> Outcome:
    lines = [wikidata_item(n, TINY_ITEMS) for n in range(TINY_ITEMS)]
    lines = [line[: len(line) // 2] if n % 3 == 0 else line for n, line in enumerate(lines)]  # cut mid-object
    return kg_fault(work, "bad.json", b"[\n" + b",\n".join(lines) + b"\n]\n", 2,
                    r"\d+ of \d+ lines of \S+ are corrupt \(.*?\); the first is line \d+: JSONDecodeError",
                    one_line=True)


@drill("kg-concurrent", "two kg extract runs into one folder: the second exits 2 at once naming the first's pid; "
      "the first finishes exit 0")
def kg_concurrent(work: Path) -> Outcome:
    args = ["kg", "extract", "--dump", str(bundled_sample()), "--out", "out", "--selector", "random",
            "--num-seeds", str(BASELINE_SEEDS)]
    first = subprocess.Popen(cli_args(*args), cwd=work, env=cli_env(work), stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
    lock = work / ".out.lock"
    deadline = time.monotonic() + CLI_TIMEOUT_S
    while f"pid {first.pid}" not in (lock.read_text() if lock.is_file() else "") and time.monotonic() < deadline:
        time.sleep(0.1)
    os.kill(first.pid, signal.SIGSTOP)  # the first holds the folder while the second starts, however fast its work
    try:
        tic = time.perf_counter()
        second = searchplay(work, *args)
        second_s = time.perf_counter() - tic
    finally:
        os.kill(first.pid, signal.SIGCONT)
    first.communicate(timeout=CLI_TIMEOUT_S)
    lines = output_lines(second)
    busy = quote(second, r"being written by pid \d+")
    observed = (f"second: exit {second.returncode} in {second_s:.1f} s, {len(lines)} line(s), {busy}; "
                f"first: exit {first.returncode}")
    held = (second.returncode == 2 and len(lines) == 1 and said(second, f"pid {first.pid}")
            and first.returncode == 0)
    return Outcome(observed, first.returncode != 0, held)


@drill("kg-sigkill", "previous run intact after SIGKILL mid-ingestion; re-run exit 0, no staging folder or shard")
def kg_sigkill(work: Path) -> Outcome:
    out = previous_run(work)
    before = snapshot(out)
    (work / "big.json").write_bytes(wikidata_dump(KILL_ITEMS))
    args = ["--set", "kg.ingest_workers=2", "kg", "extract", "--dump", str(work / "big.json"), "--out", str(out),
            "--selector", "random"]
    process = subprocess.Popen(cli_args(*args), cwd=work, env=cli_env(work), stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, start_new_session=True)
    deadline, shards = time.monotonic() + CLI_TIMEOUT_S, []
    while process.poll() is None and not shards and time.monotonic() < deadline:
        shards = list(out.glob(".store.building-*/shard-*.sqlite"))
        time.sleep(0.02)
    if not shards:
        process.kill()
        process.wait()
        return Outcome(f"no shard appeared before the run ended (exit {process.returncode}); not killed mid-run",
                       False, False)
    os.killpg(process.pid, signal.SIGKILL)  # the CLI and its two ingestion workers, as an OOM kill of the job
    process.wait()
    lost, stray = compare(before, snapshot(out))
    leftovers = sorted({path.split("/")[0] for path in stray})
    rerun = searchplay(work, "--set", "kg.ingest_workers=2", "kg", "extract", "--dump", str(bundled_sample()),
                       "--out", str(out), "--selector", "random", "--num-seeds", str(RERUN_SEEDS))
    entries = sorted(p.name for p in out.iterdir())
    store = sorted(p.name for p in (out / "store").iterdir()) if (out / "store").is_dir() else []
    pool = (out / "subgraphs.jsonl").read_text().count("\n") if (out / "subgraphs.jsonl").is_file() else 0
    observed = (f"killed with {len(shards)} shard(s) written; previous run "
                + ("intact" if not lost else f"changed: {', '.join(lost[:3])}")
                + f" (left: {', '.join(leftovers) or 'nothing'}); re-run exit {rerun.returncode}, "
                f"{pool} subgraphs, out: {', '.join(entries)}, store: {', '.join(store)}")
    held = (not lost and rerun.returncode == 0 and entries == EXPECTED_POOL and store == ["graph.sqlite"]
            and pool == RERUN_SEEDS and entities(out / "store") > 0)
    return Outcome(observed, bool(lost), held)


# --- corpus and benchmark JSONL ---------------------------------------------------------------------------------

def jsonl_text(count: int, record: Callable[[int], dict[str, Any]]) -> bytes:
    return "".join(json.dumps(record(i)) + "\n" for i in range(count)).encode()


@drill("corpus-truncated", "exit 2 (truncated); previous passages.jsonl intact, nothing written")
def corpus_truncated(work: Path) -> Outcome:
    text = jsonl_text(40, lambda i: {"id": str(i), "title": f"Article {i}", "text": "Some words here. " * 10})
    (work / "corpus.jsonl").write_bytes(text[:-30])  # the last line loses its end and its newline
    out = work / "corpus"
    out.mkdir()
    (out / "passages.jsonl").write_text('{"id": "0-0", "title": "Previous", "text": "the previous corpus"}\n')
    before = snapshot(out)
    result = searchplay(work, "corpus", "build", "--source", "jsonl", "--path", "corpus.jsonl",
                        "--out", str(out / "passages.jsonl"))
    lost, stray = compare(before, snapshot(out))
    stray = [path for path in stray if path != ".passages.jsonl.lock"]  # the writers' lock beside the output
    message = quote(result, r"is truncated: its last line \(\d+\) has no newline")
    observed = (f"exit {result.returncode}, {message}; "
                + ("passages.jsonl unchanged" if not lost else "passages.jsonl changed")
                + (f"; stray: {', '.join(stray)}" if stray else "; nothing else written but the lock file"))
    return Outcome(observed, bool(lost), result.returncode == 2 and not lost and not stray)


@drill("evaluate-truncated", "exit 2 (truncated) before any model is loaded; nothing written")
def evaluate_truncated(work: Path) -> Outcome:
    data = work / "benchmarks"
    (data / "nq").mkdir(parents=True)
    text = jsonl_text(30, lambda i: {"id": f"q{i}", "question": f"Question {i}?", "golden_answers": [f"answer {i}"]})
    (data / "nq" / "test.jsonl").write_bytes(text[:-20])
    # evaluate.model names a folder that does not exist: a run that reached the model would fail otherwise (exit 1)
    began = time.perf_counter()
    result = searchplay(work, "--set", f"evaluate.data_dir={data}", "--set", "evaluate.benchmarks=[nq]",
                        "--set", f"evaluate.out_dir={work / 'eval'}", "--set", f"evaluate.model={work / 'no-model'}",
                        "evaluate", "--variant", "base", "--no-track")
    elapsed = time.perf_counter() - began
    written = sorted(str(p.relative_to(work)) for p in (work / "eval").rglob("*")) if (work / "eval").exists() else []
    message = quote(result, r"test\.jsonl is truncated")
    observed = (f"exit {result.returncode} in {elapsed:.1f} s, {message}; "
                + (f"written: {', '.join(written[:3])}" if written else "nothing written"))
    held = result.returncode == 2 and said(result, "test.jsonl is truncated") and not written
    return Outcome(observed, result.returncode == 0, held)  # exit 0 would have scored the questions before the cut


# --- MLflow -----------------------------------------------------------------------------------------------------

KILLED_STAGE = """
import sys, time
from searchplay.config import Params
from searchplay.tracking import start_run

params = Params.model_validate({"tracking": {"uri": sys.argv[1]}})
with start_run(params, "evaluate", "killed") as run:
    print(run.info.run_id, flush=True)
    time.sleep(600)
"""


def first_line(process: subprocess.Popen, timeout_s: float) -> str:
    """The first line ``process`` prints on stdout, or '' when it prints none within ``timeout_s``."""
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        if not selector.select(timeout_s):
            return ""
        return process.stdout.readline().strip()


@drill("mlflow-killed-run", "a run left RUNNING by a SIGKILLed stage is ended KILLED by the next stage start")
def mlflow_killed_run(work: Path) -> Outcome:
    uri = f"sqlite:///{work / 'mlflow.db'}"
    stage = subprocess.Popen([sys.executable, "-c", KILLED_STAGE, uri], cwd=work, env=cli_env(work), text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        run_id = first_line(stage, CLI_TIMEOUT_S)
    finally:
        stage.send_signal(signal.SIGKILL)
        stage.wait()
    if not run_id:
        return Outcome(f"the stage opened no run (exit {stage.returncode})", False, False)

    from mlflow import MlflowClient

    from searchplay.config import Params
    from searchplay.tracking import HOST_TAG, PID_TAG, start_run

    client = MlflowClient(uri)
    after_kill = client.get_run(run_id).info.status
    living = client.create_run(client.get_run(run_id).info.experiment_id,
                               tags={HOST_TAG: socket.gethostname(), PID_TAG: str(os.getpid())}).info.run_id
    with contextlib.chdir(work), start_run(Params.model_validate({"tracking": {"uri": uri}}), "evaluate", "next"):
        pass
    killed, alive = client.get_run(run_id).info.status, client.get_run(living).info.status
    observed = (f"after the kill: {after_kill}; after the next start: {killed} "
                f"(a living process's run: {alive})")
    return Outcome(observed, False, after_kill == "RUNNING" and killed == "KILLED" and alive == "RUNNING")


# --- the retrieval server ---------------------------------------------------------------------------------------

PASSAGES = [{"id": str(i), "title": title, "text": text} for i, (title, text) in enumerate([
    ("Switzerland", "Switzerland is a landlocked country in Europe; its federal city is Bern."),
    ("Bern", "Bern is the de facto capital of Switzerland, on the river Aare."),
    ("Paris", "Paris is the capital and largest city of France, on the Seine."),
    ("Danube", "The Danube is the second-longest river in Europe, flowing to the Black Sea."),
    ("Mount Everest", "Mount Everest is the highest mountain above sea level, in the Himalayas."),
    ("Jazz", "Jazz is a music genre that originated in New Orleans in the 19th century."),
])] + [{"id": str(i), "title": f"Filler {i}", "text": f"Filler passage {i} about topic {i % 7}."} for i in range(6, 60)]
QUERIES = ["capital of Switzerland", "highest mountain", "river to the Black Sea", "jazz New Orleans"]


class HashingEmbedder:
    """A deterministic bag-of-words embedder (each lower-cased word hashed into one of 256 dimensions): the
    drills exercise the server and the index swap, not embedding quality, and load no model."""

    name = "drill-hashing"
    dimension = 256
    e5_prefixes = False

    def _vectors(self, texts: list[str]) -> Any:
        import numpy as np

        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in re.findall(r"[a-z0-9]+", text.lower()):
                out[row, zlib.crc32(word.encode()) % self.dimension] += 1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms == 0, 1.0, norms)

    def encode_queries(self, queries: list[str]) -> Any:
        return self._vectors(queries)

    def encode_passages(self, passages: list[str], show_progress: bool = False) -> Any:
        return self._vectors(passages)


def build_tiny_index(root: Path, passages: list[dict[str, str]]) -> Path:
    """Build (or rebuild in place, as ``index build`` does: a staging folder, then a swap) ``root/index``."""
    from searchplay.io import write_jsonl
    from searchplay.retrieval.index import build_index

    write_jsonl(root / "passages.jsonl", passages)
    build_index(root / "passages.jsonl", root / "index", "passages", HashingEmbedder(), ann_threshold=1_000_000,
                show_progress=False)
    return root / "index"


@contextlib.contextmanager
def serving(index: Path) -> Iterator[tuple[str, Any]]:
    """The retrieval server over ``index`` with the ``serve.*`` defaults, under uvicorn on 127.0.0.1 (a free
    port) in a thread; yields its base URL and its request limits."""
    from searchplay.config import Params
    from searchplay.retrieval.limits import RequestLimits
    from searchplay.retrieval.search import LanceSearchTool
    from searchplay.retrieval.server import create_app, serve_in_thread

    limits = RequestLimits.from_serve_config(Params.model_validate({}).serve)
    app = create_app(LanceSearchTool(index, "passages", HashingEmbedder()), limits)
    with serve_in_thread(app, STARTUP_S) as url:
        yield url, limits


@drill("server-rebuild", f"no failed request while the index is rebuilt {REBUILDS} times; /health: new version")
def server_rebuild(work: Path) -> Outcome:
    import httpx

    index = build_tiny_index(work, PASSAGES)
    statuses: dict[str, int] = {}
    during = [0]  # requests answered while a rebuild was under way
    lock, stop, flowing, rebuilding = threading.Lock(), threading.Event(), threading.Event(), threading.Event()

    def client(url: str) -> None:
        with httpx.Client(timeout=30) as http:
            while not stop.is_set():
                try:
                    response = http.post(f"{url}/retrieve", json={"queries": QUERIES, "topk": 3})
                    key = str(response.status_code)
                    if response.status_code == 200 and not all(response.json()["result"]):
                        key = "200 with an empty result"
                except httpx.HTTPError as exc:  # a dropped connection counts as a failure too
                    key = type(exc).__name__
                with lock:
                    statuses[key] = statuses.get(key, 0) + 1
                    during[0] += rebuilding.is_set()
                flowing.set()

    def requests_so_far() -> int:
        with lock:
            return sum(statuses.values())

    with serving(index) as (url, _):
        before = httpx.get(f"{url}/health", timeout=30).json()
        clients = [threading.Thread(target=client, args=(url,)) for _ in range(CLIENTS)]
        for thread in clients:
            thread.start()
        flowing.wait(STARTUP_S)
        rebuilding.set()
        for number in range(REBUILDS):
            build_tiny_index(work, PASSAGES[: 20 + 10 * number])
            answered = requests_so_far()
            deadline = time.monotonic() + STARTUP_S
            while requests_so_far() < answered + REQUESTS_AFTER_SWAP and time.monotonic() < deadline:
                time.sleep(0.01)  # some requests on each new build before the next swap
        rebuilding.clear()
        stop.set()
        for thread in clients:
            thread.join(60)
        after = httpx.get(f"{url}/health", timeout=30).json()
    failed = sum(count for key, count in statuses.items() if key != "200")
    rows = 20 + 10 * (REBUILDS - 1)
    changed = after["index"]["version"] != before["index"]["version"]
    observed = (f"{sum(statuses.values())} requests from {CLIENTS} clients ({during[0]} across the {REBUILDS} "
                "rebuilds), "
                + ("none failed" if not failed else f"failed: {statuses}")
                + f"; /health {after['status']}, version {'changed' if changed else 'unchanged'}, "
                f"rows {before['index']['rows']} -> {after['index']['rows']}")
    held = (not failed and during[0] > 0 and after["ready"] and changed and after["index"]["rows"] == rows)
    return Outcome(observed, bool(failed), held)


@drill("server-bounds", "/retrieve: empty list 422, too many queries 413, too long a query 413, topk too large 422")
def server_bounds(work: Path) -> Outcome:
    import httpx

    with serving(build_tiny_index(work, PASSAGES)) as (url, limits), httpx.Client(timeout=30) as http:
        asks = {"empty list": ({"queries": []}, 422),
                f"{limits.max_queries + 1} queries": ({"queries": ["capital"] * (limits.max_queries + 1)}, 413),
                f"a {limits.max_query_chars + 1}-char query": ({"queries": ["a" * (limits.max_query_chars + 1)]}, 413),
                f"topk {limits.max_top_k + 1}": ({"queries": ["capital"], "topk": limits.max_top_k + 1}, 422),
                "then a good one": ({"queries": QUERIES, "topk": 3}, 200)}
        got = {what: http.post(f"{url}/retrieve", json=body).status_code for what, (body, _) in asks.items()}
    observed = ", ".join(f"{what} {code}" for what, code in got.items())
    return Outcome(observed, False, all(got[what] == code for what, (_, code) in asks.items()))


# --- errors a retry cannot fix: exit 2, one line ----------------------------------------------------------------

def one_line_exit_2(result: subprocess.CompletedProcess) -> tuple[bool, str]:
    lines = output_lines(result)
    summary = f"exit {result.returncode}, {len(lines)} line{'s' if len(lines) != 1 else ''}"
    return result.returncode == 2 and len(lines) == 1 and "Traceback" not in result.stdout, summary


SILENT_TIMEOUT_S, SILENT_RETRIES = 1.0, 1  # the drill's judge settings; the defaults are 60 s and 3 retries
EVAL_BATCH = 32  # evaluate.batch_size in params.yaml: the runner judges one batch of answers at a time


@drill("judge-silent-endpoint", "an endpoint that accepts connections and never replies: the judge stops after "
      "judge.max_consecutive_errors (16) failed calls, in minutes at the defaults, not hours")
def judge_silent_endpoint(work: Path) -> Outcome:
    from searchplay.config import JudgeConfig
    from searchplay.llm.judge import JudgeOutageError, make_judge

    server = socket.create_server(("127.0.0.1", 0), backlog=128)
    held_open: list[socket.socket] = []

    def accept_and_say_nothing() -> None:
        with contextlib.suppress(OSError):
            while True:
                held_open.append(server.accept()[0])

    threading.Thread(target=accept_and_say_nothing, daemon=True).start()
    config = JudgeConfig(backend="openai", endpoint=f"http://127.0.0.1:{server.getsockname()[1]}/v1", model="m",
                         timeout_s=SILENT_TIMEOUT_S, max_retries=SILENT_RETRIES, backoff_s=0.1, cache_path=None)
    judge = make_judge(config)
    answers = [(f"question {i}", "a wrong answer", ["the gold"]) for i in range(1000)]  # none exact: all judged
    tic, batches, stopped = time.perf_counter(), 0, ""
    try:
        for start in range(0, len(answers), EVAL_BATCH):
            batches += 1
            judge.judge_many(answers[start:start + EVAL_BATCH])
    except JudgeOutageError as exc:
        stopped = str(exc)
    seconds = time.perf_counter() - tic
    server.close()
    for connection in held_open:
        connection.close()
    # at the defaults a failed call waits 4 timeouts (3 retries) and 1 + 2 + 4 s of backoff; calls run in waves
    # of judge.concurrency
    calls = len(held_open) // (1 + SILENT_RETRIES)
    per_wave = 4 * 60.0 + 1 + 2 + 4
    at_defaults, unbounded = (math.ceil(n / config.concurrency) * per_wave for n in (calls, len(answers)))
    observed = (f"stopped after {calls} calls ({len(held_open)} connections, batch 1 of {len(answers) // EVAL_BATCH}) "
                f"in {seconds:.1f} s at a {SILENT_TIMEOUT_S:.0f} s timeout and {SILENT_RETRIES} retry; at the "
                f"defaults (60 s, 3 retries) {at_defaults / 60:.1f} min, against {unbounded / 3600:.1f} h without "
                f"the stop; {stopped[:90]!r}")
    held = bool(stopped) and "max_consecutive_errors" in stopped and calls == config.max_consecutive_errors
    return Outcome(observed, False, held)


@drill("params-missing", "--params missing.yaml: exit 2, one line naming the file")
def params_missing(work: Path) -> Outcome:
    result = searchplay(work, "--params", "missing.yaml", "assets", "--check")
    held, summary = one_line_exit_2(result)
    message = quote(result, r"--params missing\.yaml: no such file")
    return Outcome(f"{summary}: {message}", False, held and said(result, "missing.yaml"))


@drill("bad-set", "--set without '=', with bad YAML, with a wrong type: exit 2, one line each")
def bad_set(work: Path) -> Outcome:
    cases = {"no '='": "selfplay.iterations", "bad YAML": "selfplay.iterations=[1",
             "wrong type": "selfplay.iterations=many"}
    held, observed = True, []
    for what, override in cases.items():
        ok, summary = one_line_exit_2(searchplay(work, "--set", override, "assets", "--check"))
        held &= ok
        observed.append(f"{what}: {summary}")
    return Outcome("; ".join(observed), False, held)


@drill("output-is-a-file", "kg.out_dir set to a file: exit 2, one line naming it; the file untouched")
def output_is_a_file(work: Path) -> Outcome:
    (work / "tiny.json").write_bytes(wikidata_dump(TINY_ITEMS))
    taken = work / "taken"
    taken.write_text("a file where kg.out_dir points\n")
    result = searchplay(work, "--set", f"kg.out_dir={taken}", "kg", "extract", "--dump", "tiny.json",
                        "--selector", "random")
    held, summary = one_line_exit_2(result)
    untouched = taken.read_text() == "a file where kg.out_dir points\n"
    message = quote(result, r"taken is a file where a folder is needed")
    observed = f"{summary}: {message}; file " + ("untouched" if untouched else "changed")
    return Outcome(observed, not untouched, held and said(result, str(taken)) and untouched)


# --- file modes -------------------------------------------------------------------------------------------------

def modes(folder: Path) -> dict[str, str]:
    return {p.name: oct(p.stat().st_mode & 0o777) for p in sorted(folder.rglob("*")) if p.is_file()}


@drill("file-modes", "files written 0644 under umask 022 (0664 under 002: the user's umask)")
def file_modes(work: Path) -> Outcome:
    evaluated = work / "eval" / "base"
    evaluated.mkdir(parents=True)
    (evaluated / "metrics.json").write_text('{"nq.judge_acc": 10.0, "nq.em": 10.0, "nq.n": 5}')
    (work / "corpus.jsonl").write_bytes(jsonl_text(3, lambda i: {"id": str(i), "title": f"Article {i}",
                                                                 "text": f"Some words about article {i}."}))
    found, codes = {}, []
    for umask, folder in ((0o022, "report-022"), (0o002, "report-002")):
        result = searchplay(work, "report", "--eval-dir", "eval", "--out", folder, "--selfplay-dir", "none",
                            umask=umask)
        codes.append(result.returncode)
        found[folder] = modes(work / folder)
    result = searchplay(work, "corpus", "build", "--source", "jsonl", "--path", "corpus.jsonl",
                        "--out", "corpus/passages.jsonl", umask=0o022)
    codes.append(result.returncode)
    found["corpus-022"] = modes(work / "corpus")
    wanted = {"report-022": "0o644", "report-002": "0o664", "corpus-022": "0o644"}
    observed = "; ".join(f"{where}: {len(files)} file{'s' if len(files) != 1 else ''} "
                         f"{', '.join(sorted(set(files.values()))) or '-'}" for where, files in found.items())
    held = not any(codes) and all(files and set(files.values()) == {wanted[where]} for where, files in found.items())
    return Outcome(observed + (f" (exits {codes})" if any(codes) else ""), False, held)


# --- the run ----------------------------------------------------------------------------------------------------

def run_drill(item: Drill, work: Path) -> Outcome:
    try:
        return item.run(work)
    except Exception as exc:  # a drill that raises did not hold; the next one runs
        summary = (str(exc).strip().splitlines() or [""])[0][:160]
        return Outcome(f"raised {type(exc).__name__}: {summary}", None, False)


def cell(text: str) -> str:
    return text.replace("|", "/").replace("\n", " ")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", action="append", metavar="NAME", help="run this drill only (repeatable)")
    parser.add_argument("--list", action="store_true", help="list the drills and what each expects")
    args = parser.parse_args(argv)
    names = [d.name for d in DRILLS]
    if args.list:
        for item in DRILLS:
            print(f"{item.name:20s} {item.expected}")
        return 0
    unknown = sorted(set(args.only or []) - set(names))
    if unknown:
        parser.error(f"unknown drill(s) {', '.join(unknown)}; --list shows them: {', '.join(names)}")
    chosen = [d for d in DRILLS if not args.only or d.name in args.only]
    rows, began = [], time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="searchplay-drills-") as root:
        for number, item in enumerate(chosen, start=1):
            work = Path(root) / item.name
            work.mkdir()
            print(f"[{number}/{len(chosen)}] {item.name} ...", end="", file=sys.stderr, flush=True)
            started = time.perf_counter()
            outcome = run_drill(item, work)
            print(f" {'held' if outcome.held else 'NOT HELD'} ({time.perf_counter() - started:.1f} s)",
                  file=sys.stderr, flush=True)
            rows.append((item, outcome))
    print("| drill | expected | observed | data lost | held |")
    print("|---|---|---|---|---|")
    for item, outcome in rows:
        lost = "unknown" if outcome.data_lost is None else ("yes" if outcome.data_lost else "no")
        print(f"| {item.name} | {cell(item.expected)} | {cell(outcome.observed)} | {lost} | "
              f"{'yes' if outcome.held else '**no**'} |")
    held = sum(outcome.held for _, outcome in rows)
    print(f"\n{held} of {len(rows)} drills held ({time.perf_counter() - began:.0f} s)")
    return 0 if held == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
