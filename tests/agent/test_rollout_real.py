"""A real SmolLM2 rollout against a tiny real LanceDB index (MiniLM embeddings of bundled Wikipedia leads)."""

from __future__ import annotations

import itertools

import pytest

from searchplay.agent.prompts import solver_messages
from searchplay.agent.protocol import information_block
from searchplay.agent.rollout import RolloutConfig, run_rollouts
from searchplay.retrieval import format_documents

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def backend(smollm2_path):
    from searchplay.llm.transformers_backend import TransformersBackend

    return TransformersBackend(str(smollm2_path), device="cpu")


@pytest.fixture(scope="module")
def search_tool(tmp_path_factory, wiki_summaries_path, minilm_path):
    from dataclasses import asdict

    from searchplay.io import write_jsonl
    from searchplay.retrieval.corpus import CorpusReport, read_wiki_summaries
    from searchplay.retrieval.embedder import Embedder
    from searchplay.retrieval.index import build_index
    from searchplay.retrieval.search import LanceSearchTool

    root = tmp_path_factory.mktemp("agent_index")
    leads = read_wiki_summaries(wiki_summaries_path, CorpusReport("bundled"))
    passages = [asdict(p) for p in itertools.islice(leads, 40)]
    write_jsonl(root / "passages.jsonl", passages)
    embedder = Embedder(str(minilm_path), device="cpu")
    build_index(root / "passages.jsonl", root / "index", "passages", embedder, ann_threshold=1_000_000,
                show_progress=False)
    return LanceSearchTool(root / "index", "passages", embedder, "dense")


class ForcedFirstTokens:
    """Wraps the real backend: the first turn of each rollout starts with forced tokens (so it searches).

    The model generates the rest of that turn from prompt + forced ids; the forced ids are returned as
    part of the completion, like forced decoding.
    """

    def __init__(self, backend, forced_ids):
        self.backend, self.forced, self.tokenizer = backend, list(forced_ids), backend.tokenizer
        self.first_call = True

    def generate(self, prompts, sampling):
        from searchplay.llm.backend import Completion

        if not self.first_call:
            return self.backend.generate(prompts, sampling)
        self.first_call = False
        completions = self.backend.generate([list(p) + self.forced for p in prompts], sampling)
        return [Completion(self.forced + c.token_ids, self.tokenizer.decode(self.forced + c.token_ids,
                           skip_special_tokens=True), c.finish_reason, c.stop) for c in completions]

    def update_weights(self, model):
        self.backend.update_weights(model)


def test_real_rollout_masks_exactly_the_information_tokens(backend, search_tool):
    from searchplay.llm import encode_prompt

    tokenizer = backend.tokenizer
    questions = ["Who was Aaron?", "What is the capital of France?"]
    prompts = [encode_prompt(tokenizer, solver_messages(q)) for q in questions]
    config = RolloutConfig(max_turns=2, max_turn_tokens=24, temperature=0.0)
    forced = ForcedFirstTokens(backend, tokenizer.encode("<think>I should search.</think>\n<search>",
                                                         add_special_tokens=False))
    trajectories = run_rollouts(forced, search_tool, prompts, "solver", config, top_k=2)
    assert len(trajectories) == 2
    searched = [t for t in trajectories if any(turn.env_start is not None and turn.documents for turn in t.turns)]
    assert searched, [t.turns[0].text for t in trajectories]
    for traj in trajectories:
        masked = {i for i, m in enumerate(traj.loss_mask) if m == 0}
        env = {i for turn in traj.turns if turn.env_start is not None for i in range(turn.env_start, turn.env_end)}
        assert masked == env
        expected = tokenizer.decode(traj.prompt_ids, skip_special_tokens=True)
        for turn in traj.turns:
            expected += turn.text
            if turn.env_start is not None:
                environment = tokenizer.decode(traj.response_ids[turn.env_start:turn.env_end])
                expected += environment
                if turn.documents:
                    assert environment == information_block(format_documents(turn.documents, tokenizer))
        assert tokenizer.decode(traj.prompt_ids + traj.response_ids, skip_special_tokens=True) == expected
        assert traj.finish_reason in {"answer", "invalid", "length", "max_turns"}
    for traj in searched:
        docs = [d for turn in traj.turns for d in turn.documents]
        assert all(d.id and d.title for d in docs)


def test_batched_generation_matches_one_at_a_time(backend):
    from searchplay.llm.backend import SamplingParams

    tokenizer = backend.tokenizer
    prompts = [tokenizer.encode(text, add_special_tokens=False)
               for text in ["The capital of France is", "One, two, three, four, five, six, seven,", "Hi"]]
    sampling = SamplingParams(max_new_tokens=12, temperature=0.0, stop=(",",))
    batched = backend.generate(prompts, sampling)
    single = [backend.generate([p], sampling)[0] for p in prompts]
    assert [c.token_ids for c in batched] == [c.token_ids for c in single]
    counting = batched[1]
    assert counting.finish_reason == "stop" and counting.stop == "," and counting.text.rstrip().endswith(",")
    assert len(counting.token_ids) < 12  # stopped on its own while the others went on


def test_update_weights_shares_the_module(backend):
    model = backend.model
    backend.update_weights(model)
    assert backend.model is model
