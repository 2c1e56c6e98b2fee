"""AdamW's moments on disk between optimizer steps.

AdamW keeps two moments for every weight (``exp_avg``, ``exp_avg_sq``): twice the model, 1.0 GiB for
SmolLM2-135M in fp32. Only ``optimizer.step()`` reads them; through the forward and backward, where a training
stage reaches its peak memory, they sit idle. ``MomentsOnDisk`` writes them to an unlinked file after each
step and reads them back before the next (the idea of ZeRO-Offload's NVMe tier, on one process). The bytes
come back as they went, so training is the same to the bit; what it costs is the write and the read, about
1 s a step for 1 GiB on an SSD (docs/benchmarks.md).

The hooks sit on the optimizer itself, so every caller stays as it is: ``step`` reads the moments back
first and writes them out after; ``state_dict`` (a checkpoint) reads them back and hands them over; a
``load_state_dict`` (a resume) sends the loaded ones to disk. The file is unlinked from the start, so a
killed run leaves nothing behind. A failed write (a full disk) keeps the moments in memory and says so.
``SEARCHPLAY_MOMENTS_DIR`` puts the file elsewhere than the stage's checkpoint folder (a faster disk; never a
tmpfs, whose pages are memory).
"""

from __future__ import annotations

import logging
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

log = logging.getLogger(__name__)

MomentsSetting = bool | Literal["auto"]
MOMENTS_DIR_ENV = "SEARCHPLAY_MOMENTS_DIR"  # where the file goes instead of the folder the trainer names


def memory_saver_enabled(setting: MomentsSetting, device: str) -> bool:
    """A result-neutral memory knob (``*_on_disk``, ``selfplay.recompute_layers``) resolved on ``device``:
    true / false as given, 'auto' on a CPU only (an accelerator's memory is not what they spare at this scale,
    and a copy through the host would cost more)."""
    return device == "cpu" if setting == "auto" else bool(setting)


@dataclass(frozen=True)
class _Stashed:
    """Where one state tensor went: its owner's state key, shape, dtype, device and byte offset in the file."""

    param: Any
    key: str
    shape: tuple[int, ...]
    dtype: Any
    device: Any
    offset: int
    nbytes: int


class MomentsOnDisk:
    """Keeps ``optimizer``'s per-parameter state tensors (AdamW's moments) in an unlinked file in ``folder``
    (or ``$SEARCHPLAY_MOMENTS_DIR``) between steps; scalars (AdamW's ``step``) stay in memory. Install once,
    right after the optimizer is made. ``close`` reads the moments back and removes the file; ``release`` drops
    both (the training is over)."""

    def __init__(self, optimizer: Any, folder: str | Path) -> None:
        self.optimizer = optimizer
        self.folder = Path(os.environ.get(MOMENTS_DIR_ENV) or folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        # lives as long as the trainer, closed by close/release; unlinked at once, so a kill leaves nothing
        self._file: Any = tempfile.TemporaryFile(dir=self.folder, prefix="moments-")  # noqa: SIM115
        self._stashed: list[_Stashed] = []
        self._file_holds: list[_Stashed] = []  # after a restore: what the file still holds, until a step changes it
        self.bytes_on_disk = 0
        self._logged = False
        self._handles = [
            optimizer.register_step_pre_hook(lambda *_: self._restore_for_step()),
            optimizer.register_step_post_hook(lambda *_: self.stash()),
            optimizer.register_state_dict_pre_hook(lambda _: self.restore()),
            optimizer.register_state_dict_post_hook(lambda _, state_dict: self._stash_after(state_dict)),
            optimizer.register_load_state_dict_pre_hook(lambda *_: self._forget()),
            optimizer.register_load_state_dict_post_hook(lambda _: self.stash()),
        ]

    @property
    def on_disk(self) -> bool:
        """True while the moments are in the file, not in memory."""
        return bool(self._stashed)

    def stash(self) -> None:
        """Write every non-scalar state tensor to the file and drop it from memory (a no-op when already there).

        Each parameter's state dict is replaced, not emptied, so a ``state_dict()`` handed out before keeps
        its tensors."""
        import torch

        if self._file is None or self._stashed:
            return
        stashed, offset = [], 0
        try:
            self._file.seek(0)
            self._file.truncate()
            for param, state in self.optimizer.state.items():
                for key, value in state.items():
                    if not torch.is_tensor(value) or value.dim() == 0:
                        continue
                    data = value.detach().to("cpu").contiguous()
                    self._file.write(data.view(-1).view(torch.uint8).numpy())
                    stashed.append(_Stashed(param, key, tuple(value.shape), value.dtype, value.device, offset,
                                            data.numel() * data.element_size()))
                    offset += stashed[-1].nbytes
            self._file.flush()
        except OSError as exc:
            log.warning("could not write the optimizer's moments to %s (%s); they stay in memory", self.folder, exc)
            self.close()
            return
        self._drop(stashed)
        self.bytes_on_disk = offset
        if not self._logged and stashed:
            log.info("the optimizer's moments wait on disk between steps: %.2f GiB in an unlinked file in %s",
                     offset / 2**30, self.folder)
            self._logged = True

    def restore(self) -> None:
        """Read the stashed tensors back into the optimizer's state (a no-op when they are in memory)."""
        import torch

        if not self._stashed:
            return
        self._file.seek(0)
        for entry in self._stashed:
            value = torch.empty(entry.shape, dtype=entry.dtype)
            view = memoryview(value.view(-1).view(torch.uint8).numpy())
            read = 0
            while read < entry.nbytes:
                count = self._file.readinto(view[read:])
                if not count:
                    raise OSError(f"{self.folder}: the optimizer's moments file ended after {entry.offset + read} "
                                  f"of {self.bytes_on_disk} bytes")
                read += count
            self.optimizer.state[entry.param][entry.key] = value.to(entry.device)
        self._stashed, self._file_holds = [], self._stashed  # the file still holds these values

    def close(self) -> None:
        """Read stashed moments back, then remove the hooks and the file: the optimizer holds its state as
        it would have without this."""
        self.restore()
        self._detach()

    def release(self) -> None:
        """Drop the file and the moments in it without reading them back (the training is over)."""
        self._stashed, self._file_holds = [], []
        self._detach()

    def _detach(self) -> None:
        self._file_holds = []
        for handle in self._handles:
            handle.remove()
        self._handles = []
        if self._file is not None:
            self._file.close()
            self._file = None
        self.bytes_on_disk = 0

    def _drop(self, stashed: list[_Stashed]) -> None:
        """Take the tensors ``stashed`` names out of the optimizer's state (each parameter's dict replaced)."""
        moved: dict[Any, set[str]] = {}
        for entry in stashed:
            moved.setdefault(entry.param, set()).add(entry.key)
        for param, keys in moved.items():
            self.optimizer.state[param] = {k: v for k, v in self.optimizer.state[param].items() if k not in keys}
        self._stashed, self._file_holds = stashed, []

    def _restore_for_step(self) -> None:
        self.restore()
        self._file_holds = []  # the step changes the moments: the file's copy is stale from here

    def _forget(self) -> None:
        """A loaded state replaces whatever the file holds."""
        self._stashed, self._file_holds = [], []

    def _stash_after(self, state_dict: dict[str, Any]) -> dict[str, Any]:
        """After ``state_dict()``: the moments it read back are still in the file, so they are only dropped."""
        if self._file_holds:
            self._drop(self._file_holds)
        else:
            self.stash()
        return state_dict
