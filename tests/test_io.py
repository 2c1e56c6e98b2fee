import json

import pytest

from searchplay.io import (
    TruncatedInputError,
    atomic_dir,
    atomic_write,
    jsonl_records,
    read_jsonl,
    write_json,
    write_jsonl,
)


def test_atomic_write_keeps_the_old_file_when_the_writer_fails(tmp_path):
    target = tmp_path / "out.json"
    write_json(target, {"version": 1})
    with pytest.raises(RuntimeError), atomic_write(target) as handle:
        handle.write('{"version": 2, "torn')
        raise RuntimeError("killed mid-write")
    assert json.loads(target.read_text()) == {"version": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]  # no temp file left behind


def test_jsonl_round_trip_and_line_numbers_in_errors(tmp_path):
    path = tmp_path / "x.jsonl"
    assert write_jsonl(path, [{"a": 1}, {"a": "é"}]) == 2
    assert list(read_jsonl(path)) == [{"a": 1}, {"a": "é"}]
    path.write_text('{"a": 1}\n{"a": \n')
    with pytest.raises(ValueError, match=r"x\.jsonl:2"):
        list(read_jsonl(path))


def test_atomic_write_follows_the_umask_not_mkstemps_0600(tmp_path):
    import os
    import stat

    old = os.umask(0o022)
    try:
        write_json(tmp_path / "m.json", {"a": 1})
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "m.json").stat().st_mode) == 0o644


def _dead_pid() -> int:
    import subprocess

    process = subprocess.Popen(["true"])
    process.wait()
    return process.pid


def test_atomic_dir_swaps_in_only_a_complete_folder(tmp_path):
    target = tmp_path / "store"
    target.mkdir()
    (target / "graph.sqlite").write_text("old")
    with pytest.raises(RuntimeError), atomic_dir(target) as staging:
        (staging / "graph.sqlite").write_text("half")
        raise RuntimeError("killed mid-build")
    assert (target / "graph.sqlite").read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["store"]  # no staging folder left behind
    with atomic_dir(target) as staging:
        (staging / "graph.sqlite").write_text("new")
    assert [p.name for p in tmp_path.iterdir()] == ["store"] and (target / "graph.sqlite").read_text() == "new"


def test_atomic_dir_clears_what_killed_processes_left(tmp_path):
    target, dead = tmp_path / "store", _dead_pid()
    (tmp_path / f".store.building-{dead}").mkdir()
    (tmp_path / f".store.building-{dead}" / "shard-0.sqlite").write_text("half")
    (tmp_path / f".store.old-{dead}").mkdir()  # killed between its two renames: the previous store
    (tmp_path / f".store.old-{dead}" / "graph.sqlite").write_text("previous")
    (tmp_path / ".store.notes").write_text("not ours")
    with pytest.raises(RuntimeError), atomic_dir(target):
        raise RuntimeError("fails again")
    assert (target / "graph.sqlite").read_text() == "previous"
    assert sorted(p.name for p in tmp_path.iterdir()) == [".store.notes", "store"]


@pytest.mark.parametrize("compress", ["gzip", "bz2"])
def test_jsonl_records_rejects_a_cut_compressed_stream(tmp_path, compress):
    import bz2
    import gzip

    text = "".join(json.dumps({"id": i, "text": "word " * 20}) + "\n" for i in range(200)).encode()
    whole = gzip.compress(text) if compress == "gzip" else bz2.compress(text)
    path = tmp_path / f"c.jsonl.{'gz' if compress == 'gzip' else 'bz2'}"
    path.write_bytes(whole)
    assert len(list(jsonl_records(path))) == 200
    path.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(TruncatedInputError, match=r"c\.jsonl\.(gz|bz2) is truncated: the compressed stream ends"):
        list(jsonl_records(path))


