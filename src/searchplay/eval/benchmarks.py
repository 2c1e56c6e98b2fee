"""Benchmark loaders: FlashRAG JSONL (local or HF hub), the FanOutQA smoke set, held-out KG questions.

Every loader returns a ``LoadedBenchmark``: the usable ``QAItem``s plus a count of what was skipped
and why, so a malformed line, an empty ``golden_answers`` or a duplicate id is never silently lost
(``evaluate.on_malformed``: ``skip`` counts and reports it, ``error`` stops at the first one with
its file and line number). A truncated JSONL file is not a malformed line: it always fails
(``TruncatedBenchmarkError``; ``searchplay.io.jsonl_records`` says what counts as truncated).

The seven papers' benchmarks and their FlashRAG splits (Search-R1 convention; KG paper §4):
NQ, TriviaQA, PopQA and Bamboogle use ``test``; HotpotQA, 2Wiki and MuSiQue use ``dev``.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from searchplay.config import Params
from searchplay.io import InputError, TruncatedInputError, jsonl_records
from searchplay.split import majority_answer, record_split
from searchplay.templates import template_question as kg_template_question  # the name eval has always used

GENERAL_QA = ("nq", "triviaqa", "popqa")
MULTIHOP_QA = ("hotpotqa", "2wikimultihopqa", "musique", "bamboogle")
PAPER_BENCHMARKS = GENERAL_QA + MULTIHOP_QA
SPLITS = {"nq": "test", "triviaqa": "test", "popqa": "test", "bamboogle": "test",
          "hotpotqa": "dev", "2wikimultihopqa": "dev", "musique": "dev"}
FANOUTQA = "fanoutqa"  # single-hop smoke set from the bundled FanOutQA dev file
KG_HELDOUT = "kg_heldout"  # template questions from the kg_heldout split of the KG pool (searchplay.split)


class BenchmarkError(InputError, ValueError):
    """A benchmark that cannot be loaded; the message names the file, the line and the fix."""


class HubUnreachableError(RuntimeError):
    """``evaluate.hub_id`` could not be reached with the hub allowed (``searchplay --online``): perhaps a passing
    outage, so it is not an InputError (exit 1, which a flow retries)."""


class TruncatedBenchmarkError(BenchmarkError, TruncatedInputError):
    """A benchmark or pool file that ends early, whatever ``evaluate.on_malformed`` says (the CLI exits 2)."""


@dataclass(frozen=True)
class QAItem:
    """One evaluation question with every acceptable answer."""

    id: str
    question: str
    golden_answers: list[str]
    benchmark: str
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass
class LoadedBenchmark:
    """Usable items of one benchmark, where they came from, and what was skipped (reason -> count)."""

    name: str
    source: str
    items: list[QAItem]
    skipped: Counter = field(default_factory=Counter)

    @property
    def num_skipped(self) -> int:
        return sum(self.skipped.values())


def _item_problem(record: Any, seen_ids: set[str]) -> str | None:
    """Why a FlashRAG record cannot be used (None when it can)."""
    if not isinstance(record, dict):
        return "not a JSON object"
    if not isinstance(record.get("id"), str | int) or str(record.get("id")).strip() == "":
        return "missing id"
    if not isinstance(record.get("question"), str) or not record["question"].strip():
        return "missing or empty question"
    golds = record.get("golden_answers")
    if golds is not None and not isinstance(golds, list):
        return f"golden_answers is a {type(golds).__name__}, not a list of answers"
    if not golds:
        return "empty golden_answers"
    if not all(isinstance(g, str) and g.strip() for g in golds):
        return "golden_answers holds an empty or non-string answer"
    if str(record["id"]) in seen_ids:
        return "duplicate id"
    return None


def _collect(name: str, source: str, records, on_malformed: str) -> LoadedBenchmark:
    """Validate ``(location, record-or-error)`` pairs into a LoadedBenchmark, skipping or raising."""
    loaded = LoadedBenchmark(name=name, source=source, items=[])
    seen: set[str] = set()
    for location, record in records:
        problem = record if isinstance(record, str) else _item_problem(record, seen)
        if problem is not None:
            if on_malformed == "error":
                raise BenchmarkError(f"{location}: {problem}; fix the record, or set evaluate.on_malformed: skip "
                                     "to skip and count such records")
            loaded.skipped[problem] += 1
            continue
        item_id = str(record["id"])
        seen.add(item_id)
        loaded.items.append(QAItem(id=item_id, question=record["question"], benchmark=name,
                                   golden_answers=list(record["golden_answers"]),
                                   metadata=record.get("metadata") or {}))
    if not loaded.items and not loaded.skipped:  # (all skipped: the data-quality gate names the problems)
        raise BenchmarkError(f"{source}: no records (an empty file?); copy the benchmark again, or leave "
                             f"{name} out of evaluate.benchmarks")
    return loaded


def benchmark_file(data_dir: str | Path, name: str) -> Path:
    """``<data_dir>/<name>/<split>.jsonl`` (the FlashRAG split first, then the other one)."""
    folder = Path(data_dir) / name
    preferred = SPLITS.get(name, "test")
    candidates = [folder / f"{preferred}.jsonl"] + [folder / f"{s}.jsonl" for s in ("test", "dev") if s != preferred]
    for path in candidates:
        if path.is_file():
            return path
    raise BenchmarkError(f"benchmark {name!r}: no file found; looked for {', '.join(str(p) for p in candidates)}. "
                         "Set evaluate.data_dir (or --data-dir) to a folder of FlashRAG-format JSONL, "
                         "or evaluate.hub_id to load from the Hugging Face hub")


def benchmark_status(params: Params) -> list[tuple[str, str, str]]:
    """(benchmark, state, detail) for each FlashRAG file ``evaluate.benchmarks`` needs: ``searchplay assets --check``.

    States: ``ok`` (the file is there, with its question count), ``missing`` (with the fix) and
    ``hub`` (``evaluate.hub_id`` is set, so no file is read). fanoutqa is a bundled asset and
    kg_heldout a kg-stage output, so neither is listed here.
    """
    cfg = params.evaluate
    rows = []
    for name in cfg.benchmarks:
        if name in (FANOUTQA, KG_HELDOUT):
            continue
        if cfg.hub_id:
            rows.append((f"benchmark {name}", "hub", f"hf://{cfg.hub_id}/{name}/{SPLITS.get(name, 'test')} "
                         "(needs the hub reachable and `pip install datasets`)"))
            continue
        try:
            path = benchmark_file(cfg.data_dir, name)
        except BenchmarkError:
            expected = Path(cfg.data_dir) / name / f"{SPLITS.get(name, 'test')}.jsonl"
            rows.append((f"benchmark {name}", "missing",
                         f"{expected} not found: restore the shipped files (git checkout -- data/benchmarks), "
                         "or set evaluate.data_dir to a folder of FlashRAG JSONL, or evaluate.hub_id"))
            continue
        with path.open(encoding="utf-8") as handle:
            questions = sum(1 for line in handle if line.strip())
        rows.append((f"benchmark {name}", "ok" if questions else "missing",
                     f"{path} ({questions} questions)" if questions else f"{path} is empty"))
    return rows


def load_flashrag_jsonl(path: str | Path, name: str, on_malformed: str = "skip") -> LoadedBenchmark:
    """Read a FlashRAG-format JSONL file (``id``, ``question``, ``golden_answers`` per line)."""
    path = Path(path)
    return _collect(name, str(path), _jsonl_lines(path), on_malformed)


def load_from_hub(hub_id: str, name: str, on_malformed: str = "skip") -> LoadedBenchmark:
    """The same benchmark from the HF hub (e.g. ``RUC-NLPIR/FlashRAG_datasets``, config = benchmark name).

    Needs the hub, or the split in the local Hugging Face cache (every command runs offline unless
    ``searchplay --online``), and the ``datasets`` package; the embedded default never calls this.
    """
    try:
        import datasets
    except ImportError as exc:
        raise BenchmarkError(f"evaluate.hub_id is {hub_id!r} but the 'datasets' package is not installed; "
                             "`pip install datasets`, or unset hub_id and use evaluate.data_dir") from exc
    split = SPLITS.get(name, "test")
    try:
        rows = datasets.load_dataset(hub_id, name, split=split)
    except ConnectionError as exc:
        from huggingface_hub.constants import is_offline_mode

        if not is_offline_mode():  # HF_HUB_OFFLINE, set unless searchplay --online
            raise HubUnreachableError(f"evaluate.hub_id: {hub_id} ({name}, {split}) could not be reached: {exc}; "
                                      "try again, or unset hub_id and use evaluate.data_dir") from exc
        raise BenchmarkError(f"evaluate.hub_id: {hub_id} ({name}, {split}) could not be loaded: {exc}. searchplay "
                             "runs offline unless told otherwise, and only a split in the local Hugging Face cache "
                             "loads offline: run `searchplay --online evaluate ...` once where the hub is reachable, "
                             "or unset hub_id and use evaluate.data_dir") from exc
    source = f"hf://{hub_id}/{name}/{split}"
    return _collect(name, source, ((f"{source}[{i}]", dict(row)) for i, row in enumerate(rows)), on_malformed)


def _fanout_subquestions(nodes: list[dict]):
    for node in nodes:
        yield node
        yield from _fanout_subquestions(node.get("decomposition") or [])


def load_fanoutqa(path: str | Path, on_malformed: str = "skip") -> LoadedBenchmark:
    """FanOutQA dev flattened into a single-hop smoke set (docs/decisions/eval.md, "FanOutQA flattening").

    Every node of every question's decomposition tree whose ``answer`` is one string becomes an item
    (id = the sub-question id, gold = that string, metadata = the parent question id and the evidence
    page title). Sub-questions with list/dict/number answers, and top-level questions (which need
    fan-out over many pages) are left out; a sub-question id seen twice is kept once.
    """
    path = Path(path)
    try:
        questions = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise BenchmarkError(f"{path}: cannot read the FanOutQA dev file ({exc}); run `searchplay assets`") from exc
    records, seen = [], set()
    for question in questions:
        for node in _fanout_subquestions(question.get("decomposition") or []):
            if not isinstance(node.get("answer"), str) or node.get("id") in seen:
                continue
            seen.add(node.get("id"))
            record = {"id": node.get("id"), "question": node.get("question"), "golden_answers": [node["answer"]],
                      "metadata": {"parent_id": question.get("id"),
                                   "evidence_title": (node.get("evidence") or {}).get("title")}}
            records.append((f"{path}:{question.get('id')}/{node.get('id')}", record))
    return _collect(FANOUTQA, str(path), records, on_malformed)


def _jsonl_lines(path: Path):
    """``(location, record-or-error)`` for every non-blank line of a JSONL file; a truncated file raises."""
    for number, record in jsonl_records(path, TruncatedBenchmarkError):
        if isinstance(record, json.JSONDecodeError):
            yield f"{path}:{number}", f"not valid JSON ({record.msg})"
        else:
            yield f"{path}:{number}", record


def _kg_pool(subgraphs_path: str | Path) -> Path:
    path = Path(subgraphs_path)
    if not path.is_file():
        raise BenchmarkError(f"benchmark {KG_HELDOUT!r}: {path} not found; run `searchplay kg` first "
                             "(or drop kg_heldout from evaluate.benchmarks)")
    return path


def _split_or_error(record: dict, location: str) -> str:
    """The record's split; a pool without the field is one error for the whole file, whatever on_malformed says."""
    try:
        return record_split(record, location)
    except ValueError as exc:
        raise BenchmarkError(str(exc)) from None


