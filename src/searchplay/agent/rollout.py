"""Multi-turn rollouts under the Search-R1/SSP protocol, batched across all active rollouts.

On a backend with ``generate_continuous`` (transformers; ``agent.continuous_batching``), every rollout
decodes in one running batch: a generation that ends (at ``</search>``, the role's final tag, EOS or
the turn budget) is handled at once, its search run, and the rollout goes on in the batch while the
others keep writing. Otherwise turn by turn: every unfinished rollout generates in ONE
``backend.generate`` call and the turn's searches go to the search tool in one batch. Either way the
environment's reply (``<information>`` block or Search-R1's corrective message) is encoded on its own
and appended as ids with loss mask 0. Generated ids
are kept exactly as sampled, so the history is never re-tokenized (SSP App. A.2, B.1). Choices where the
papers are silent: docs/decisions/agent.md.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any

from searchplay.agent.protocol import (
    FINAL_TAG,
    corrective_message,
    count_answer_tags,
    extract_think,
    information_block,
    parse_action,
    stop_strings,
)
from searchplay.agent.trajectory import Role, Trajectory, Turn
from searchplay.config import AgentConfig, SearchConfig
from searchplay.llm.backend import PolicyBackend, SamplingParams
from searchplay.llm.tokenizer import encode_prompt
from searchplay.retrieval.types import Document, SearchTool

log = logging.getLogger(__name__)

__all__ = ["RolloutConfig", "encode_prompt", "run_rollouts"]

SEARCH_FAILED = "Search failed: {error}"  # the information block's text when the search tool raises


_AGENT = AgentConfig()  # the defaults RolloutConfig takes its own from


@dataclass(frozen=True)
class RolloutConfig:
    """Budgets and sampling for one batch of rollouts. Built from ``params.agent`` (and ``search.max_doc_tokens``)
    by ``from_params``; the defaults are ``AgentConfig``'s, so every setting has one source."""

    max_turns: int = _AGENT.max_turns  # generation calls per rollout (SSP B.1)
    max_prompt_tokens: int = _AGENT.max_prompt_tokens  # longer prompts are rejected
    max_response_tokens: int = _AGENT.max_response_tokens  # generated + environment tokens of the whole rollout
    max_turn_tokens: int = _AGENT.max_turn_tokens  # new tokens per generation call
    temperature: float = _AGENT.temperature  # 0: greedy
    top_p: float = _AGENT.top_p
    max_answer_tags: int = _AGENT.max_answer_tags  # above this, answer_tag_penalty divides the score by 4
    answer_tag_rule: str = _AGENT.answer_tag_rule  # SSP code: > max opening or > max closing tags
    max_doc_tokens: int = SearchConfig().max_doc_tokens  # per retrieved document in <information> (0: whole)
    seed: int | None = _AGENT.seed  # turn by turn, turn t samples with seed + t; a continuous batch once with seed
    eos_without_action: str = _AGENT.eos_without_action  # 'end' (SSP) or 'correct' (Search-R1's corrective message)
    final_answer_turn: bool = _AGENT.final_answer_turn  # Search-R1: one more generation after max_turns, no search
    information_format: str = _AGENT.information_format  # whitespace of the <information> block
    question_format: str = _AGENT.question_format  # the Solver prompt's question: read where prompts are built
    continuous_batching: bool = _AGENT.continuous_batching  # a finished generation re-enters the running batch
    context_tokens: int | None = None  # prompt + response a sequence may hold (the backend's max_model_len)

    @property
    def generations(self) -> int:
        """Generation calls a rollout may make: ``max_turns``, plus Search-R1's final answer-only turn."""
        return self.max_turns + int(self.final_answer_turn)

    @classmethod
    def from_params(cls, params: Any, **overrides: Any) -> RolloutConfig:
        """From a ``Params``: every field of the same name in ``params.agent``, ``max_doc_tokens`` from
        ``params.search``; keyword overrides win (e.g. temperature=0 for evaluation)."""
        agent = params.agent
        values = {f.name: getattr(agent, f.name) for f in fields(cls) if f.name in type(agent).model_fields}
        return cls(**{**values, "max_doc_tokens": params.search.max_doc_tokens, **overrides})


