import json

import pytest

from searchplay import assets


@pytest.fixture
def empty_home(tmp_path, monkeypatch):
    monkeypatch.setenv("SEARCHPLAY_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def test_missing_asset_says_how_to_fix_it(empty_home):
    with pytest.raises(assets.AssetError, match="searchplay assets"):
        assets.asset_path("minilm")
    with pytest.raises(assets.AssetError, match="not converted yet"):
        assets.resolve("bundled:smollm2")
    with pytest.raises(assets.AssetError, match="unknown bundled asset"):
        assets.asset_path("gpt5")


def test_status_reports_every_missing_asset(empty_home):
    states = {name: state for name, state, _ in assets.status()}
    assert set(states) == {"smollm2-gguf", "minilm", "wiki-summaries", "fanoutqa-dev", "smollm2"}
    assert set(states.values()) == {"missing"}


def test_resolve_passes_paths_and_hub_ids_through(tmp_path):
    assert assets.resolve(str(tmp_path)) == str(tmp_path)
    assert assets.resolve("Qwen/Qwen2.5-7B-Instruct") == "Qwen/Qwen2.5-7B-Instruct"


def test_a_corrupt_asset_fails_verification(empty_home):
    asset = assets.ASSETS["wiki-summaries"]
    path = assets.package_dir(asset) / asset.relative_path
    path.parent.mkdir(parents=True)
    path.write_text("{}")
    assert not assets.verify(asset)


def test_second_run_does_nothing(smollm2_path, minilm_path):
    """After `searchplay assets` (run by `make test`), a second run installs and converts nothing."""
    assert assets.ensure_all() == []
    marker = json.loads((smollm2_path / assets.CONVERSION_MARKER).read_text())
    assert marker["gguf_sha256"] == assets.ASSETS["smollm2-gguf"].sha256


@pytest.mark.slow
def test_converted_smollm2_loads_offline_and_generates(smollm2_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(smollm2_path)
    model = AutoModelForCausalLM.from_pretrained(smollm2_path, dtype=torch.float32)
    prompt = tokenizer.apply_chat_template([{"role": "user", "content": "What is the capital of France?"}],
                                           add_generation_prompt=True, return_tensors="pt", return_dict=True)
    output = model.generate(**prompt, max_new_tokens=12, do_sample=False)
    text = tokenizer.decode(output[0, prompt["input_ids"].shape[1]:], skip_special_tokens=True)
    assert len(text.strip()) > 0
    assert "quantization_config" not in json.loads((smollm2_path / "config.json").read_text())
