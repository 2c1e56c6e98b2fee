"""Fixtures for the self-play tests: SmolLM2's tokenizer, a tiny random-init model for the real
PolicyTrainer, params pointing every output into tmp, and a runtime of real parts + test fakes."""

from __future__ import annotations

from pathlib import Path

import pytest

from searchplay.config import Params, load_params


@pytest.fixture(scope="session")
def tokenizer(smollm2_path: Path):
    from searchplay.llm.tokenizer import load_tokenizer

    return load_tokenizer(str(smollm2_path))


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory, tokenizer) -> Path:
    """A 2-layer, 32-wide Llama with SmolLM2's vocabulary and tokenizer, random weights (seed 0)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=4096)
    folder = tmp_path_factory.mktemp("tiny-llama")
    LlamaForCausalLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def make_params(tmp_path: Path, model_dir: Path, **selfplay) -> Params:
    overrides = {
        "models.policy": str(model_dir), "models.device": "cpu", "kg.out_dir": str(tmp_path / "kg"),
        "selfplay.checkpoint_dir": str(tmp_path / "checkpoints"), "selfplay.reports_dir": str(tmp_path / "reports"),
        "selfplay.batch_size": 3, "selfplay.group_size": 3, "selfplay.lr": 1e-3, "selfplay.warmup_steps": 0,
        "agent.max_turns": 4, "agent.max_turn_tokens": 64, "agent.max_response_tokens": 512,
        "evaluate.kg_heldout_share": 0.0, "tracking.uri": f"sqlite:///{tmp_path / 'mlflow.db'}",
    }
    overrides.update({f"selfplay.{k}": v for k, v in selfplay.items()})
    return load_params(tmp_path / "absent.yaml", overrides)


@pytest.fixture()
def params_factory(tmp_path, tiny_model_dir):
    return lambda **selfplay: make_params(tmp_path, tiny_model_dir, **selfplay)


@pytest.fixture(scope="session")
def trainer_cache():
    return {}


def make_runtime(params: Params, backend, search_tool=None, trainer=None):
    """Real rollout loop, judge (exact match), document formatting and PolicyTrainer around a fake backend."""
    from selfplay_fakes import FakeSearchTool

    from searchplay.agent.rollout import RolloutConfig, run_rollouts
    from searchplay.llm.judge import Judge
    from searchplay.llm.tokenizer import encode_prompt
    from searchplay.retrieval.search import format_documents
    from searchplay.rl import PolicyTrainer
    from searchplay.selfplay.step import Runtime

    search_tool = search_tool or FakeSearchTool()
    config = RolloutConfig.from_params(params)

    def rollouts(prompt_ids, role, cfg):
        return run_rollouts(backend, search_tool, prompt_ids, role, cfg, top_k=params.search.top_k)

    return Runtime(backend=backend, verifier=backend, judge=Judge(),
                   trainer=trainer or PolicyTrainer(params.models.policy, params), rollouts=rollouts,
                   solver_config=config, proposer_config=config,
                   encode=lambda messages: encode_prompt(backend.tokenizer, messages),
                   format_documents=lambda docs: format_documents(docs))
