import json

import pytest

from searchplay.io import write_jsonl
from searchplay.retrieval.index import (
    MANIFEST,
    RetrievalIndexError,
    build_index,
    choose_ann,
    fingerprint_path,
    read_manifest,
)
from searchplay.retrieval.search import LanceSearchTool


def test_manifest_records_how_the_index_was_built(tiny_index):
    manifest = read_manifest(tiny_index)
    assert manifest["rows"] == 60 and manifest["dimension"] == 1024
    assert manifest["embedder"] == "test-hashing" and manifest["fts"] is True
    assert manifest["ann"]["type"] is None


def test_a_rebuild_from_the_same_passages_has_the_same_fingerprint_though_its_files_differ(tmp_path):
    from tests.retrieval.conftest import TINY_PASSAGES, build_tiny_index

    index = build_tiny_index(tmp_path / "a")
    first = json.loads(fingerprint_path(index).read_text())
    files = {p.name for p in index.rglob("*.lance")}
    build_tiny_index(tmp_path / "a")  # the same passages again, as `dvc repro --force index` does
    assert json.loads(fingerprint_path(index).read_text()) == first
    assert {p.name for p in index.rglob("*.lance")} != files  # LanceDB's random file names: why the folder won't do
    assert first["rows"] == 60 and first["embedder"] == "test-hashing" and len(first["content_sha256"]) == 64
    edited = [dict(TINY_PASSAGES[0], text=TINY_PASSAGES[0]["text"] + " More."), *TINY_PASSAGES[1:]]
    other = build_tiny_index(tmp_path / "b", edited)
    assert json.loads(fingerprint_path(other).read_text())["content_sha256"] != first["content_sha256"]
    assert fingerprint_path(index) == tmp_path / "a" / "index.fingerprint.json"


def test_choose_ann_is_exact_below_the_threshold_and_ivf_sq_above():
    assert choose_ann(1000, ann_threshold=200_000).type is None
    choice = choose_ann(1_000_000, ann_threshold=200_000)
    assert choice.type == "IVF_SQ" and choice.num_partitions == 1000
    assert choose_ann(1_000_000, 0, "IVF_PQ", num_partitions=64).num_partitions == 64


def test_ann_index_is_built_above_the_threshold_and_searched(tmp_path, hashing_embedder):
    import lancedb

    passages = [{"id": str(i), "title": f"T{i}", "text": f"item {i} colour {i % 11} shape {i % 13}"}
                for i in range(600)]
    write_jsonl(tmp_path / "p.jsonl", passages)
    build_index(tmp_path / "p.jsonl", tmp_path / "idx", "passages", hashing_embedder, ann_threshold=100,
                num_partitions=4, fts=False, show_progress=False)
    indices = lancedb.connect(str(tmp_path / "idx")).open_table("passages").list_indices()
    assert [i.index_type for i in indices] == ["IvfSq"]
    tool = LanceSearchTool(tmp_path / "idx", "passages", hashing_embedder)
    # Recall over many queries, not one query's top-1: the index's k-means start and quantization decide near
    # ties (passage 113 shares five of passage 42's six words), which one exact rank would turn into a flaky test.
    targets = range(0, 600, 12)
    found = tool.search([f"item {i} colour {i % 11} shape {i % 13}" for i in targets], top_k=3)
    recall = sum(str(i) in [d.id for d in docs] for i, docs in zip(targets, found, strict=True)) / len(targets)
    assert recall >= 0.9
    with pytest.raises(RetrievalIndexError, match="full-text index"):
        LanceSearchTool(tmp_path / "idx", "passages", hashing_embedder, mode="fts")


def test_failed_build_leaves_the_previous_index_in_place(tmp_path, tiny_index, hashing_embedder):
    import shutil

    target = tmp_path / "index"
    shutil.copytree(tiny_index, target)
    (tmp_path / "empty.jsonl").write_text("")
    with pytest.raises(RetrievalIndexError, match="no passages"):
        build_index(tmp_path / "empty.jsonl", target, "passages", hashing_embedder, ann_threshold=10**6,
                    show_progress=False)
    assert json.loads((target / MANIFEST).read_text())["rows"] == 60
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_a_build_removes_what_a_killed_build_left_and_keeps_a_running_ones(tmp_path, hashing_embedder):
    """A build killed mid-way leaves its staging folder (tens of GB on wiki-18): the next build removes it, and
    leaves a folder whose process still runs."""
    import os
    import subprocess
    import sys

    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True).stdout.strip()
    killed, running = tmp_path / f".index.building-{gone}", tmp_path / f".index.building-{os.getppid()}"
    for folder in (killed, running):
        (folder / "data").mkdir(parents=True)
    write_jsonl(tmp_path / "passages.jsonl", [{"id": "1", "title": "Bern", "text": "Bern is a city."}])
    build_index(tmp_path / "passages.jsonl", tmp_path / "index", "passages", hashing_embedder, ann_threshold=10**6,
                show_progress=False)
    assert not killed.exists() and running.is_dir() and (tmp_path / "index" / MANIFEST).is_file()


