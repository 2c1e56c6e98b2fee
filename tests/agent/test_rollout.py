"""Multi-turn rollouts driven by a scripted fake policy (tests only) through every protocol branch."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from searchplay.agent.protocol import corrective_message, information_block
from searchplay.agent.rollout import RolloutConfig, run_rollouts
from searchplay.config import Params
from searchplay.llm.backend import Completion, PolicyBackend, SamplingParams
from searchplay.retrieval import format_documents
from searchplay.retrieval.types import Document

EOS = object()  # script marker: this turn ends with the EOS token


@pytest.fixture(scope="module")
def tokenizer(smollm2_path):
    from searchplay.llm import load_tokenizer

    return load_tokenizer(str(smollm2_path))


class ScriptedPolicy:
    """A PolicyBackend that replays scripted turn texts, one script per prompt (matched by prompt ids)."""

    def __init__(self, tokenizer, prompts: Sequence[list[int]], scripts: Sequence[Sequence]):
        self.tokenizer = tokenizer
        self.scripts = {tuple(p): list(s) for p, s in zip(prompts, scripts, strict=True)}
        self.calls: list[int] = []  # batch size of every generate call

    def generate(self, prompts, sampling: SamplingParams) -> list[Completion]:
        self.calls.append(len(prompts))
        out = []
        for ids in prompts:
            script = next(s for p, s in self.scripts.items() if tuple(ids[: len(p)]) == p)
            text = script.pop(0)
            eos = text is EOS or isinstance(text, tuple)
            text = text[0] if isinstance(text, tuple) else ("" if text is EOS else text)
            token_ids = self.tokenizer.encode(text, add_special_tokens=False)
            if eos:
                token_ids.append(self.tokenizer.eos_token_id)
            stop = next((s for s in sampling.stop if text.endswith(s)), None)
            finish = "eos" if eos else "stop" if stop else "length"
            if len(token_ids) > sampling.max_new_tokens:
                token_ids, finish, stop = token_ids[: sampling.max_new_tokens], "length", None
            out.append(Completion(token_ids, self.tokenizer.decode(token_ids, skip_special_tokens=True), finish, stop))
        return out

    def update_weights(self, model) -> None:
        pass

    def release_memory(self) -> None:
        pass


class FakeSearch:
    """Returns two documents per query; 'boom' raises; ``fail_batches`` makes the batched call raise."""

    def __init__(self, fail_batches: bool = False):
        self.fail_batches = fail_batches
        self.calls: list[list[str]] = []

    def search(self, queries, top_k=3):
        self.calls.append(list(queries))
        if "boom" in queries:
            raise ConnectionError("index unreachable")
        if self.fail_batches and len(queries) > 1:
            raise RuntimeError("batch failed")
        return [[Document(f"{q}-{i}", f"Title {q} {i}", f"text about {q} {i}", 1.0 - i / 10) for i in range(top_k)]
                for q in queries]


def prompts_for(tokenizer, n):
    from searchplay.agent.prompts import solver_messages
    from searchplay.llm import encode_prompt

    return [encode_prompt(tokenizer, solver_messages(f"Question number {i}?")) for i in range(n)]


def rollout(tokenizer, scripts, role="solver", search=None, **config):
    prompts = prompts_for(tokenizer, len(scripts))
    policy = ScriptedPolicy(tokenizer, prompts, scripts)
    assert isinstance(policy, PolicyBackend)
    search = search or FakeSearch()
    trajectories = run_rollouts(policy, search, prompts, role, RolloutConfig(**config), top_k=2)
    return trajectories, policy, search


def test_search_then_answer_token_bookkeeping(tokenizer):
    turns = ["<think>need facts</think>\n<search> Eiffel Tower height </search>",
             "<think>it is 330 m</think>\n<answer> 330 metres </answer>"]
    [traj], _, search = rollout(tokenizer, [turns])
    assert (traj.valid, traj.finish_reason, traj.answer) == (True, "answer", "330 metres")
    assert traj.search_queries == ["Eiffel Tower height"] and search.calls == [["Eiffel Tower height"]]
    assert [d.id for d in traj.documents] == ["Eiffel Tower height-0", "Eiffel Tower height-1"]
    assert traj.think_text == "need facts\nit is 330 m"
    assert traj.answer_tag_count == 1  # max(opening, closing): SSP's rule
    first, second = traj.turns
    info = information_block(format_documents(first.documents, tokenizer))
    # the loss mask is zero exactly over the <information> block
    info_len, answer_len = first.env_end - first.env_start, second.end - second.start
    assert traj.loss_mask == [1] * first.end + [0] * info_len + [1] * answer_len
    assert tokenizer.decode(traj.response_ids[first.env_start:first.env_end]) == info
    assert first.end == first.env_start and second.start == first.env_end
    # decoding prompt + response gives back exactly the text of the conversation
    expected = tokenizer.decode(traj.prompt_ids) + turns[0] + info + turns[1]
    assert tokenizer.decode(traj.prompt_ids + traj.response_ids) == expected
    assert traj.generated_token_count == sum(t.end - t.start for t in traj.turns)


def test_all_active_rollouts_share_one_generate_per_turn(tokenizer):
    scripts = [["<answer>a</answer>"],
               ["<search>q1</search>", "<answer>b</answer>"],
               ["<search>q2</search>", "<search>q3</search>", "<answer>c</answer>"]]
    trajectories, policy, search = rollout(tokenizer, scripts)
    assert policy.calls == [3, 2, 1]  # finished rollouts drop out
    assert search.calls == [["q1", "q2"], ["q3"]]  # one batched search per turn
    assert [t.answer for t in trajectories] == ["a", "b", "c"]
    assert [len(t.turns) for t in trajectories] == [1, 2, 3]


def test_proposer_question(tokenizer):
    [traj], _, _ = rollout(tokenizer, [["<search>x</search>", "<think>ok</think><question> Who built it? </question>"]],
                           role="proposer")
    assert (traj.valid, traj.finish_reason, traj.question, traj.answer) == (True, "question", "Who built it?", None)


@pytest.mark.parametrize("bad", ["<think>hmm</think> Paris</answer>", "<search>   </search>",
                                 "<search>a <search>b</answer>", "<answer>x <think>y</think></answer>"])
def test_invalid_action_gets_corrective_message_and_continues(tokenizer, bad):
    [traj], _, search = rollout(tokenizer, [[bad, "<answer>Paris</answer>"]])
    assert traj.valid and traj.answer == "Paris"
    first = traj.turns[0]
    assert first.action == "invalid" and first.invalid_reason
    assert tokenizer.decode(traj.response_ids[first.env_start:first.env_end]) == corrective_message("solver")
    assert traj.loss_mask[first.env_start:first.env_end] == [0] * (first.env_end - first.env_start)
    assert traj.metadata["invalid_actions"] == 1
    assert search.calls == []


def test_eos_without_action_ends_invalid(tokenizer):
    [traj], _, _ = rollout(tokenizer, [[("<think>I will answer</think> Paris",)]])
    assert (traj.valid, traj.finish_reason, traj.answer) == (False, "invalid", None)
    assert "EOS without an action" in traj.invalid_reason
    assert traj.response_ids[-1] == tokenizer.eos_token_id and traj.loss_mask[-1] == 1


def test_output_that_never_stops_is_truncated_and_invalid(tokenizer):
    [traj], _, _ = rollout(tokenizer, [["<think>" + "blah " * 100]], max_turn_tokens=20)
    assert (traj.valid, traj.finish_reason) == (False, "length")
    assert traj.turns[0].action == "truncated"
    assert len(traj.response_ids) == 20


def test_response_budget_ends_rollout_before_environment_overflows(tokenizer):
    [traj], _, _ = rollout(tokenizer, [["<search>q</search>", "<answer>a</answer>"]], max_response_tokens=30)
    assert (traj.valid, traj.finish_reason) == (False, "length")
    assert len(traj.response_ids) <= 30 and 0 not in traj.loss_mask


def test_the_models_context_ends_a_rollout_before_a_prompt_the_engine_would_refuse(tokenizer):
    """vLLM refuses a whole batch holding a prompt as long as its max_model_len: a rollout whose next environment
    reply would fill the model's context ends 'length' instead, and each generation stays within it."""
    prompts = prompts_for(tokenizer, 1)
    budgets = []

    class ShortContext(ScriptedPolicy):
        max_model_len = len(prompts[0]) + 40  # room for the search turn, not for its two documents

        def generate(self, prompts_now, sampling):
            budgets.append(sampling.max_new_tokens)
            return super().generate(prompts_now, sampling)

    policy = ShortContext(tokenizer, prompts, [["<search>q</search>", "<answer>a</answer>"]])
    [traj] = run_rollouts(policy, FakeSearch(), prompts, "solver", RolloutConfig(max_turn_tokens=64), top_k=2)
    assert (traj.valid, traj.finish_reason) == (False, "length") and "model's context" in traj.invalid_reason
    assert len(prompts[0]) + len(traj.response_ids) < ShortContext.max_model_len and budgets == [40]


