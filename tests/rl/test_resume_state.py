"""The resume state under FSDP2 with two CPU processes (torchrun, gloo): each rank writes its own shard, and a
fresh sharded run that reads the shards continues to the weights of an unbroken run, bit for bit.
``fsdp2_resume.py`` runs the ranks."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.processes import free_port, run

pytestmark = pytest.mark.slow  # three two-process runs start torch and transformers (~40 s on 2 cores)

SCRIPT = Path(__file__).with_name("fsdp2_resume.py")
BIN = Path(sys.executable).parent


def torchrun(mode: str, model: str, work: Path) -> None:
    run([str(BIN / "torchrun"), "--nproc_per_node", "2", "--master_addr", "127.0.0.1", "--master_port",
         str(free_port()), str(SCRIPT), mode, model, str(work)])


def test_each_rank_saves_its_shard_and_a_resume_reads_them_to_the_unbroken_weights(tiny_model_path, tmp_path):
    import torch
    from safetensors.torch import load_file
    from torch.distributed.checkpoint import FileSystemReader

    from searchplay.rl.resume_state import shard_files

    for mode in ("unbroken", "first", "resumed"):
        torchrun(mode, tiny_model_path, tmp_path)
    unbroken, first, resumed = (torch.load(tmp_path / f"{mode}.pt", weights_only=False)
                                for mode in ("unbroken", "first", "resumed"))
    assert unbroken["world"] == 2

    shards = shard_files(tmp_path / "state")
    assert [p.name for p in shards] == ["__0_0.distcp", "__1_0.distcp"]  # one file per rank, written by it
    assert sorted(p.name for p in (tmp_path / "state").glob("random_states_*.pkl")) == [
        "random_states_0.pkl", "random_states_1.pkl"]
    full = load_file(str(next(Path(tiny_model_path).glob("*.safetensors"))))
    halves = {name: shape for name, shape in unbroken["local_shapes"].items() if shape[0] < full[name].shape[0]}
    assert halves  # the ranks held halves of the weights, not copies
    saved = FileSystemReader(str(tmp_path / "state" / "dcp")).read_metadata().state_dict_metadata
    assert any(key.startswith("optimizer.state.") and key.endswith("exp_avg") for key in saved)
    assert sum(p.stat().st_size for p in shards) >= 3 * 4 * sum(t.numel() for t in full.values())  # weights + moments

    assert torch.equal(resumed["draw"], first["draw"])  # torch's generator came back with the state
    assert unbroken["weights"].keys() == resumed["weights"].keys() == full.keys()
    for name, weight in unbroken["weights"].items():
        assert torch.equal(resumed["weights"][name], weight), name
    moved = max((unbroken["weights"][n] - full[n]).abs().max().item() for n in full)
    assert moved > 1e-3  # the three steps really trained (the comparison is not between two copies of the start)


def test_a_failed_write_raises_the_os_error_not_dcps_base_exception(tmp_path, monkeypatch):
    """DCP wraps a failed write in ``CheckpointException``, a ``BaseException``: the checkpoint manager, which turns
    an ``OSError`` on a full disk into one line and removes the unfinished folder, gets the ``OSError`` itself."""
    import errno

    import torch
    from torch.distributed.checkpoint import filesystem

    from searchplay.rl.resume_state import save_resume_state

    def full_disk(self, plan, planner):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(filesystem.FileSystemWriter, "write_data", full_disk)
    model = torch.nn.Linear(2, 2)
    with pytest.raises(OSError) as raised:
        save_resume_state(tmp_path, model, torch.optim.AdamW(model.parameters()))
    assert raised.value.errno == errno.ENOSPC


def test_one_process_saves_and_loads_without_dcps_warning_and_lets_others_through(tmp_path):
    """Alone, DCP warns at every save and load that it assumes one process; ours asks for it (``no_dist``), so the
    warning only cluttered a first look's log. It is gone, the round trip still holds, and other warnings pass."""
    import warnings

    import torch

    from searchplay.rl import resume_state
    from searchplay.rl.resume_state import load_resume_state, save_resume_state

    torch.manual_seed(0)
    model = torch.nn.Linear(3, 2)
    optimizer = torch.optim.AdamW(model.parameters())
    model(torch.ones(1, 3)).sum().backward()
    optimizer.step()
    copy = torch.nn.Linear(3, 2)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        save_resume_state(tmp_path, model, optimizer)
        load_resume_state(tmp_path, copy, torch.optim.AdamW(copy.parameters()))
    assert not [w for w in seen if "torch.distributed" in str(w.message)], [str(w.message) for w in seen]
    assert torch.equal(copy.weight, model.weight)
    with pytest.warns(UserWarning, match="another"), resume_state._no_single_process_warning():
        warnings.warn("another", UserWarning, stacklevel=1)
