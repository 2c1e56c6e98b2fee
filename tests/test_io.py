import json

import pytest

from searchplay.io import atomic_write, read_jsonl, write_json, write_jsonl


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