def test_max_turns_without_answer(tokenizer):
    [traj], policy, search = rollout(tokenizer, [["<search>a</search>", "<search>b</search>", "<search>c</search>"]],
                                     max_turns=3)
    assert (traj.valid, traj.finish_reason) == (False, "max_turns")
    assert traj.search_queries == ["a", "b", "c"]
    assert search.calls == [["a"], ["b"]]  # the last turn's search is not run: nobody would read it
    assert policy.calls == [1, 1, 1]


def test_failed_search_is_reported_in_the_information_block(tokenizer):
    trajectories, _, search = rollout(tokenizer, [["<search>boom</search>", "<answer>x</answer>"],
                                                  ["<search>fine</search>", "<answer>y</answer>"]])
    bad, good = trajectories
    assert search.calls[0] == ["boom", "fine"]  # batch raised, then one by one
    assert bad.turns[0].search_error == "ConnectionError: index unreachable"
    text = tokenizer.decode(bad.response_ids[bad.turns[0].env_start:bad.turns[0].env_end])
    assert text == information_block("Search failed: ConnectionError")
    assert bad.valid and bad.answer == "x"
    assert good.turns[0].search_error is None and len(good.turns[0].documents) == 2


def test_answer_tag_spam_is_counted(tokenizer):
    [traj], _, _ = rollout(tokenizer, [["<answer>a or <answer>b or " * 6 + "<answer>c</answer>"]])
    assert traj.answer == "c"
    assert traj.answer_tag_count == 13  # 13 opening tags, 1 closing


