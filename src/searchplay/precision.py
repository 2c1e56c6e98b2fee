"""Where bf16 pays: the hardware test behind every ``auto`` precision knob.

bf16 is fast only where the hardware has bf16 instructions: a CUDA device with bf16, an x86 CPU with
AVX512-BF16 or AMX, an Arm CPU with its BF16 extension. Elsewhere PyTorch emulates it, and a bf16 forward is
several times SLOWER than fp32, so ``auto`` means fp32 there. Measured: one warm-start SFT step 96 s under
bf16 autocast on a 2-core AMD EPYC without AVX512 (docs/decisions/warmstart.md); on a 2-core Intel Xeon with
AVX512 but no AVX512-BF16 (Cascade Lake), embedding at 0.33x and the self-play update at 0.45x of fp32
(docs/benchmarks.md).

oneDNN's own test (``torch.ops.mkldnn._is_mkldnn_bf16_supported``) is not enough on x86: it accepts any CPU
with AVX512 BW/VL/DQ, where oneDNN emulates the bf16 arithmetic.
"""

from __future__ import annotations

import functools
import logging
import platform
from typing import Any, Literal

log = logging.getLogger(__name__)

AutocastSetting = bool | Literal["auto"]
X86 = ("x86_64", "amd64", "i386", "i686")


def cpu_bf16_instructions() -> str | None:
    """The bf16 instruction set this CPU has ('AMX', 'AVX512-BF16', 'Arm BF16'), or None."""
    import torch

    if platform.machine().lower() in X86:
        if torch.cpu._is_amx_tile_supported():
            return "AMX"
        return "AVX512-BF16" if torch.cpu._is_avx512_bf16_supported() else None
    return "Arm BF16" if torch.ops.mkldnn._is_mkldnn_bf16_supported() else None  # Arm: oneDNN checks BF16


def bf16_is_native(device: str) -> bool:
    """True on a CUDA device with bf16 support or a CPU with bf16 instructions (``cpu_bf16_instructions``);
    the first call per device logs what ``auto`` resolves to."""
    native, _ = _resolve(device)
    _log_once(device)
    return native


def precision_note(device: str) -> str:
    """What every ``auto`` precision knob resolves to on ``device``, and why, in one line for the log."""
    native, reason = _resolve(device)
    return f"auto precision: {'bf16' if native else 'fp32'} ({reason})"


def _resolve(device: str) -> tuple[bool, str]:
    """(bf16 is native on ``device``, why)."""
    import torch

    if device.startswith("cuda"):
        native = bool(torch.cuda.is_available() and torch.cuda.is_bf16_supported())
        return native, f"{device} {'supports' if native else 'lacks'} bf16"
    found = cpu_bf16_instructions()
    if found:
        return True, f"this CPU has {found}"
    return False, "this CPU has no bf16 instructions: no AVX512-BF16, AMX or Arm BF16"


@functools.cache
def _log_once(device: str) -> None:
    log.info(precision_note(device))


def autocast_enabled(setting: AutocastSetting, device: str) -> bool:
    """An ``autocast_bf16`` knob resolved on ``device``: true / false as given, 'auto' where bf16 is native."""
    return bf16_is_native(device) if setting == "auto" else bool(setting)


def skip_nonfinite_step(optimizer: Any, grad_norm: float, step: int) -> bool:
    """``optimizer.step()`` unless the gradient norm is NaN or inf (an overflow, a bf16 blow-up), which would write
    NaN into every weight the optimizer touches: that step is skipped with a warning, as verl's actor does. True
    where the optimizer stepped. Every process of a run sees the same global norm, so all skip together."""
    import math

    if math.isfinite(grad_norm):
        optimizer.step()
        return True
    log.warning("optimizer step %d skipped: the gradient norm is %s, so no weight was changed", step, grad_norm)
    return False