def load_kg_heldout(subgraphs_path: str | Path, params: Params | None = None,
                    on_malformed: str = "skip") -> LoadedBenchmark:
    """Template questions (``searchplay.templates.template_question``) from the ``kg_heldout`` split of the pool.

    The split is each record's ``split`` field, written by the kg stage; no model stage trains on it.
    The golds are every answer the KG gives to the question (``answers``, ``searchplay.kg.golds``), so a
    one-to-many hop does not make a correct answer wrong; pools written before that field use ``answer``.
    ``params`` is accepted for the loader signature and not read.
    """
    path = _kg_pool(subgraphs_path)

    def records():
        for location, record in _jsonl_lines(path):
            if isinstance(record, str):
                yield location, record
                continue
            if not isinstance(record, dict) or _split_or_error(record, location) != KG_HELDOUT:
                continue
            try:
                yield location, {"id": str(record["id"]), "question": kg_template_question(record),
                                 "golden_answers": list(record.get("answers") or [record["answer"]]),
                                 "metadata": {"num_hops": record.get("num_hops"),
                                              "waypoints": record.get("waypoints", [])}}
            except (KeyError, TypeError, IndexError) as exc:
                yield location, f"not a KG subgraph record (missing {exc})"

    return _collect(KG_HELDOUT, str(path), records(), on_malformed)


