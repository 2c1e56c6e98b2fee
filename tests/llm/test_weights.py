"""A cut or empty weights file is one error naming the checkpoint, from the library and from the CLI."""

from __future__ import annotations

import pytest

from searchplay.llm.weights import ModelLoadError, check_model, load_causal_lm


@pytest.fixture()
def tiny_checkpoint(tmp_path):
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=64, hidden_size=8, intermediate_size=16, num_hidden_layers=1,
                         num_attention_heads=1, num_key_value_heads=1)
    LlamaForCausalLM(config).save_pretrained(tmp_path / "model")
    return tmp_path / "model"


@pytest.mark.parametrize("cut", [lambda data: data[:100], lambda data: b""])
def test_a_cut_or_empty_weights_file_names_the_checkpoint(tiny_checkpoint, cut):
    weights = tiny_checkpoint / "model.safetensors"
    weights.write_bytes(cut(weights.read_bytes()))
    with pytest.raises(ModelLoadError, match=f"{tiny_checkpoint}: the model cannot be loaded .*run the stage"):
        load_causal_lm(tiny_checkpoint)


CUTS = {"weights cut": ("model.safetensors", lambda data: data[: len(data) - 10], "empty or cut"),
        "weights empty": ("model.safetensors", lambda data: b"", "empty or cut"),
        "weights missing": ("model.safetensors", None, "no weights file"),
        "config cut": ("config.json", lambda data: data[:40], "config.json is missing or does not parse")}


@pytest.mark.parametrize("case", list(CUTS))
def test_a_model_is_checked_before_a_backend_starts(tiny_checkpoint, case):
    """What vLLM's engine would report as a long traceback: one error naming the file and the fix."""
    check_model(tiny_checkpoint)  # a whole checkpoint passes
    name, cut, says = CUTS[case]
    file = tiny_checkpoint / name
    if cut is None:
        file.unlink()
    else:
        file.write_bytes(cut(file.read_bytes()))
    with pytest.raises(ModelLoadError, match=says):
        check_model(tiny_checkpoint)


def test_a_mistyped_path_or_an_uncached_hub_id_is_named(tmp_path):
    with pytest.raises(ModelLoadError, match="no such model folder"):
        check_model("checkpoints/warmstrt/model")
    with pytest.raises(ModelLoadError, match="no such model folder"):
        check_model(str(tmp_path / "nope"))
    with pytest.raises(ModelLoadError, match="runs offline"):  # the suite runs offline, as every command does
        check_model("searchplay-tests/never-cached")


def test_load_backend_checks_the_model_first(tiny_checkpoint):
    from searchplay.llm import load_backend

    (tiny_checkpoint / "model.safetensors").write_bytes(b"")
    with pytest.raises(ModelLoadError, match="empty or cut"):
        load_backend(str(tiny_checkpoint))


def test_a_whole_checkpoint_loads(tiny_checkpoint):
    assert load_causal_lm(tiny_checkpoint).config.hidden_size == 8


def test_the_cli_says_it_in_one_line(tiny_checkpoint, monkeypatch):
    from typer.testing import CliRunner

    from searchplay.cli import app

    (tiny_checkpoint / "model.safetensors").write_bytes(b"")

    def evaluate(params, variant, **kwargs):
        load_causal_lm(tiny_checkpoint)

    monkeypatch.setattr("searchplay.eval.evaluate.evaluate", evaluate)
    result = CliRunner().invoke(app, ["evaluate", "--variant", "base"])
    # exit 2: a cut weights file is read the same way by a retry, so a Prefect flow does not retry it
    assert result.exit_code == 2 and "model error" in result.output and "Traceback" not in result.output


def test_the_math_kernels_are_warmed_before_the_weights_load(tiny_checkpoint, monkeypatch):
    import transformers

    from searchplay import process

    order: list[str] = []
    load = transformers.AutoModelForCausalLM.from_pretrained
    monkeypatch.setattr(process, "warm_math_kernels", lambda: order.append("warm"))
    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained",
                        lambda *args, **kwargs: order.append("load") or load(*args, **kwargs))
    load_causal_lm(tiny_checkpoint)
    assert order == ["warm", "load"]


@pytest.mark.parametrize("mapped", [False, True])
@pytest.mark.parametrize("saved_dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("tied", [False, True])
def test_weights_read_into_memory_are_the_loaded_values_in_storage_of_their_own(tmp_path, saved_dtype, tied, mapped):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from searchplay.llm.weights import read_weights_into_memory

    config = LlamaConfig(vocab_size=64, hidden_size=8, intermediate_size=16, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=1, tie_word_embeddings=tied)
    torch.manual_seed(0)
    LlamaForCausalLM(config).to(getattr(torch, saved_dtype)).save_pretrained(tmp_path / "model")
    expected = load_causal_lm(tmp_path / "model", dtype=torch.float32)
    model = load_causal_lm(tmp_path / "model", dtype=torch.float32)
    before = {name: p.untyped_storage().data_ptr() for name, p in model.named_parameters()}
    read_weights_into_memory(model, tmp_path / "model", mapped=mapped)  # mapped: each in a mapping of its own
    for (name, mine), theirs in zip(model.named_parameters(), expected.parameters(), strict=True):
        assert mine.dtype == torch.float32 and torch.equal(mine, theirs), name
        assert mine.untyped_storage().data_ptr() != before[name], name
    assert (model.lm_head.weight is model.model.embed_tokens.weight) is tied
    tokens = torch.tensor([[1, 5, 9]])
    assert torch.equal(model(tokens).logits, expected(tokens).logits)


def test_a_weights_file_cut_after_its_header_is_an_error_naming_it(tiny_checkpoint):
    import torch

    from searchplay.llm.weights import read_weights_into_memory

    model = load_causal_lm(tiny_checkpoint, dtype=torch.float32)
    weights = tiny_checkpoint / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-64])
    with pytest.raises(ModelLoadError, match=r"model\.safetensors: .* is cut short"):
        read_weights_into_memory(model, tiny_checkpoint)


def test_cuda_that_torch_cannot_see_is_named_not_asserted(monkeypatch, minilm_path):
    import torch

    from searchplay.llm.transformers_backend import pick_device
    from searchplay.llm.weights import check_device
    from searchplay.retrieval.embedder import Embedder

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    for pick in (check_device, pick_device, lambda device: Embedder(str(minilm_path), device=device)):
        with pytest.raises(ModelLoadError, match="torch finds no CUDA device"):
            pick("cuda")  # the embedder too, before sentence-transformers loads it
    assert pick_device("cpu") == "cpu" and pick_device("auto") == "cpu"
