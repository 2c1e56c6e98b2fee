import logging

import pytest
import torch

from searchplay import precision


def _cpu(monkeypatch, machine: str, amx: bool = False, avx512_bf16: bool = False, onednn: bool = True) -> None:
    monkeypatch.setattr(precision.platform, "machine", lambda: machine)
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: amx)
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: avx512_bf16)
    monkeypatch.setattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", lambda: onednn)


def test_an_x86_cpu_with_avx512_but_no_bf16_instructions_runs_fp32_although_onednn_reports_bf16(monkeypatch):
    """oneDNN reports bf16 on any AVX512 CPU (Cascade Lake included), where it emulates it (measured there:
    embedding at 0.33x of fp32, the self-play update at 0.45x)."""
    _cpu(monkeypatch, "x86_64", onednn=True)
    assert precision.cpu_bf16_instructions() is None
    assert not precision.bf16_is_native("cpu") and not precision.autocast_enabled("auto", "cpu")
    assert precision.precision_note("cpu").startswith("auto precision: fp32 (this CPU has no bf16 instructions")


@pytest.mark.parametrize(("flags", "found"), [({"amx": True, "avx512_bf16": True}, "AMX"),
                                              ({"avx512_bf16": True}, "AVX512-BF16")])
def test_an_x86_cpu_with_bf16_instructions_runs_bf16(monkeypatch, flags, found):
    _cpu(monkeypatch, "x86_64", **flags)
    assert precision.cpu_bf16_instructions() == found and precision.bf16_is_native("cpu")
    assert precision.precision_note("cpu") == f"auto precision: bf16 (this CPU has {found})"


def test_an_arm_cpu_follows_onednn_which_checks_its_bf16_extension(monkeypatch):
    _cpu(monkeypatch, "aarch64", onednn=True)
    assert precision.cpu_bf16_instructions() == "Arm BF16"
    _cpu(monkeypatch, "aarch64", onednn=False)
    assert not precision.bf16_is_native("cpu")


def test_an_explicit_setting_wins_and_the_choice_is_logged_once(monkeypatch, caplog):
    _cpu(monkeypatch, "x86_64")
    assert precision.autocast_enabled(True, "cpu") and not precision.autocast_enabled(False, "cpu")
    precision._log_once.cache_clear()
    with caplog.at_level(logging.INFO, logger="searchplay.precision"):
        precision.bf16_is_native("cpu")
        precision.bf16_is_native("cpu")
    assert [r.getMessage() for r in caplog.records].count(precision.precision_note("cpu")) == 1


@pytest.mark.parametrize("supported", [True, False])
def test_a_cuda_device_follows_its_bf16_support_and_is_logged_once(monkeypatch, caplog, supported):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda: supported)
    precision._log_once.cache_clear()
    with caplog.at_level(logging.INFO, logger="searchplay.precision"):
        assert precision.bf16_is_native("cuda") is supported
        assert precision.autocast_enabled("auto", "cuda") is supported
    note = precision.precision_note("cuda")
    assert note.startswith(f"auto precision: {'bf16' if supported else 'fp32'} (cuda ")
    assert [r.getMessage() for r in caplog.records] == [note]


def test_a_nonfinite_gradient_norm_skips_the_optimizer_step_and_changes_no_weight(caplog):
    """A NaN or inf norm would write NaN into every weight AdamW touches; the step is skipped (verl's actor too)."""
    import math

    import torch

    from searchplay.precision import skip_nonfinite_step

    weight = torch.nn.Parameter(torch.ones(3))
    optimizer = torch.optim.AdamW([weight], lr=0.1)
    weight.grad = torch.tensor([float("nan"), 1.0, 1.0])
    assert not skip_nonfinite_step(optimizer, math.nan, 7)
    assert torch.equal(weight.detach(), torch.ones(3)) and "optimizer step 7 skipped" in caplog.text
    weight.grad = torch.ones(3)
    assert skip_nonfinite_step(optimizer, 1.7, 8) and not torch.equal(weight.detach(), torch.ones(3))