def kg_majority_answer(subgraphs_path: str | Path) -> str | None:
    """The most common answer of the training splits (self-play + warm-start) of the pool; None if none.

    Always giving it is ``kg_heldout``'s majority baseline. Lines that are not records are ignored
    here (``load_kg_heldout`` counts or rejects them).
    """
    path = _kg_pool(subgraphs_path)
    pool = [r for _, r in _jsonl_lines(path) if isinstance(r, dict) and "answer" in r]
    try:
        return majority_answer(pool)
    except ValueError as exc:  # a record without a split: the pool predates the three-way split
        raise BenchmarkError(str(exc)) from None


def kg_pool_path(params: Params) -> Path:
    """``<kg.out_dir>/subgraphs.jsonl``: the KG pool that ``kg_heldout`` is drawn from."""
    return Path(params.kg.out_dir) / "subgraphs.jsonl"


def load_benchmark(name: str, params: Params, data_dir: str | Path | None = None) -> LoadedBenchmark:
    """Load one benchmark by name, from the hub (``evaluate.hub_id``), the bundled assets, or ``data_dir``."""
    on_malformed = params.evaluate.on_malformed
    if name == FANOUTQA:
        from searchplay import assets

        loaded = load_fanoutqa(assets.resolve("bundled:fanoutqa-dev"), on_malformed)
        loaded.source = "bundled:fanoutqa-dev"  # its params id, not this machine's install path
        return loaded
    if name == KG_HELDOUT:
        return load_kg_heldout(kg_pool_path(params), params, on_malformed)
    if params.evaluate.hub_id:
        return load_from_hub(params.evaluate.hub_id, name, on_malformed)
    return load_flashrag_jsonl(benchmark_file(data_dir or params.evaluate.data_dir, name), name, on_malformed)