@dataclass
class _Rollout:
    """Mutable state of one rollout while it runs."""

    prompt_ids: list[int]
    response_ids: list[int] = field(default_factory=list)
    loss_mask: list[int] = field(default_factory=list)
    turns: list[Turn] = field(default_factory=list)
    final: str | None = None
    finish_reason: str = ""
    invalid_reason: str | None = None
    invalid_actions: int = 0

    @property
    def done(self) -> bool:
        return bool(self.finish_reason)

    def end(self, finish_reason: str, invalid_reason: str | None = None) -> None:
        self.finish_reason, self.invalid_reason = finish_reason, invalid_reason


def run_rollouts(backend: PolicyBackend, search_tool: SearchTool, prompt_ids: Sequence[Sequence[int]], role: Role,
                 config: RolloutConfig, top_k: int = 3, progress: bool = False) -> list[Trajectory]:
    """Run one rollout per prompt to completion; all active rollouts decode together (in one running batch,
    or turn by turn where the backend cannot: see the module docstring).

    A rollout ends with its final tag (``finish_reason`` 'answer'/'question', valid), at EOS without an
    action ('invalid'; with ``eos_without_action='correct'`` it gets Search-R1's corrective message
    instead), when a generation fills its turn or response budget ('length'), or after
    ``config.generations`` generations ('max_turns'). Only the first finish is valid.
    """
    if role not in FINAL_TAG:
        raise ValueError(f"role must be 'solver' or 'proposer', got {role!r}")
    for i, ids in enumerate(prompt_ids):
        if not ids:
            raise ValueError(f"prompt {i} is empty")
        if len(ids) > config.max_prompt_tokens:
            raise ValueError(f"prompt {i} has {len(ids)} tokens, over agent.max_prompt_tokens="
                             f"{config.max_prompt_tokens}; shorten it or raise the budget")
    config = replace(config, context_tokens=config.context_tokens or getattr(backend, "max_model_len", None))
    rollouts = [_Rollout(list(ids)) for ids in prompt_ids]
    bar = _progress_bar(len(rollouts), role, progress)
    if config.continuous_batching and getattr(backend, "continuous_batching", False):
        _run_continuous(backend, search_tool, rollouts, role, config, top_k, bar)
    else:
        _run_turns(backend, search_tool, rollouts, role, config, top_k, bar)
    for rollout in rollouts:
        if not rollout.done:
            rollout.end("max_turns", f"no <{FINAL_TAG[role]}> within {config.generations} turns")
    if bar is not None:
        bar.close()
    return [_trajectory(backend.tokenizer, r, role, config.answer_tag_rule) for r in rollouts]


def _run_turns(backend: PolicyBackend, search_tool: SearchTool, rollouts: list[_Rollout], role: Role,
               config: RolloutConfig, top_k: int, bar: Any) -> None:
    """Turn by turn: every unfinished rollout generates in one ``generate`` call, then the turn's searches run
    as one batch (backends without ``generate_continuous``, or ``agent.continuous_batching: false``)."""
    for turn_index in range(config.generations):
        active = [r for r in rollouts if not r.done]
        if not active:
            break
        searches = _generate_turn(backend, active, role, config, turn_index)
        _answer_searches(backend, search_tool, searches, role, config, top_k)
        if bar is not None:
            bar.update(sum(r.done for r in active))
            bar.set_postfix(turn=turn_index + 1, active=sum(not r.done for r in rollouts))


def _generate_turn(backend: PolicyBackend, active: list[_Rollout], role: Role, config: RolloutConfig,
                   turn_index: int) -> list[tuple[_Rollout, Turn]]:
    """One batched generation for every active rollout; returns the (rollout, turn) pairs that searched."""
    budgets = [_turn_budget(r, config) for r in active]
    seed = None if config.seed is None else config.seed + turn_index
    sampling = SamplingParams(max_new_tokens=max(budgets), temperature=config.temperature, top_p=config.top_p,
                              stop=stop_strings(role), seed=seed)
    completions = backend.generate([r.prompt_ids + r.response_ids for r in active], sampling)
    last_turn = turn_index == config.generations - 1
    searches = []
    for rollout, completion, budget in zip(active, completions, budgets, strict=True):
        turn = _take_generation(backend.tokenizer, rollout, completion, budget, role, config, last_turn)
        if turn is not None:
            searches.append((rollout, turn))
    return searches


