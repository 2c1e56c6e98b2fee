"""Corpus readers: FlashRAG/Search-R1 JSONL, plain JSONL, and the bundled Wikipedia lead sections.

Every reader yields ``Passage(id, title, text)`` and counts the lines it had to skip in a
``CorpusReport``; ``build_corpus`` writes ``passages.jsonl`` atomically and fails when the share of
malformed lines exceeds ``corpus.max_bad_line_share``. JSONL may be ``.gz`` / ``.bz2`` compressed; a
truncated file (``searchplay.io.jsonl_records``) always fails with ``TruncatedCorpusError``.

The bundled summaries are whole lead sections, so they are split into passages of about
``passage_words`` words as wiki-18 is (DPR, Karpukhin et al. 2020, §4.1: 100-word blocks); here the
split follows sentence boundaries (docs/decisions/retrieval.md). FlashRAG and plain JSONL rows are
taken as passages already (wiki-18 is distributed pre-split).
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from searchplay.io import InputError, TruncatedInputError, jsonl_records, write_jsonl

log = logging.getLogger(__name__)

MAX_REPORTED_BAD_LINES = 20  # examples kept in the report; all are counted
SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])")


class CorpusError(InputError, ValueError):
    """The corpus cannot be read or has too many malformed lines; the message says which and why."""


class TruncatedCorpusError(CorpusError, TruncatedInputError):
    """A corpus file that ends early; never read as a whole one (the CLI exits 2)."""


@dataclass(frozen=True)
class Passage:
    id: str
    title: str
    text: str

    def to_dict(self) -> dict[str, str]:
        return {"id": self.id, "title": self.title, "text": self.text}


@dataclass
class CorpusReport:
    """What a reader saw: lines read, lines skipped (with a few examples), passages produced."""

    source: str
    lines: int = 0
    bad_lines: int = 0
    passages: int = 0
    bad_examples: list[str] = field(default_factory=list)

    def bad(self, where: str, reason: str) -> None:
        self.bad_lines += 1
        if len(self.bad_examples) < MAX_REPORTED_BAD_LINES:
            self.bad_examples.append(f"{where}: {reason}")

    @property
    def bad_share(self) -> float:
        return self.bad_lines / self.lines if self.lines else 0.0

    def check(self, max_bad_line_share: float) -> None:
        """Raise ``CorpusError`` when too many lines were malformed (or nothing usable was read)."""
        if self.bad_share > max_bad_line_share:
            raise CorpusError(
                f"{self.source}: {self.bad_lines} of {self.lines} lines malformed ({self.bad_share:.2%} > "
                f"corpus.max_bad_line_share={max_bad_line_share:.2%}); first ones:\n  "
                + "\n  ".join(self.bad_examples))
        if self.passages == 0:
            raise CorpusError(f"{self.source}: no usable passages in {self.lines} lines")

    def to_dict(self) -> dict:
        return {"source": self.source, "lines": self.lines, "bad_lines": self.bad_lines,
                "passages": self.passages, "bad_examples": self.bad_examples}


def parse_contents(contents: str) -> tuple[str, str]:
    """Split wiki-18 ``contents`` (``"Title"\\ntext``) into (title, text), as Search-R1's formatter does."""
    title, _, text = contents.partition("\n")
    title = title.strip()
    if len(title) >= 2 and title[0] == title[-1] == '"':
        title = title[1:-1]
    return title.strip(), text.strip()


def join_contents(title: str, text: str) -> str:
    """The inverse of ``parse_contents``: the wiki-18 ``contents`` string of a passage."""
    return f'"{title}"\n{text}'


def split_sentences(text: str) -> list[str]:
    return [s for s in SENTENCE_END.split(text.strip()) if s]


def split_passages(text: str, passage_words: int = 100) -> list[str]:
    """Pack whole sentences into passages of at most ``passage_words`` words (about 100, as wiki-18).

    An article of n words becomes about ceil(n / passage_words) passages of similar length (a
    passage is closed once it reaches n / that count), so no tiny tail is left over. A sentence
    longer than the limit is cut into ``passage_words``-word pieces (DPR's plain rule).
    """
    total = len(text.split())
    target = math.ceil(total / max(1, math.ceil(total / passage_words)))
    passages: list[str] = []
    current: list[str] = []
    for sentence in split_sentences(text):
        words = sentence.split()
        if current and len(current) + len(words) > passage_words:
            passages.append(" ".join(current))
            current = []
        while len(words) > passage_words:
            passages.append(" ".join(words[:passage_words]))
            words = words[passage_words:]
        current.extend(words)
        if len(current) >= target:
            passages.append(" ".join(current))
            current = []
    if current:
        passages.append(" ".join(current))
    return passages


def _jsonl_objects(path: Path, report: CorpusReport) -> Iterator[tuple[int, dict]]:
    for number, record in jsonl_records(path, TruncatedCorpusError):
        report.lines += 1
        if isinstance(record, json.JSONDecodeError):
            report.bad(f"line {number}", f"not valid JSON ({record.msg})")
            continue
        if not isinstance(record, dict):
            report.bad(f"line {number}", f"expected a JSON object, found {type(record).__name__}")
            continue
        yield number, record


def _field(record: dict, key: str) -> str | None:
    value = record.get(key)
    if isinstance(value, int) and key == "id":
        return str(value)
    return value.strip() if isinstance(value, str) and value.strip() else None