def test_prompt_over_budget_is_rejected(tokenizer):
    with pytest.raises(ValueError, match="max_prompt_tokens"):
        rollout(tokenizer, [["<answer>a</answer>"]], max_prompt_tokens=16)


def test_config_from_params():
    params = Params()
    config = RolloutConfig.from_params(params, temperature=0.0)
    assert (config.max_turns, config.max_response_tokens, config.temperature) == (10, 8192, 0.0)
    assert config.max_answer_tags == params.agent.max_answer_tags


# --- protocol options (Search-R1's loop beside SSP's; docs/decisions/agent.md) ------------------------


def test_eos_without_action_gets_search_r1_correction_when_asked(tokenizer):
    [traj], policy, _ = rollout(tokenizer, [[("<think>I will answer</think> Paris",), "<answer>Paris</answer>"]],
                                eos_without_action="correct")
    assert (traj.valid, traj.finish_reason, traj.answer) == (True, "answer", "Paris")
    first = traj.turns[0]
    assert tokenizer.eos_token_id not in traj.response_ids[:first.env_start]  # Search-R1 drops the special token
    assert first.end == first.env_start
    assert tokenizer.decode(traj.response_ids[first.env_start:first.env_end]) == corrective_message("solver")
    assert policy.calls == [1, 1]


def test_a_turn_ended_by_another_end_token_of_the_model_drops_it_too(tokenizer):
    """vLLM also stops on the ids of the model's generation config (Qwen2.5: <|endoftext|> beside <|im_end|>);
    the correction drops whichever special id ended the turn, not only the tokenizer's EOS."""
    other_end = tokenizer.convert_tokens_to_ids("<|endoftext|>")
    assert other_end != tokenizer.eos_token_id and other_end in tokenizer.all_special_ids

    class OtherEnd(ScriptedPolicy):
        def generate(self, prompts, sampling):
            return [Completion([*c.token_ids[:-1], other_end], c.text, c.finish_reason, c.stop)
                    if c.finish_reason == "eos" else c for c in super().generate(prompts, sampling)]

    prompts = prompts_for(tokenizer, 1)
    policy = OtherEnd(tokenizer, prompts, [[("<think>I will answer</think> Paris",), "<answer>Paris</answer>"]])
    [traj] = run_rollouts(policy, FakeSearch(), prompts, "solver", RolloutConfig(eos_without_action="correct"),
                          top_k=2)
    first = traj.turns[0]
    assert other_end not in traj.response_ids[:first.env_start] and first.end == first.env_start
    assert traj.answer == "Paris"


def test_eos_without_action_on_the_last_turn_ends_even_when_correcting(tokenizer):
    [traj], _, _ = rollout(tokenizer, [["<search>a</search>", ("no action",)]], eos_without_action="correct",
                           max_turns=2)
    assert (traj.valid, traj.finish_reason) == (False, "invalid")


def test_final_answer_turn_runs_the_last_search_and_allows_one_more_answer(tokenizer):
    script = ["<search>a</search>", "<search>b</search>", "<answer>c</answer>"]
    [ssp], _, ssp_search = rollout(tokenizer, [list(script)], max_turns=2)
    assert (ssp.valid, ssp.finish_reason) == (False, "max_turns") and ssp_search.calls == [["a"]]
    [r1], policy, r1_search = rollout(tokenizer, [list(script)], max_turns=2, final_answer_turn=True)
    assert (r1.valid, r1.answer) == (True, "c")
    assert r1_search.calls == [["a"], ["b"]] and policy.calls == [1, 1, 1]


