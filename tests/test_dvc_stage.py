"""searchplay.dvc_stage: the stage DVC runs, its params, and a tag that equals its lock entry's hash."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

from searchplay.dvc_stage import entry_hash, read_lock, running_stage, tag_name

BIN = Path(sys.executable).parent
PROBE = """
import json, sys
from searchplay.dvc_stage import running_stage, stage_params, stage_tags
stage = running_stage(sys.argv, program="python")
with open("seen.json", "w") as handle:
    json.dump({"stage": stage.addressing, "params": stage_params(stage), "tags": stage_tags(stage)}, handle)
open(sys.argv[2], "w").write(sys.argv[1])
"""


def test_tag_names_are_valid_mlflow_keys():
    from mlflow.utils.validation import _validate_tag_name

    assert tag_name("selfplay@kg_wcr") == "dvc.stage.selfplay/kg_wcr"
    _validate_tag_name(tag_name("selfplay@kg_wcr"))


def test_the_entry_hash_leaves_the_outputs_out():
    entry = {"cmd": "searchplay report", "deps": [{"path": "a", "md5": "1"}], "params": {"params.yaml": {"k": 1}}}
    assert entry_hash({**entry, "outs": [{"path": "b", "md5": "2"}]}) == entry_hash(entry)
    assert entry_hash({**entry, "cmd": "searchplay report --x"}) != entry_hash(entry)


def test_outside_dvc_there_is_no_stage(monkeypatch):
    monkeypatch.delenv("DVC_ROOT", raising=False)
    assert running_stage(["report"]) is None


def test_a_stage_finds_itself_its_params_and_the_hash_dvc_then_writes(tmp_path):
    """A real ``dvc repro``: the stage's process finds its stage, the params it depends on and its inputs' hash;
    the lock entry DVC writes after the run hashes to the same value, and the other stages' tags come from the
    lock."""
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", "DVC_NO_ANALYTICS": "1"}
    (tmp_path / "probe.py").write_text(PROBE)
    (tmp_path / "data.txt").write_text("data\n")
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({"a": 1e-05, "b": {"c": 2}, "unread": 3}))  # 1e-05: YAML 1.2
    (tmp_path / "dvc.yaml").write_text(yaml.safe_dump({"stages": {
        "first": {"cmd": "python probe.py first out.txt", "deps": ["data.txt", "probe.py"], "params": ["a", "b"],
                  "outs": ["out.txt"]},
        "second": {"cmd": "python probe.py second out2.txt", "deps": ["out.txt", "probe.py"], "params": ["b"],
                   "outs": ["out2.txt"]},
    }}))
    for command in (["git", "init", "-q"], [str(BIN / "dvc"), "init", "-q"], [str(BIN / "dvc"), "repro", "first"]):
        subprocess.run(command, cwd=tmp_path, env=env, check=True, capture_output=True)
    seen = json.loads((tmp_path / "seen.json").read_text())
    lock = read_lock(tmp_path / "dvc.lock")["stages"]
    assert seen["stage"] == "first" and seen["params"] == ["a", "b"]
    assert seen["tags"] == {"dvc.stage.first": entry_hash(lock["first"]), "dvc.stage": "first"}
    subprocess.run([str(BIN / "dvc"), "repro", "second"], cwd=tmp_path, env=env, check=True, capture_output=True)
    seen = json.loads((tmp_path / "seen.json").read_text())
    lock = read_lock(tmp_path / "dvc.lock")["stages"]
    assert seen["params"] == ["b"] and seen["tags"] == {
        "dvc.stage.first": entry_hash(lock["first"]), "dvc.stage.second": entry_hash(lock["second"]),
        "dvc.stage": "second"}
