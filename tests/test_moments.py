"""MomentsOnDisk: AdamW's moments leave memory between steps and come back bit for bit."""

from __future__ import annotations

import logging

import pytest
import torch

from searchplay.moments import MOMENTS_DIR_ENV, MomentsOnDisk, memory_saver_enabled


@pytest.fixture(autouse=True)
def _the_folder_as_given(monkeypatch):
    monkeypatch.delenv(MOMENTS_DIR_ENV, raising=False)


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4))


def _train(model: torch.nn.Module, optimizer: torch.optim.Optimizer, steps: range) -> None:
    for step in steps:
        generator = torch.Generator().manual_seed(step)
        inputs = torch.randn(5, 8, generator=generator)
        optimizer.zero_grad(set_to_none=True)
        model(inputs).pow(2).mean().backward()
        optimizer.step()


def _adamw(model: torch.nn.Module) -> torch.optim.AdamW:
    return torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.01)


def _moments_in_memory(optimizer: torch.optim.Optimizer) -> int:
    return sum(1 for state in optimizer.state.values() for key in state if key in ("exp_avg", "exp_avg_sq"))


def _trained_pair(folder, steps: int):
    """The same training twice, the second with its moments on disk in ``folder``."""
    plain, spilled = _model(), _model()
    plain_opt, spilled_opt = _adamw(plain), _adamw(spilled)
    moments = MomentsOnDisk(spilled_opt, folder)
    _train(plain, plain_opt, range(steps))
    _train(spilled, spilled_opt, range(steps))
    return plain, plain_opt, spilled, spilled_opt, moments


def test_training_with_the_moments_on_disk_is_the_same_to_the_bit(tmp_path):
    plain, _, spilled, spilled_opt, moments = _trained_pair(tmp_path, 4)
    for a, b in zip(plain.parameters(), spilled.parameters(), strict=True):
        assert torch.equal(a, b)
    assert moments.on_disk and _moments_in_memory(spilled_opt) == 0
    assert moments.bytes_on_disk == 2 * 4 * sum(p.numel() for p in spilled.parameters())
    assert all(torch.is_tensor(state["step"]) for state in spilled_opt.state.values())  # scalars stay
    assert list(tmp_path.iterdir()) == []  # the file is unlinked from the start


def test_a_state_dict_holds_the_moments_and_they_go_back_to_disk(tmp_path):
    _, plain_opt, _, spilled_opt, moments = _trained_pair(tmp_path, 2)
    writes, real_write = [], moments._file.write
    moments._file.write = lambda data: writes.append(len(data)) or real_write(data)
    expected, saved = plain_opt.state_dict()["state"], spilled_opt.state_dict()["state"]
    assert moments.on_disk
    assert writes == []  # read back for the state dict, dropped again: the file still held them
    for index, state in expected.items():
        for key in ("exp_avg", "exp_avg_sq", "step"):
            assert torch.equal(saved[index][key], state[key])


def test_a_resumed_optimizer_continues_as_if_never_stopped(tmp_path):
    straight = _model()
    straight_opt = _adamw(straight)
    _train(straight, straight_opt, range(4))

    first = _model()
    first_opt = _adamw(first)
    MomentsOnDisk(first_opt, tmp_path / "a")
    _train(first, first_opt, range(2))
    checkpoint = {"model": first.state_dict(), "optimizer": first_opt.state_dict()}

    resumed = _model()
    resumed_opt = _adamw(resumed)
    moments = MomentsOnDisk(resumed_opt, tmp_path / "b")
    _train(resumed, resumed_opt, range(1))  # a stash from before the load must not survive it
    resumed.load_state_dict(checkpoint["model"])
    resumed_opt.load_state_dict(checkpoint["optimizer"])
    assert moments.on_disk and _moments_in_memory(resumed_opt) == 0
    _train(resumed, resumed_opt, range(2, 4))
    for a, b in zip(straight.parameters(), resumed.parameters(), strict=True):
        assert torch.equal(a, b)


def test_a_failed_write_keeps_the_moments_in_memory_and_says_so(tmp_path, caplog):
    plain, spilled = _model(), _model()
    plain_opt, spilled_opt = _adamw(plain), _adamw(spilled)
    moments = MomentsOnDisk(spilled_opt, tmp_path)

    def full_disk(_data):
        raise OSError(28, "No space left on device")

    moments._file.write = full_disk
    with caplog.at_level(logging.WARNING, logger="searchplay.moments"):
        _train(plain, plain_opt, range(3))
        _train(spilled, spilled_opt, range(3))
    assert "No space left on device" in caplog.text and "stay in memory" in caplog.text
    assert not moments.on_disk and _moments_in_memory(spilled_opt) == 2 * len(list(spilled.parameters()))
    for a, b in zip(plain.parameters(), spilled.parameters(), strict=True):
        assert torch.equal(a, b)


def test_a_cut_file_is_an_error_not_fresh_moments(tmp_path):
    model = _model()
    optimizer = _adamw(model)
    moments = MomentsOnDisk(optimizer, tmp_path)
    _train(model, optimizer, range(1))
    moments._file.truncate(moments.bytes_on_disk // 2)
    with pytest.raises(OSError, match="moments file ended after"):
        _train(model, optimizer, range(1, 2))


def test_the_environment_names_another_folder(tmp_path, monkeypatch):
    monkeypatch.setenv(MOMENTS_DIR_ENV, str(tmp_path / "fast-disk"))
    moments = MomentsOnDisk(_adamw(_model()), tmp_path / "checkpoints")
    assert moments.folder == tmp_path / "fast-disk" and moments.folder.is_dir()
    assert not (tmp_path / "checkpoints").exists()


def test_close_reads_the_moments_back_and_release_drops_them(tmp_path):
    model = _model()
    optimizer = _adamw(model)
    moments = MomentsOnDisk(optimizer, tmp_path)
    _train(model, optimizer, range(1))
    moments.close()
    assert not moments.on_disk and _moments_in_memory(optimizer) == 8
    _train(model, optimizer, range(1, 2))  # no hooks left: the moments stay in memory
    assert _moments_in_memory(optimizer) == 8

    other = _model()
    other_opt = _adamw(other)
    dropped = MomentsOnDisk(other_opt, tmp_path)
    _train(other, other_opt, range(1))
    dropped.release()
    assert not dropped.on_disk and dropped.bytes_on_disk == 0


@pytest.mark.parametrize(("setting", "device", "expected"), [
    ("auto", "cpu", True), ("auto", "cuda", False), (True, "cuda", True), (False, "cpu", False)])
def test_the_setting_resolves_auto_on_the_cpu_only(setting, device, expected):
    assert memory_saver_enabled(setting, device) is expected
