"""Fixtures for the self-play tests: SmolLM2's tokenizer, a tiny random-init model for the real
PolicyTrainer, params pointing every output into tmp, and a runtime of real parts + test fakes.

Speed: the tiny model keeps SmolLM2's 49k vocabulary (the scripted backend speaks through the real
tokenizer), so the logits dominate a training step. ``micro_batch_size=1`` makes every micro-batch one
sequence, whose logits window is its response only (a mixed Proposer/Solver micro-batch would also score
~800 prompt positions of the longer Proposer prompt); with hidden size 16, one layer and one torch
thread a step takes ~1 s.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from searchplay.config import Params, load_params


@pytest.fixture(scope="session")
def tokenizer(smollm2_path: Path):
    from searchplay.llm.tokenizer import load_tokenizer

    return load_tokenizer(str(smollm2_path))


def save_tiny_model(folder: Path, tokenizer) -> Path:
    """A 1-layer, 16-wide Llama with SmolLM2's vocabulary and tokenizer, random weights (seed 0)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                         num_attention_heads=1, num_key_value_heads=1, max_position_embeddings=4096,
                         tie_word_embeddings=True, bos_token_id=tokenizer.bos_token_id,
                         eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
    LlamaForCausalLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory, tokenizer) -> Path:
    return save_tiny_model(tmp_path_factory.mktemp("tiny-llama"), tokenizer)


TEST_OVERRIDES = {
    "models.device": "cpu", "selfplay.batch_size": 3, "selfplay.group_size": 3, "selfplay.micro_batch_size": 1,
    "selfplay.lr": 1e-3, "selfplay.warmup_steps": 0, "agent.max_turns": 4, "agent.max_turn_tokens": 64,
    "agent.max_response_tokens": 512, "kg.heldout_share": 0.0, "warmstart.enabled": False,
}


def make_params(tmp_path: Path, model_dir: Path | None = None, **selfplay) -> Params:
    """Test params writing everything into ``tmp_path``; ``model_dir`` becomes ``models.policy`` if given."""
    overrides = {
        **TEST_OVERRIDES, "kg.out_dir": str(tmp_path / "kg"),
        "selfplay.checkpoint_dir": str(tmp_path / "checkpoints"), "selfplay.reports_dir": str(tmp_path / "reports"),
        "tracking.uri": f"sqlite:///{tmp_path / 'mlflow.db'}",
    }
    if model_dir is not None:
        overrides["models.policy"] = str(model_dir)
    overrides.update({k if "." in k else f"selfplay.{k}": v for k, v in selfplay.items()})  # "gdcr.k": another section
    return load_params(tmp_path / "absent.yaml", overrides)


@pytest.fixture()
def params_factory(tmp_path):
    """Params for a step with an injected runtime (the trainer fixture holds the model)."""
    return lambda **selfplay: make_params(tmp_path, **selfplay)


@pytest.fixture(scope="module")
def trainer(tmp_path_factory, tiny_model_dir):
    """One real PolicyTrainer per test module (building it loads the policy and the reference model).

    Only ``selfplay`` fields the trainer reads (lr, clip, KL, mini-batch) are fixed here; tests vary the
    others freely. Its weights drift from test to test, which no test depends on.
    """
    import torch

    from searchplay.rl import PolicyTrainer

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # ops this small run ~7x slower with 2 threads on a busy 2-core machine
    params = make_params(tmp_path_factory.mktemp("trainer"), tiny_model_dir)
    yield PolicyTrainer(params.models.policy, params)
    torch.set_num_threads(threads)


def make_runtime(params: Params, backend, search_tool=None, trainer=None):
    """Real rollout loop, judge (exact match), document formatting and PolicyTrainer around a fake backend."""
    from searchplay.agent.rollout import RolloutConfig, run_rollouts
    from searchplay.llm.judge import Judge
    from searchplay.llm.tokenizer import encode_prompt
    from searchplay.retrieval.search import format_documents
    from searchplay.selfplay.step import Runtime
    from tests.selfplay.selfplay_fakes import FakeSearchTool

    search_tool = search_tool or FakeSearchTool()
    config = RolloutConfig.from_params(params)

    def rollouts(prompt_ids, role, cfg):
        return run_rollouts(backend, search_tool, prompt_ids, role, cfg, top_k=params.search.top_k)

    return Runtime(backend=backend, verifier=backend, judge=Judge(), trainer=trainer, rollouts=rollouts,
                   solver_config=config, proposer_config=config,
                   encode=lambda messages: encode_prompt(backend.tokenizer, messages),
                   format_documents=lambda docs: format_documents(docs))
