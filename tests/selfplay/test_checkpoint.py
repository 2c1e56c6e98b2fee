import pytest

from searchplay.selfplay.checkpoint import CheckpointManager, read_latest_pointer


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


def test_a_folder_without_state_is_not_a_checkpoint_and_keep_is_validated(tmp_path):
    (tmp_path / "iter_000005").mkdir()
    assert CheckpointManager(tmp_path).latest() is None
    with pytest.raises(ValueError, match="keep"):
        CheckpointManager(tmp_path, keep=0)