def _run_continuous(backend: Any, search_tool: SearchTool, rollouts: list[_Rollout], role: Role,
                    config: RolloutConfig, top_k: int, bar: Any) -> None:
    """Every rollout in one ``generate_continuous`` call: a rollout whose generation ends is handled at once
    (its search run, its reply appended) and goes on in the running batch, so no turn waits for the slowest
    row. Sampling is seeded once with ``config.seed``."""
    sampling = SamplingParams(max_new_tokens=config.max_turn_tokens, temperature=config.temperature,
                              top_p=config.top_p, stop=stop_strings(role), seed=config.seed)
    budgets = [_turn_budget(r, config) for r in rollouts]

    def on_finished(ended: list[tuple[int, Any]]) -> list[tuple[int, list[int], int]]:
        searches = []
        for index, completion in ended:
            rollout = rollouts[index]
            last_turn = len(rollout.turns) == config.generations - 1
            turn = _take_generation(backend.tokenizer, rollout, completion, budgets[index], role, config, last_turn)
            if turn is not None:
                searches.append((rollout, turn))
        _answer_searches(backend, search_tool, searches, role, config, top_k)
        going_on = []
        for index, _ in ended:
            rollout = rollouts[index]
            if rollout.done or len(rollout.turns) == config.generations:  # run_rollouts ends the latter
                if bar is not None:
                    bar.update(1)
                continue
            budgets[index] = _turn_budget(rollout, config)
            going_on.append((index, rollout.prompt_ids + rollout.response_ids, budgets[index]))
        return going_on

    backend.generate_continuous([r.prompt_ids for r in rollouts], budgets, sampling, on_finished)


def _turn_budget(rollout: _Rollout, config: RolloutConfig) -> int:
    """New tokens the rollout's next generation may write: the turn budget, within the response budget and the
    model's context (``_append_environment`` leaves at least one token of each)."""
    room = (config.context_tokens or sys.maxsize) - len(rollout.prompt_ids) - len(rollout.response_ids)
    return min(config.max_turn_tokens, config.max_response_tokens - len(rollout.response_ids), room)


def _take_generation(tokenizer: Any, rollout: _Rollout, completion: Any, budget: int, role: Role,
                     config: RolloutConfig, last_turn: bool) -> Turn | None:
    """Append one generation to its rollout and act on it: returns the turn if it searched (the search is the
    caller's), ends the rollout at its final tag, a filled budget or EOS, or appends the corrective message."""
    ids, finish = list(completion.token_ids), completion.finish_reason
    if len(ids) > budget:  # this row's budget is below the batch's max_new_tokens
        ids, finish = ids[:budget], "length"
    text = completion.text if len(ids) == len(completion.token_ids) else tokenizer.decode(
        ids, skip_special_tokens=True)
    start = len(rollout.response_ids)
    rollout.response_ids += ids
    rollout.loss_mask += [1] * len(ids)
    turn = Turn(text=text, start=start, end=len(rollout.response_ids), action="invalid")
    rollout.turns.append(turn)
    if finish == "length":
        turn.action = "truncated"
        rollout.end("length", f"generation hit the token budget ({budget}) without a stop string")
        return None
    action = parse_action(text, role)
    turn.action = action.kind
    if action.kind == "search":
        turn.search_queries = [action.content]
        if last_turn:
            rollout.end("max_turns", f"searched on the last of {config.generations} turns")
            return None
        return turn
    if action.kind == FINAL_TAG[role]:
        rollout.final = action.content
        rollout.end(action.kind)
        return None
    rollout.invalid_actions += 1
    turn.invalid_reason = action.reason
    if finish == "eos" and (config.eos_without_action == "end" or last_turn):
        # the model ended its message without an action (SSP: the trajectory is over)
        rollout.end("invalid", f"EOS without an action: {action.reason}")
        return None
    if finish == "eos":  # Search-R1: the response text goes on without the end-of-turn token
        _drop_trailing_eos(tokenizer, rollout, turn)
    if not last_turn:
        _append_environment(tokenizer, rollout, turn, corrective_message(role), config)
    return None


