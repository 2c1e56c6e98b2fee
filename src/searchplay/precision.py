"""Where bf16 pays: the hardware test behind every ``auto`` precision knob.

bf16 is fast only where the hardware computes it natively: a CUDA device with bf16, or a CPU whose
oneDNN reports bf16 support (AVX512-BF16 or AMX). Elsewhere PyTorch emulates it, and a bf16 forward
is several times SLOWER than fp32 (measured on a 2-core AMD EPYC without either: one warm-start SFT
step 96 s under bf16 autocast, docs/decisions/warmstart.md), so ``auto`` means fp32 there.
"""

from __future__ import annotations

from typing import Literal

AutocastSetting = bool | Literal["auto"]


def bf16_is_native(device: str) -> bool:
    """True on a CUDA device with bf16 support or a CPU with native bf16 kernels (oneDNN)."""
    import torch

    if device.startswith("cuda"):
        return bool(torch.cuda.is_available() and torch.cuda.is_bf16_supported())
    return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())


def autocast_enabled(setting: AutocastSetting, device: str) -> bool:
    """An ``autocast_bf16`` knob resolved on ``device``: true / false as given, 'auto' where bf16 is native."""
    return bf16_is_native(device) if setting == "auto" else bool(setting)
