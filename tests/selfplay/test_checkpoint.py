import errno
from collections import namedtuple

import pytest

from searchplay.cliutil import path_error_message
from searchplay.selfplay import checkpoint
from searchplay.selfplay.checkpoint import CheckpointManager, read_latest_pointer

Usage = namedtuple("Usage", "total used free")


def write_weights(text: str):
    return lambda folder: (folder / "weights.txt").write_text(text)


def test_save_renames_updates_latest_and_prunes(tmp_path):
    manager = CheckpointManager(tmp_path, keep=2)
    for iteration in (1, 2, 3):
        manager.save(iteration, {"iteration": iteration}, write_weights(f"w{iteration}"))
    assert [i for i, _ in manager.complete()] == [2, 3]
    assert read_latest_pointer(tmp_path).name == "iter_000003" == manager.latest().name
    assert (manager.latest() / "weights.txt").read_text() == "w3"
    assert not list(tmp_path.glob("*.partial"))


def test_a_failed_save_leaves_the_previous_checkpoint(tmp_path):
    manager = CheckpointManager(tmp_path, keep=2)
    manager.save(1, {"iteration": 1}, write_weights("w1"))

    def crash(folder):
        (folder / "weights.txt").write_text("half")
        raise KeyboardInterrupt("killed while writing")

    with pytest.raises(KeyboardInterrupt):
        manager.save(2, {"iteration": 2}, crash)
    assert manager.latest().name == "iter_000001"
    assert (tmp_path / "iter_000002.partial").exists()  # what a kill leaves behind ...
    assert manager.remove_partials() == [tmp_path / "iter_000002.partial"]  # ... and a resume removes
    assert manager.save(2, {"iteration": 2}, write_weights("w2")).name == "iter_000002"


def free_space(monkeypatch, free: int) -> None:
    monkeypatch.setattr(checkpoint.shutil, "disk_usage", lambda path: Usage(10**12, 10**12 - free, free))


def test_a_save_the_disk_cannot_hold_stops_before_writing_with_enospc(tmp_path, monkeypatch):
    manager = CheckpointManager(tmp_path, keep=2)
    manager.save(1, {"iteration": 1}, write_weights("w" * 5000))
    free_space(monkeypatch, 1000)  # less than iter_000001's 5 KB
    written = []
    with pytest.raises(OSError) as raised:
        manager.save(2, {"iteration": 2}, written.append)
    assert raised.value.errno == errno.ENOSPC and written == []
    assert "checkpoint iter_000002 needs about" in str(raised.value) and raised.value.filename == str(tmp_path)
    assert path_error_message(raised.value).startswith(  # the CLI's one line keeps the figures
        f"no space left on the device (writing {tmp_path}: checkpoint iter_000002 needs about 0.00 GiB")
    assert manager.latest().name == "iter_000001" and not list(tmp_path.glob("*.partial"))


def test_a_stream_error_on_a_full_disk_becomes_enospc_and_leaves_no_partial(tmp_path, monkeypatch):
    manager = CheckpointManager(tmp_path, keep=2)
    manager.save(1, {"iteration": 1}, write_weights("w1"))

    def fill_the_disk(folder):
        (folder / "optimizer.bin").write_text("half")
        free_space(monkeypatch, 0)
        raise RuntimeError("basic_ios::clear: iostream error")  # what torch.save raises on a full disk

    with pytest.raises(OSError, match="the disk filled while writing checkpoint iter_000002") as raised:
        manager.save(2, {"iteration": 2}, fill_the_disk)
    assert raised.value.errno == errno.ENOSPC and isinstance(raised.value.__cause__, RuntimeError)
    assert manager.latest().name == "iter_000001" and not list(tmp_path.glob("*.partial"))


def test_a_write_error_with_space_left_is_raised_as_it_is(tmp_path):
    manager = CheckpointManager(tmp_path, keep=2)

    def broken(folder):
        raise RuntimeError("a bug in the writer")

    with pytest.raises(RuntimeError, match="a bug in the writer"):
        manager.save(1, {"iteration": 1}, broken)
    assert manager.latest() is None


def test_a_folder_without_state_is_not_a_checkpoint_and_keep_is_validated(tmp_path):
    (tmp_path / "iter_000005").mkdir()
    assert CheckpointManager(tmp_path).latest() is None
    with pytest.raises(ValueError, match="keep"):
        CheckpointManager(tmp_path, keep=0)


def test_what_only_this_run_has_is_kept_beside_the_state_and_merged_back(tmp_path):
    import json

    from searchplay.selfplay.checkpoint import RUN_STATE_FILE, STATE_FILE, read_state

    state = {"iteration": 2, "mlflow_run_id": "abc123", "extra": {"set_position": 8, "handoff_s": 12.5},
             "history": [{"iteration": 1, "solver/accuracy": 0.2, "time/solve_s": 40.1},
                         {"iteration": 2, "solver/accuracy": 0.4, "time/solve_s": 38.7}]}
    folder = CheckpointManager(tmp_path).save(2, state, write_weights("w"))
    on_disk = json.loads((folder / STATE_FILE).read_text())
    assert on_disk == {"iteration": 2, "extra": {"set_position": 8},
                       "history": [{"iteration": 1, "solver/accuracy": 0.2}, {"iteration": 2, "solver/accuracy": 0.4}]}
    assert json.loads((folder / RUN_STATE_FILE).read_text())["mlflow_run_id"] == "abc123"
    assert read_state(folder) == state
    (folder / RUN_STATE_FILE).unlink()  # a checkpoint DVC checked out: what the run computed, no durations
    assert read_state(folder) == {**on_disk, "mlflow_run_id": None}
    (folder / RUN_STATE_FILE).write_text("{not json")
    assert read_state(folder)["history"] == on_disk["history"]  # an unreadable run state loses only itself


def test_two_runs_with_the_same_results_write_the_same_state_file(tmp_path):
    first = CheckpointManager(tmp_path / "a").save(1, {"iteration": 1, "mlflow_run_id": "run-a", "history": [
        {"iteration": 1, "train/loss": 0.5, "time/update_s": 80.0}]}, write_weights("w"))
    second = CheckpointManager(tmp_path / "b").save(1, {"iteration": 1, "mlflow_run_id": "run-b", "history": [
        {"iteration": 1, "train/loss": 0.5, "time/update_s": 95.5}]}, write_weights("w"))
    assert (first / "state.json").read_bytes() == (second / "state.json").read_bytes()
