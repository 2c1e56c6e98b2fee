"""Relation selectors for Algorithm 1 (``LLM_Select``), behind one interface.

Each selector takes many requests at once (many seeds advance together) and returns, per request,
an index k into the candidates (1-based; 0 = stop) plus the raw replies. LLM selectors parse the
JSON ``{"answer": k}``; an invalid reply is retried up to ``max_retries`` times (paper: 5, B.1) and
then treated as "stop" and counted (the paper does not say; our choice).

- ``RandomSelector``: seeded uniform choice, the ablation baseline (never stops early).
- ``LocalSelector``: a local causal LM through the policy backend, one batched ``generate`` per round; by
  default its reply is constrained to the JSON schema (``answer_choices``), so every reply parses.
- ``OpenAISelector``: an OpenAI-compatible chat endpoint, ``concurrency`` requests at once (paper: 10).
"""

from __future__ import annotations

import json
import os
import random
import re
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol

from searchplay.kg.store import Edge
from searchplay.llm.backend import PolicyBackend, SamplingParams

# Reconstruction of the relation-selection prompt (the paper's Figure 10 was lost in conversion;
# only its caption survives: "The selector returns a JSON object; answer = 0 terminates expansion").
SELECTOR_SYSTEM = (
    "You build multi-hop factual questions by walking a knowledge graph. At each step you choose the "
    "outgoing edge that continues the path most coherently, forming a natural chain of factual "
    "relations that a reader could verify by searching Wikipedia. Prefer specific, informative "
    "relations over generic ones. If no candidate is informative, stop."
)
SELECTOR_USER = """Path so far: {path}
Current node: {node}

Candidate edges from the current node:
{candidates}

Reply with ONLY a JSON object {{"answer": k}} where k is the number of the edge that best continues \
the path, or {{"answer": 0}} to stop."""
REPLY_PREFIX = '{"answer": '  # prefilled for the local model so a small model only writes the number
JSON_OBJECT = re.compile(r"\{[^{}]*\}")


@dataclass
class SelectionRequest:
    """One seed's state at one step: path labels, relation labels, the current node and candidates."""

    path_labels: list[str]
    relation_labels: list[str]
    node_description: str
    candidates: list[Edge]


@dataclass
class Selection:
    choice: int  # 1-based candidate index; 0 = stop
    replies: list[str] = field(default_factory=list)
    invalid: bool = False  # every attempt was unparseable: treated as stop


class RelationSelector(Protocol):
    name: str
    model: str

    def select(self, requests: Sequence[SelectionRequest]) -> list[Selection]: ...


def render_path(labels: Sequence[str], relations: Sequence[str]) -> str:
    """'Albert Einstein --[place of birth]--> Ulm'."""
    text = labels[0]
    for relation, label in zip(relations, labels[1:], strict=True):
        text += f" --[{relation}]--> {label}"
    return text


def selector_messages(request: SelectionRequest) -> list[dict[str, str]]:
    """Chat messages of the (reconstructed) relation-selection prompt for one request."""
    candidates = "\n".join(
        f"{i}. {edge.relation} -> {edge.label}" + (f" ({edge.description})" if edge.description else "")
        for i, edge in enumerate(request.candidates, start=1))
    node = request.path_labels[-1] + (f" ({request.node_description})" if request.node_description else "")
    user = SELECTOR_USER.format(path=render_path(request.path_labels, request.relation_labels), node=node,
                                candidates=candidates)
    return [{"role": "system", "content": SELECTOR_SYSTEM}, {"role": "user", "content": user}]


def parse_choice(reply: str, num_candidates: int) -> int | None:
    """The k of the first JSON object ``{"answer": k}`` in ``reply`` with 0 <= k <= n; else None.

    >>> parse_choice('Sure. {"answer": 2}', 3), parse_choice('{"answer": 7}', 3), parse_choice('two', 3)
    (2, None, None)
    """
    for match in JSON_OBJECT.finditer(reply):
        try:
            answer = json.loads(match.group(0)).get("answer")
        except (json.JSONDecodeError, AttributeError):
            continue
        if isinstance(answer, str) and answer.strip().isdigit():
            answer = int(answer)
        if isinstance(answer, int) and not isinstance(answer, bool) and 0 <= answer <= num_candidates:
            return answer
    return None


def select_with_retries(requests: Sequence[SelectionRequest], generate: Callable[[list[int]], list[str]],
                        max_retries: int) -> list[Selection]:
    """Ask ``generate`` (indices of pending requests -> replies) until each reply parses.

    Round r re-asks only the requests still unparsed; after 1 + max_retries rounds they stop (0).
    """
    selections = [Selection(choice=0) for _ in requests]
    pending = list(range(len(requests)))
    for _ in range(1 + max_retries):
        if not pending:
            break
        replies = generate(pending)
        still = []
        for index, reply in zip(pending, replies, strict=True):
            selections[index].replies.append(reply)
            choice = parse_choice(reply, len(requests[index].candidates))
            if choice is None:
                still.append(index)
            else:
                selections[index].choice = choice
        pending = still
    for index in pending:
        selections[index].invalid = True
    return selections


class RandomSelector:
    """Seeded uniform choice among the candidates (ablation baseline; never stops on its own)."""

    name = "random"
    model = "random"

    def __init__(self, seed: int):
        self.rng = random.Random(seed)

    def select(self, requests: Sequence[SelectionRequest]) -> list[Selection]:
        return [Selection(choice=self.rng.randint(1, len(r.candidates)) if r.candidates else 0) for r in requests]