def test_search_on_the_final_answer_turn_is_not_run(tokenizer):
    [traj], _, search = rollout(tokenizer, [["<search>a</search>", "<search>b</search>"]], max_turns=1,
                                final_answer_turn=True)
    assert (traj.valid, traj.finish_reason) == (False, "max_turns")
    assert search.calls == [["a"]] and "last of 2 turns" in traj.invalid_reason


@pytest.mark.parametrize("style, block", [("ssp", "\n<information>\nDOCS</information>\n\n"),
                                          ("searchr1", "\n\n<information>DOCS</information>\n\n")])
def test_information_format(tokenizer, style, block):
    [traj], _, _ = rollout(tokenizer, [["<search>q</search>", "<answer>a</answer>"]], information_format=style)
    first = traj.turns[0]
    docs = format_documents(first.documents, tokenizer).strip()
    assert tokenizer.decode(traj.response_ids[first.env_start:first.env_end]) == block.replace("DOCS", docs)


def test_rollout_config_reads_the_protocol_from_params():
    params = Params.model_validate({"agent": {"eos_without_action": "correct", "final_answer_turn": True,
                                              "information_format": "searchr1", "question_format": "searchr1"}})
    config = RolloutConfig.from_params(params)
    assert (config.eos_without_action, config.final_answer_turn, config.information_format,
            config.question_format, config.generations) == ("correct", True, "searchr1", "searchr1", 11)
    assert config.continuous_batching is True


# --- continuous batching: the same rollouts whichever order their generations end in -----------------


class RunningBatchPolicy(ScriptedPolicy):
    """A ScriptedPolicy with ``generate_continuous``: a generation of n tokens ends n steps after it joins, so
    short ones end (and their rollouts go on) while long ones are still writing, as in the real backend."""

    continuous_batching = True

    def generate_continuous(self, prompts, limits, sampling, on_finished) -> None:
        from dataclasses import replace

        todo, running, clock = list(zip(range(len(prompts)), prompts, limits, strict=True)), [], 0
        while todo or running:
            for index, ids, limit in todo:
                [completion] = self.generate([ids], replace(sampling, max_new_tokens=limit))
                running.append((clock + len(completion.token_ids), index, completion))
            running.sort(key=lambda entry: entry[0])
            clock = running[0][0]
            ended = [(index, completion) for end, index, completion in running if end == clock]
            running = [entry for entry in running if entry[0] != clock]
            todo = on_finished(ended)


MIXED_SCRIPTS = [["<search>a long query about towers</search>", "<answer>330 metres</answer>"],
                 ["<answer>x</answer>"],
                 ["<think>hmm</think> Paris</answer>", "<search>b</search>", "<answer>Paris</answer>"],
                 [("<think>I will answer</think> Paris",), "<answer>late</answer>"],
                 ["<think>" + "blah " * 40],
                 ["<search>boom</search>", "<answer>y</answer>"],
                 ["<search>c</search>", "<search>d</search>", "<search>e</search>", "<answer>z</answer>"]]


@pytest.mark.parametrize("config", [{}, {"max_turns": 3}, {"eos_without_action": "correct"},
                                    {"max_turns": 2, "final_answer_turn": True}, {"max_response_tokens": 60},
                                    {"max_turn_tokens": 20}], ids=str)
def test_continuous_batching_gives_the_turn_by_turn_trajectories(tokenizer, config):
    """Every protocol branch (search, answer, corrective message, EOS, truncation, failed search, max turns,
    the response budget) ends in the same trajectory when generations end out of turn order."""
    prompts = prompts_for(tokenizer, len(MIXED_SCRIPTS))
    turn_by_turn, continuous = (run_rollouts(policy(tokenizer, prompts, [list(s) for s in MIXED_SCRIPTS]), FakeSearch(),
                                             prompts, "solver", RolloutConfig(**config), top_k=2)
                                for policy in (ScriptedPolicy, RunningBatchPolicy))
    assert continuous == turn_by_turn  # turns, documents, search errors, ids, loss masks, finish and invalid reasons
    assert {t.finish_reason for t in turn_by_turn} >= {"answer", "length"}


def test_continuous_batching_off_goes_turn_by_turn(tokenizer):
    prompts = prompts_for(tokenizer, 2)
    policy = RunningBatchPolicy(tokenizer, prompts, [["<search>q</search>", "<answer>a</answer>"],
                                                     ["<answer>b</answer>"]])
    run_rollouts(policy, FakeSearch(), prompts, "solver", RolloutConfig(continuous_batching=False), top_k=2)
    assert policy.calls == [2, 1]  # two batched turns, no single-prompt generations
