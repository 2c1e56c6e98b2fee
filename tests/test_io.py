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