def test_jsonl_records_rejects_a_cut_last_line_and_hands_back_a_bad_middle_one(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_text('{"a": 1}\n{oops\n\n{"a": 2}')  # a complete last line needs no newline
    first, bad, last = jsonl_records(path)
    assert first == (1, {"a": 1}) and isinstance(bad[1], json.JSONDecodeError) and last == (4, {"a": 2})
    path.write_text('{"a": 1}\n{"a": 2, "b": "cut mid')
    with pytest.raises(TruncatedInputError, match=r"x\.jsonl is truncated: its last line \(2\) has no newline"):
        list(jsonl_records(path))
    path.write_bytes('{"a": "é"}\n{"a": "é'.encode()[:-1])  # cut inside the two bytes of é
    with pytest.raises(TruncatedInputError, match="cut inside a character"):
        list(jsonl_records(path))


def test_a_truncated_input_exits_2_so_prefect_does_not_retry_it():
    from searchplay.cliutil import EXIT_BAD_PARAMS, exit_code_for

    assert exit_code_for(TruncatedInputError("x.jsonl.gz is truncated")) == EXIT_BAD_PARAMS == 2


def test_a_second_writer_of_the_same_outputs_fails_at_once_naming_the_first(tmp_path):
    import os

    from searchplay.io import OutputsBusyError, exclusive_outputs

    folder = tmp_path / "data" / "kg"
    with exclusive_outputs(folder, "kg extract"):
        busy = f"being written by pid {os.getpid()} \\(`searchplay kg extract`\\)"
        with pytest.raises(OutputsBusyError, match=busy), exclusive_outputs(folder, "kg extract"):
            pass
        assert not (folder / ".kg.lock").exists()  # the lock sits beside the outputs, not among them
    with exclusive_outputs(folder, "kg extract"):  # free again once the first is done
        pass


def test_the_cli_refuses_a_concurrent_kg_extract_in_one_line(tmp_path):
    from typer.testing import CliRunner

    from searchplay.cli import app
    from searchplay.io import exclusive_outputs

    with exclusive_outputs(tmp_path / "kg", "kg extract"):
        result = CliRunner().invoke(app, ["kg", "extract", "--out", str(tmp_path / "kg")])
    assert result.exit_code == 2 and "busy" in result.output and "Traceback" not in result.output


def test_the_cli_refuses_a_concurrent_corpus_build_in_one_line(tmp_path):
    from typer.testing import CliRunner

    from searchplay.cli import app
    from searchplay.io import exclusive_outputs

    out = tmp_path / "corpus" / "passages.jsonl"
    with exclusive_outputs(out, "corpus build"):
        result = CliRunner().invoke(app, ["corpus", "build", "--source", "bundled", "--out", str(out)])
    assert result.exit_code == 2 and "busy" in result.output and "Traceback" not in result.output
    assert not out.exists()


def test_a_run_killed_inside_restored_afterwards_is_put_back_by_the_next(tmp_path):
    """SIGKILL skips ``finally``: a quick run killed while params.yaml held its overrides would leave them there
    for the next plain `dvc repro`. The bytes wait beside the file, and the next block puts them back first."""
    from searchplay.io import restored_afterwards

    path, kept = tmp_path / "params.yaml", tmp_path / ".params.yaml.before-run"
    path.write_bytes(b"# kept\nrows: 100\n")
    block = restored_afterwards(path)
    block.__enter__()  # the run starts, writes its overrides and is killed: its block never ends
    path.write_text("rows: 3\n")
    assert kept.read_bytes() == b"# kept\nrows: 100\n"
    with restored_afterwards(path):
        assert path.read_bytes() == b"# kept\nrows: 100\n"  # put back before this run's block begins
        path.write_text("rows: 5\n")
    assert path.read_bytes() == b"# kept\nrows: 100\n" and not kept.exists()


def test_restored_afterwards_puts_the_bytes_back_after_a_change_or_a_failure(tmp_path):
    from searchplay.io import restored_afterwards

    path = tmp_path / "params.yaml"
    path.write_bytes(b"# kept\nrows: 100\n")
    with restored_afterwards(path):
        path.write_text("rows: 3\n")
    assert path.read_bytes() == b"# kept\nrows: 100\n"
    with pytest.raises(KeyboardInterrupt), restored_afterwards(path):
        path.write_text("rows: 3\n")
        raise KeyboardInterrupt
    assert path.read_bytes() == b"# kept\nrows: 100\n"
    inode = path.stat().st_ino
    with restored_afterwards(path):
        pass
    assert path.stat().st_ino == inode  # unchanged: not written again
    with restored_afterwards(path):
        path.unlink()
    assert path.read_bytes() == b"# kept\nrows: 100\n"
    with restored_afterwards(tmp_path / "absent.yaml"):
        (tmp_path / "absent.yaml").write_text("rows: 3\n")
    assert not (tmp_path / "absent.yaml").exists()


def test_the_code_digest_holds_the_recipes_loaded_from_outside_the_package(tmp_path, monkeypatch):
    """A recipe named in SEARCHPLAY_RECIPES runs in the stages as the package does: another version of it must
    not resume a self-play run or reuse an evaluation's answers that the first one made."""
    from searchplay.io import RECIPES_ENV, code_digest

    monkeypatch.delenv(RECIPES_ENV, raising=False)
    package_only = code_digest()
    recipe = tmp_path / "lab_recipe"
    recipe.mkdir()
    (recipe / "__init__.py").write_text("NAME = 'lab'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv(RECIPES_ENV, "lab_recipe")
    first = code_digest()
    (recipe / "reward.py").write_text("def reward(): return 1.0\n")
    assert len({package_only, first, code_digest()}) == 3
    monkeypatch.setenv(RECIPES_ENV, "lab_recipe_not_installed")
    assert code_digest() not in (package_only, first)  # its absence counts; the loader reports it