def test_a_build_does_not_replace_a_file_or_a_folder_of_other_things(tmp_path, hashing_embedder):
    from tests.retrieval.conftest import TINY_PASSAGES

    write_jsonl(tmp_path / "passages.jsonl", TINY_PASSAGES)
    notes = tmp_path / "mine" / "notes.txt"
    notes.parent.mkdir()
    notes.write_text("keep me")
    for target, says in ((tmp_path / "passages.jsonl", "is a file"), (notes.parent, "holds files but no index")):
        with pytest.raises(RetrievalIndexError, match=says):  # e.g. --out given the passages by mistake
            build_index(tmp_path / "passages.jsonl", target, "passages", hashing_embedder, ann_threshold=10**6,
                        show_progress=False)
    assert notes.read_text() == "keep me" and len((tmp_path / "passages.jsonl").read_text().splitlines()) == 60
    (tmp_path / "empty").mkdir()  # an empty folder, or an index, is the index's place
    build_index(tmp_path / "passages.jsonl", tmp_path / "empty", "passages", hashing_embedder, ann_threshold=10**6,
                show_progress=False)
    assert read_manifest(tmp_path / "empty")["rows"] == 60


def test_a_cut_manifest_or_fingerprint_is_stale_not_a_crash(tmp_path):
    from searchplay.retrieval.index import rebuild_if_stale, stale_reason
    from tests.retrieval.conftest import build_tiny_index

    index = build_tiny_index(tmp_path)
    (index / MANIFEST).write_text('{"rows": 6')
    assert "does not read as the index's record" in stale_reason(index)
    with pytest.raises(RetrievalIndexError, match="not valid JSON"):
        read_manifest(index)
    build, calls = _rebuild(tmp_path)
    rebuild_if_stale(index, build)
    assert calls == [1] and read_manifest(index)["rows"] == 60 and stale_reason(index) is None


def test_missing_index_names_the_command_to_run(tmp_path):
    with pytest.raises(RetrievalIndexError, match="searchplay index build"):
        read_manifest(tmp_path / "nowhere")


def test_default_nprobes_is_a_fifth_of_the_partitions():
    from searchplay.retrieval.index import default_nprobes

    assert default_nprobes(316) == 64 and default_nprobes(1000) == 200 and default_nprobes(2) == 1


def _rebuild(root, passages=None):
    """The build ``rebuild_if_stale`` is given: the tiny index again, counting its calls."""
    from tests.retrieval.conftest import TINY_PASSAGES, build_tiny_index

    calls = []

    def build():
        calls.append(1)
        return build_tiny_index(root, passages or TINY_PASSAGES)
    return build, calls


def test_a_missing_index_folder_is_rebuilt_from_the_passages_to_its_fingerprint(tmp_path):
    import shutil

    from searchplay.retrieval.index import rebuild_if_stale, stale_reason
    from tests.retrieval.conftest import build_tiny_index

    index = build_tiny_index(tmp_path)
    recorded = fingerprint_path(index).read_bytes()
    build, calls = _rebuild(tmp_path)
    rebuild_if_stale(index, build)
    assert calls == [] and stale_reason(index) is None  # current: nothing to do
    shutil.rmtree(index)  # as in a `dvc exp run --temp` copy, which checks out only the fingerprint
    assert "there is no index" in stale_reason(index)
    rebuild_if_stale(index, build)
    assert calls == [1] and stale_reason(index) is None
    assert fingerprint_path(index).read_bytes() == recorded and read_manifest(index)["rows"] == 60


def test_an_index_folder_of_other_passages_is_rebuilt(tmp_path):
    from searchplay.retrieval.index import rebuild_if_stale, stale_reason
    from tests.retrieval.conftest import TINY_PASSAGES, build_tiny_index

    index = build_tiny_index(tmp_path)
    recorded = fingerprint_path(index).read_bytes()
    build_tiny_index(tmp_path, TINY_PASSAGES[:30])  # another commit's index, its fingerprint put back by a checkout
    fingerprint_path(index).write_bytes(recorded)
    assert "other passages or settings" in stale_reason(index)
    build, calls = _rebuild(tmp_path)
    rebuild_if_stale(index, build)
    assert calls == [1] and read_manifest(index)["rows"] == 60 and stale_reason(index) is None


def test_a_rebuild_that_differs_from_the_fingerprint_fails_and_keeps_the_recorded_one(tmp_path):
    import shutil

    from searchplay.retrieval.index import rebuild_if_stale
    from tests.retrieval.conftest import TINY_PASSAGES, build_tiny_index

    index = build_tiny_index(tmp_path)
    recorded = fingerprint_path(index).read_bytes()
    shutil.rmtree(index)
    build, calls = _rebuild(tmp_path, TINY_PASSAGES[:30])  # the passages changed since the index stage ran
    for _ in range(2):  # every later use fails the same way until the stage re-runs
        with pytest.raises(RetrievalIndexError, match=r"dvc repro -f index"):
            rebuild_if_stale(index, build)
    assert calls == [1, 1] and fingerprint_path(index).read_bytes() == recorded


def test_an_index_without_a_fingerprint_file_is_left_alone(tmp_path):
    from searchplay.retrieval.index import rebuild_if_stale, stale_reason

    build, calls = _rebuild(tmp_path)
    rebuild_if_stale(tmp_path / "nowhere", build)
    assert calls == [] and stale_reason(tmp_path / "nowhere") is None


def test_the_index_is_not_rebuilt_from_passages_that_are_not_there(tmp_path):
    from types import SimpleNamespace

    from searchplay.retrieval.index import build_from_params

    params = SimpleNamespace(corpus=SimpleNamespace(out=str(tmp_path / "passages.jsonl")), index=None)
    with pytest.raises(RetrievalIndexError, match="dvc repro corpus"):
        build_from_params(params)
