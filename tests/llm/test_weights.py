"""A cut or empty weights file is one error naming the checkpoint, from the library and from the CLI."""

from __future__ import annotations

import pytest

from searchplay.llm.weights import ModelLoadError, load_causal_lm


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
    assert result.exit_code == 1 and "model error" in result.output and "Traceback" not in result.output


def test_the_math_kernels_are_warmed_before_the_weights_load(tiny_checkpoint, monkeypatch):
    import transformers

    from searchplay import runtime

    order: list[str] = []
    load = transformers.AutoModelForCausalLM.from_pretrained
    monkeypatch.setattr(runtime, "warm_math_kernels", lambda: order.append("warm"))
    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained",
                        lambda *args, **kwargs: order.append("load") or load(*args, **kwargs))
    load_causal_lm(tiny_checkpoint)
    assert order == ["warm", "load"]