def read_flashrag(path: Path, report: CorpusReport) -> Iterator[Passage]:
    """FlashRAG / Search-R1 JSONL: ``{"id": ..., "contents": "\\"Title\\"\\ntext"}`` per line."""
    for number, record in _jsonl_objects(path, report):
        passage_id, contents = _field(record, "id"), _field(record, "contents")
        if passage_id is None or contents is None:
            report.bad(f"line {number}", "needs non-empty 'id' and 'contents'")
            continue
        title, text = parse_contents(contents)
        if not title or not text:
            report.bad(f"line {number}", "'contents' must be '\"Title\"\\ntext' with both parts non-empty")
            continue
        yield Passage(passage_id, title, text)


def read_plain_jsonl(path: Path, report: CorpusReport) -> Iterator[Passage]:
    """Plain JSONL: ``{"id": ..., "title": ..., "text": ...}`` per line."""
    for number, record in _jsonl_objects(path, report):
        values = [_field(record, key) for key in ("id", "title", "text")]
        if any(value is None for value in values):
            missing = [key for key, value in zip(("id", "title", "text"), values, strict=True) if value is None]
            report.bad(f"line {number}", f"missing or empty {', '.join(missing)}")
            continue
        yield Passage(*values)


def kg_sample_titles() -> set[str]:
    """English Wikipedia titles of the bundled KG sample's entities (kept first by ``max_articles``)."""
    from searchplay.assets import bundled_sample_path

    titles = set()
    for line in bundled_sample_path().read_text(encoding="utf-8").splitlines():
        line = line.strip().rstrip(",")
        if line.startswith("{"):
            title = json.loads(line).get("sitelinks", {}).get("enwiki", {}).get("title")
            if title:
                titles.add(title)
    return titles


def keep_articles(articles: dict, max_articles: int, preferred_titles: set[str]) -> dict:
    """At most ``max_articles`` entries: preferred titles first, then the rest in file order."""
    first = [key for key, a in articles.items() if isinstance(a, dict) and a.get("title", key) in preferred_titles]
    chosen = set(first[:max_articles])
    for key in articles:
        if len(chosen) >= max_articles:
            break
        chosen.add(key)
    return {key: article for key, article in articles.items() if key in chosen}


def read_wiki_summaries(path: Path, report: CorpusReport, passage_words: int = 100,
                        max_articles: int | None = None) -> Iterator[Passage]:
    """The bundled lead sections (JSON title -> {title, extract, ...}), split into ~100-word passages.

    Ids are consecutive integers as strings, as in wiki-18, in the file's (title) order.
    ``max_articles`` keeps a subset (the quick profile): the KG sample's articles first, so
    questions built from it stay answerable by search.
    """
    try:
        articles = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise CorpusError(f"{path}: cannot read the bundled summaries ({exc})") from exc
    if not isinstance(articles, dict):
        raise CorpusError(f"{path}: expected a JSON object mapping title -> summary")
    if max_articles is not None:
        articles = keep_articles(articles, max_articles, kg_sample_titles())
    next_id = 0
    for key, article in articles.items():
        report.lines += 1
        if not isinstance(article, dict):
            report.bad(repr(key), "entry is not an object")
            continue
        title = (article.get("title") or key or "").strip()
        extract = article.get("extract")
        if not title or not isinstance(extract, str) or not extract.strip():
            report.bad(repr(key), "missing title or empty extract")
            continue
        for text in split_passages(extract, passage_words):
            yield Passage(str(next_id), title, text)
            next_id += 1


def read_corpus(source: str, path: str | Path, report: CorpusReport, passage_words: int = 100,
                max_articles: int | None = None) -> Iterator[Passage]:
    """Dispatch on ``corpus.source`` ('bundled', 'flashrag', 'jsonl')."""
    path = Path(path)
    if not path.exists():
        raise CorpusError(f"corpus file {path} does not exist (corpus.source={source!r}, corpus.path)")
    if path.is_dir():
        raise CorpusError(f"corpus.path {path} is a folder; give the corpus file in it (corpus.source={source!r})")
    if source == "bundled":
        return read_wiki_summaries(path, report, passage_words, max_articles)
    if source == "flashrag":
        return read_flashrag(path, report)
    if source == "jsonl":
        return read_plain_jsonl(path, report)
    raise CorpusError(f"unknown corpus.source {source!r}; expected 'bundled', 'flashrag' or 'jsonl'")


def corpus_path(source: str, path: str | None) -> str:
    """The file to read: ``corpus.path`` if set, else the bundled summaries for source='bundled'."""
    if path:
        return path
    if source == "bundled":
        from searchplay.assets import resolve

        return resolve("bundled:wiki-summaries")
    raise CorpusError(f"corpus.source={source!r} needs corpus.path (the JSONL file to read)")


def build_corpus(source: str, path: str | None, out: str | Path, passage_words: int = 100,
                 max_bad_line_share: float = 0.01, max_articles: int | None = None) -> CorpusReport:
    """Read, validate (Great Expectations) and write ``out`` atomically; returns the report.

    Nothing is written when the corpus has too many malformed lines or fails validation.
    """
    import pandas as pd

    from searchplay.quality.corpus import validate_passages

    source_path = corpus_path(source, path)
    report = CorpusReport(source=str(source_path))
    passages = [p.to_dict() for p in read_corpus(source, source_path, report, passage_words, max_articles)]
    report.passages = len(passages)
    if report.bad_lines:
        log.warning("%s: skipped %d malformed of %d lines", source_path, report.bad_lines, report.lines)
    report.check(max_bad_line_share)
    validate_passages(pd.DataFrame(passages, columns=["id", "title", "text"]))
    write_jsonl(out, passages)
    return report