def _answer_searches(backend: PolicyBackend, search_tool: SearchTool, searches: list[tuple[_Rollout, Turn]],
                     role: Role, config: RolloutConfig, top_k: int) -> None:
    """Run this turn's queries as one batch and append each rollout's ``<information>`` block."""
    from searchplay.retrieval import format_documents

    if not searches:
        return
    queries = [turn.search_queries[0] for _, turn in searches]
    results = _search(search_tool, queries, top_k)
    for (rollout, turn), result in zip(searches, results, strict=True):
        if isinstance(result, Exception):
            turn.search_error = f"{type(result).__name__}: {result}"
            body = SEARCH_FAILED.format(error=type(result).__name__)
        else:
            turn.documents = list(result)
            body = format_documents(turn.documents, backend.tokenizer, config.max_doc_tokens)
        _append_environment(backend.tokenizer, rollout, turn, information_block(body, config.information_format),
                            config)


def _search(search_tool: SearchTool, queries: list[str], top_k: int) -> list[list[Document] | Exception]:
    """One batched search; if it raises, each query alone, so one bad query fails only its rollout's turn."""
    try:
        results = search_tool.search(queries, top_k=top_k)
        if len(results) != len(queries):
            raise RuntimeError(f"search tool returned {len(results)} result lists for {len(queries)} queries")
        return list(results)
    except Exception as exc:
        log.warning("batched search of %d queries failed (%s); retrying one by one", len(queries), exc)
    outcomes: list[list[Document] | Exception] = []
    for query in queries:
        try:
            outcomes.append(search_tool.search([query], top_k=top_k)[0])
        except Exception as exc:
            log.warning("search %r failed: %s", query, exc)
            outcomes.append(exc)
    return outcomes


def _drop_trailing_eos(tokenizer: Any, rollout: _Rollout, turn: Turn) -> None:
    """Remove the end-of-sequence id that ended this turn, as Search-R1 decodes responses without special tokens:
    the tokenizer's EOS, or another special id the model's generation config ends on (Qwen2.5's
    ``<|endoftext|>``; ``searchplay.llm.backend.end_token_ids``)."""
    special = {getattr(tokenizer, "eos_token_id", None), *(getattr(tokenizer, "all_special_ids", None) or ())}
    if rollout.response_ids and rollout.response_ids[-1] in special - {None}:
        rollout.response_ids.pop()
        rollout.loss_mask.pop()
        turn.end = len(rollout.response_ids)


def _append_environment(tokenizer: Any, rollout: _Rollout, turn: Turn, text: str, config: RolloutConfig) -> None:
    """Encode environment text on its own and append its ids with loss mask 0 (or end at the budget)."""
    ids = tokenizer.encode(text, add_special_tokens=False)
    if len(rollout.response_ids) + len(ids) >= config.max_response_tokens:
        rollout.end("length", f"the environment reply would fill agent.max_response_tokens="
                              f"{config.max_response_tokens}")
        return
    held = len(rollout.prompt_ids) + len(rollout.response_ids) + len(ids)
    if config.context_tokens and held >= config.context_tokens:
        rollout.end("length", f"the environment reply would fill the model's context ({config.context_tokens} "
                              "tokens of prompt and response)")
        return
    turn.env_start = len(rollout.response_ids)
    rollout.response_ids += ids
    rollout.loss_mask += [0] * len(ids)
    turn.env_end = len(rollout.response_ids)


def _trajectory(tokenizer: Any, rollout: _Rollout, role: Role, answer_tag_rule: str = "either") -> Trajectory:
    model_text = "".join(turn.text for turn in rollout.turns)
    valid = rollout.finish_reason == FINAL_TAG[role]
    return Trajectory(
        role=role, prompt_ids=rollout.prompt_ids, response_ids=rollout.response_ids, loss_mask=rollout.loss_mask,
        turns=rollout.turns,
        answer=rollout.final if role == "solver" else None,
        question=rollout.final if role == "proposer" else None,
        think_text=extract_think(model_text), valid=valid,
        invalid_reason=None if valid else rollout.invalid_reason,
        answer_tag_count=count_answer_tags(model_text, answer_tag_rule), finish_reason=rollout.finish_reason,
        metadata={"invalid_actions": rollout.invalid_actions, "num_turns": len(rollout.turns)},
    )


def _progress_bar(total: int, role: Role, enabled: bool) -> Any:
    if not enabled:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=f"{role} rollouts", unit="rollout", leave=False)
