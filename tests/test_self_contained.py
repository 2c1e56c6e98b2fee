"""The project cites only itself: a clone has none of the documents the project was planned from (the
paper digests, the design notes, the issue tracker), so no tracked text file points at them, by name or by any
citation of a document (``name.md``, ``docs/...``, ``file §N.M``) that is not a file of the repository."""

from __future__ import annotations

import posixpath
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
    r"|\bissues?\s+#?\d+\b|#\d{2,3}\b(?=[):,. ])",  # an issue tracker's numbers
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


# A citation of a document: a file a reader is sent to. Four shapes, each checked to resolve to a tracked file or
# folder, relative to the citing file, to the repository root or to docs/. A name with a template before it
# (``<variant>/report.md``, ``${key}``, ``*``) is a pattern of outputs, not one file; a bare ``.txt`` or ``.html``
# is a scratch file a test writes (``out.txt``) or a page the code writes, so those count with their folder only.
DOCUMENT = re.compile(
    r"(?<![\w/.*<>{}$-])((?:[\w.-]+/)*[\w-]+\.(?:md|rst|pdf))\b(?![\w/-])"  # a document, by any name
    r"|(?<![\w/.*<>{}$-])((?:[\w.-]+/)+[\w-]+\.(?:txt|html))\b(?![\w/-])"  # a text or page named with its folder
    r"|(?<![\w/.-])(docs/[\w./-]*\w)"  # anything under docs/
    r"|(?<![\w/.*<>{}$-])((?:[\w.-]+/)*[\w.-]+\.\w+)(?=\s*§)")  # any file a section sign follows
URL = re.compile(r"\b[a-z][a-z0-9+.-]*://\S+")  # a web page is cited by its URL, not a repository path
# Files of other repositories, named as such where they are cited (a data set's provenance).
UPSTREAM = {"data/benchmarks/README.md": {"nq_open/README.md"}}
# A bare file name that src/ quotes is a file the code writes or reads at run time (compare.md, report.md,
# rq1.md), named beside the code that writes it; a path with a folder must resolve, or be ignored by git below.
QUOTED_NAME = re.compile(r"[\"']([\w.-]+\.\w+)[\"']")


def tracked_paths() -> set[str]:
    """Every tracked file and every folder above one, relative to the root."""
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    return set(files) | {name.rsplit("/", i)[0] for name in files for i in range(1, name.count("/") + 1)}


def runtime_names() -> set[str]:
    """The bare file names quoted in src/: the files the code writes or reads at run time."""
    return {name for path in (ROOT / "src").rglob("*.py")
            for name in QUOTED_NAME.findall(path.read_text(encoding="utf-8"))}


def cited_documents(text: str) -> list[str]:
    """Every citation-shaped reference to a document in ``text``, URLs left out."""
    return [next(group for group in match.groups() if group).rstrip(".")
            for match in DOCUMENT.finditer(URL.sub(" ", text))]


def unresolved(text: str, citing: str, tracked: set[str], runtime: set[str]) -> list[str]:
    """The documents ``text`` (of tracked file ``citing``) cites that resolve to no tracked path, relative to
    ``citing``'s folder, the root or docs/, and are not a run-time file name or an upstream file."""
    missing = []
    for cited in cited_documents(text):
        bases = (posixpath.dirname(citing), "", "docs")
        if any(posixpath.normpath(posixpath.join(base, cited)) in tracked for base in bases):
            continue
        if ("/" not in cited and cited in runtime) or cited in UPSTREAM.get(citing, ()):
            continue
        missing.append(cited)
    return missing


def ignored(paths: list[str]) -> set[str]:
    """Those of ``paths`` git ignores: what a command writes at run time (dvc_plots/, .dvc/plots-offline.html)."""
    found = subprocess.run(["git", "check-ignore", "--no-index", "--stdin"], cwd=ROOT, input="\n".join(paths),
                           capture_output=True, text=True)
    return set(found.stdout.split())


def test_every_cited_document_is_in_the_repository():
    """Every document a tracked text file cites, whatever its name (a digest, a probe, a planning note, a
    section of one), is a file or folder of the repository."""
    tracked, runtime, this = tracked_paths(), runtime_names(), Path(__file__).relative_to(ROOT).as_posix()
    missing = {}
    for path in tracked_text_files():
        name = path.relative_to(ROOT).as_posix()
        found = unresolved(path.read_text(encoding="utf-8", errors="replace"), name, tracked, runtime)
        if found and name != this:  # its examples below cite what is not here on purpose
            missing[name] = found
    left_out = ignored(sorted({cited for found in missing.values() for cited in found}))
    missing = {name: kept for name, found in missing.items() if (kept := [c for c in found if c not in left_out])}
    assert not missing, f"these files cite documents that are not in the repository: {missing}"


def test_a_citation_of_any_document_that_is_not_here_is_found():
    tracked, runtime = tracked_paths(), runtime_names()
    citing = "src/searchplay/agent/rollout.py"
    for text in ("as anch" + "ors.md §1.15 says", "(decisions: rl.md)", "see docs/decisions/nothing.md",
                 "docs/img/none.png", "seeds/004_" + "ssp.txt", "probe.py §5", "notes/eve.rst"):
        assert unresolved(text, citing, tracked, runtime), text
    for text in ("docs/decisions/agent.md §2", "(docs/decisions/rl.md)", "reports/compare/compare.md",
                 "trajectory.py §1", "https://example.org/guide.md", "compare.md and report.md", "docs/img",
                 "``<root>/.dvc/plots-offline.html``", "SSP §3.3, App. A.2", "README.md", "decisions/eve.md"):
        assert not unresolved(text, citing, tracked, runtime), text
    assert ignored(["dvc_plots/index.html", "docs/usage.md"]) == {"dvc_plots/index.html"}