def answer_choices(num_candidates: int) -> tuple[str, ...]:
    """The constrained replies after ``{"answer": ``: only ``k}`` with 0 <= k <= n (``SamplingParams.choices``).

    The backend applies them its own way (transformers: a token mask; vLLM: structured output); either way the model
    picks k from its own next-token distribution, renormalized over the allowed tokens at the sampling
    temperature, as structured-output engines do for a JSON schema.

    >>> answer_choices(2)
    ('0}', '1}', '2}')
    """
    return tuple(f"{k}}}" for k in range(num_candidates + 1))


class LocalSelector:
    """A local causal LM behind the policy backend (``searchplay.llm.load_backend``: ``models.device``,
    CUDA where there is a GPU); each round is one batched ``generate`` of the pending requests."""

    name = "llm"

    def __init__(self, backend: PolicyBackend, model: str = "", max_retries: int = 5, temperature: float = 0.7,
                 max_new_tokens: int = 12, batch_size: int = 32, seed: int = 0, constrained: bool = True):
        import torch

        self.backend, self.model, self.tokenizer = backend, model, backend.tokenizer
        self.max_retries, self.temperature = max_retries, temperature
        self.max_new_tokens, self.batch_size = max_new_tokens, batch_size
        self.constrained = constrained
        torch.manual_seed(seed)

    def _prompt(self, request: SelectionRequest) -> list[int]:
        text = self.tokenizer.apply_chat_template(selector_messages(request), tokenize=False,
                                                  add_generation_prompt=True)
        return self.tokenizer.encode(text + REPLY_PREFIX, add_special_tokens=False)

    def _generate(self, prompts: list[list[int]], num_candidates: list[int]) -> list[str]:
        replies = []
        for start in range(0, len(prompts), self.batch_size):
            rows = num_candidates[start:start + self.batch_size]
            sampling = SamplingParams(max_new_tokens=self.max_new_tokens, temperature=self.temperature,
                                      choices=tuple(map(answer_choices, rows)) if self.constrained else None)
            completions = self.backend.generate(prompts[start:start + self.batch_size], sampling)
            replies += [REPLY_PREFIX + completion.text for completion in completions]
        return replies

    def select(self, requests: Sequence[SelectionRequest]) -> list[Selection]:
        prompts = [self._prompt(r) for r in requests]
        return select_with_retries(
            requests, lambda pending: self._generate([prompts[i] for i in pending],
                                                     [len(requests[i].candidates) for i in pending]),
            self.max_retries)


class OpenAISelector:
    """An OpenAI-compatible ``/chat/completions`` endpoint, ``concurrency`` requests in flight."""

    name = "llm"

    def __init__(self, endpoint: str, model: str, max_retries: int = 5, temperature: float = 0.7,
                 max_new_tokens: int = 12, concurrency: int = 10, api_key_env: str = "OPENAI_API_KEY",
                 timeout_s: float = 60.0):
        import httpx

        self.model = model
        headers = {"Authorization": f"Bearer {os.environ[api_key_env]}"} if os.environ.get(api_key_env) else {}
        self.client = httpx.Client(base_url=endpoint.rstrip("/"), headers=headers, timeout=timeout_s)
        self.max_retries, self.temperature = max_retries, temperature
        self.max_new_tokens, self.concurrency = max_new_tokens, concurrency

    def _ask(self, request: SelectionRequest) -> str:
        import httpx

        body = {"model": self.model, "messages": selector_messages(request), "temperature": self.temperature,
                "max_tokens": self.max_new_tokens}
        try:
            response = self.client.post("/chat/completions", json=body)
            response.raise_for_status()
            return response.json()["choices"][0]["message"]["content"] or ""
        except (httpx.HTTPError, KeyError, IndexError, ValueError) as exc:
            return f"<request failed: {type(exc).__name__}: {exc}>"  # counted as an invalid reply, retried

    def select(self, requests: Sequence[SelectionRequest]) -> list[Selection]:
        with ThreadPoolExecutor(self.concurrency) as pool:
            return select_with_retries(
                requests, lambda pending: list(pool.map(self._ask, [requests[i] for i in pending])), self.max_retries)


def make_selector(config, name: str | None = None, params: Any = None) -> RelationSelector:
    """The selector named by ``kg.selector`` (or ``name``), configured from ``KGConfig``; ``params`` (models
    device and dtypes, agent backend) serves the local model through ``searchplay.llm.load_backend``."""
    name = name or config.selector
    if name == "random":
        return RandomSelector(config.seed)
    common = {"max_retries": config.max_retries, "temperature": config.selector_temperature,
              "max_new_tokens": config.selector_max_new_tokens}
    if config.selector_backend == "openai":
        if not config.selector_endpoint:
            raise ValueError("kg.selector_backend=openai needs kg.selector_endpoint (an OpenAI-compatible base URL)")
        return OpenAISelector(config.selector_endpoint, config.selector_model, concurrency=config.selector_concurrency,
                              api_key_env=config.selector_api_key_env, timeout_s=config.selector_timeout_s, **common)
    from searchplay.llm import load_backend

    return LocalSelector(load_backend(config.selector_model, params), config.selector_model,
                         batch_size=config.selector_batch_size, seed=config.seed,
                         constrained=config.selector_constrained, **common)
