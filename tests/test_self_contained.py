"""The project cites only itself: a clone has none of the documents the project was planned from (the
paper digests, the design notes, the issue tracker), so no tracked text file points at them."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TEXT_SUFFIXES = {".py", ".md", ".yaml", ".yml", ".toml", ".html", ".json", ".csv", ".txt", ".cfg", ".ini", ""}
OUTSIDE = re.compile(
    r"(?<![/\w])(notes/)?(ssp|kg_wcr|eve|gdcr_sapo)\.md|\bnotes §"  # the paper digests
    r"|\b(DESIGN|STYLE)\.md"  # the planning documents
    r"|\b(anchors|offline_resources|stack_probe|vllm_cpu_probe)(\.md|\s*§)"  # the research notes
    r"|\.\./sha[r]ed/"  # the planning folder beside a checkout
    r"|\bissues? #?\d+\b|#\d{2,3}\b(?=[):,. ])",  # an issue tracker's numbers
    re.IGNORECASE)


def tracked_text_files() -> list[Path]:
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    paths = [ROOT / name for name in listed.decode().split("\0") if name]
    return [p for p in paths if p.suffix in TEXT_SUFFIXES and p.is_file() and p.stat().st_size < 2_000_000
            and p.name != "dvc.lock"]


def outside_citations(text: str) -> list[str]:
    return [match.group(0) for match in OUTSIDE.finditer(text)]


def test_no_tracked_file_cites_a_document_outside_the_repository():
    found = {}
    for path in tracked_text_files():
        if path == Path(__file__):
            continue
        hits = outside_citations(path.read_text(encoding="utf-8", errors="replace"))
        if hits:
            found[str(path.relative_to(ROOT))] = hits[:3]
    assert not found, f"these files cite documents a clone does not have: {found}"


def test_the_rule_sees_each_kind_of_outside_citation():
    planning, folder, tracker = "DESIGN" + ".md", "../" + "shared/", "iss" + "ue 41"  # not cited here either
    for text in ("see notes/ssp.md §3.8", f"as {planning} says", f"({tracker})", "fixed in #" + "44.",
                 folder + "notes/eve.md", "notes §8.3", "stack" + "_probe §5", "anch" + "ors.md §1.15"):
        assert outside_citations(text), text
    for text in ("Table 4, SSP §3.3", "docs/decisions/eve.md", "colour #945dd6", "step 12 of 36"):
        assert not outside_citations(text), text


CITED_FILE = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)*[\w-]+\.md)\b")
# Files of other repositories, named as such where they are cited (a data set's provenance).
UPSTREAM = {"data/benchmarks/README.md": {"nq_open/README.md"}}


def test_every_cited_document_is_in_the_repository():
    """Any ``name.md`` a tracked file cites exists in the repository, so no citation points outside it, whatever
    its name (a digest, a probe, a planning note)."""
    files = [path.relative_to(ROOT).as_posix() for path in tracked_text_files()]
    tracked = set(subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                                 check=True).stdout.split())
    missing = {}
    for name in files:
        if name == Path(__file__).relative_to(ROOT).as_posix():
            continue
        for match in CITED_FILE.finditer((ROOT / name).read_text(encoding="utf-8", errors="replace")):
            cited = match.group(1)
            if cited in UPSTREAM.get(name, ()) or any(t == cited or t.endswith("/" + cited) for t in tracked):
                continue
            missing.setdefault(name, []).append(cited)
    assert not missing, f"these files cite documents that are not in the repository: {missing}"
