"""Judge: exact parsing, EM short-circuit, the endpoint's failure paths (respx), cache, fail-closed counts."""

from __future__ import annotations

import httpx
import pytest
import respx

from searchplay.config import JudgeConfig
from searchplay.llm.judge import (
    Judge,
    OpenAIJudgeLLM,
    VerdictCache,
    judge_messages,
    make_judge,
    parse_verdict,
)

URL = "http://judge.test/v1/chat/completions"


def reply(text: str) -> httpx.Response:
    return httpx.Response(200, json={"choices": [{"message": {"role": "assistant", "content": text}}]})


def openai_judge(tmp_path=None, **kwargs) -> Judge:
    llm = OpenAIJudgeLLM("http://judge.test/v1/", "judge-model", api_key="k", timeout_s=0.5,
                         sleep=lambda s: None, **kwargs)
    cache = VerdictCache(tmp_path / "cache.sqlite") if tmp_path else None
    return Judge(llm, "ssp", cache)


# Real-looking judge replies: explicit verdicts, sentence forms, reasoning blocks, and the
# replies that must never count as correct.
VERDICTS = [
    ("Correct", True), ("correct.", True), ('"Correct"', True), ("**Correct**", True), ("  CORRECT\n", True),
    ("Correct. The model's answer matches the reference.", True), ("The answer is correct.", True),
    ("<think>The reference says Paris; the model says Paris.</think>\nCorrect", True),
    ("<think>Is it wrong? No, it matches.</think> Correct.", True),
    ("Incorrect", False), ("incorrect.", False), ("Wrong", False), ("Wrong.", False), ("Not correct", False),
    ("The answer is incorrect.", False), ("The model's answer is wrong.", False), ("It isn't correct.", False),
    ("It is not correct", False), ("<think>Paris vs Lyon</think>Incorrect", False),
    ("", None), ("Yes", None), ("No", None), ("Correctness cannot be judged", None),
    ("I cannot tell whether it is correct.", None), ("Correct or incorrect?", None),
    ("It might be correct", None), ("Partially correct", None), ("<think>the reference says", None),
    ("The answer is correct, not wrong", None), ("N/A", None),
]


@pytest.mark.parametrize(("text", "expected"), VERDICTS, ids=[repr(t) for t, _ in VERDICTS])
def test_parse_verdict_table(text, expected):
    assert parse_verdict(text) is expected


def test_judge_prompt_wording():
    ssp = judge_messages("Q?", "pred", ["g1", "g2"], "ssp")
    assert ssp[0]["content"].startswith("You are a professional judge")
    user = ssp[1]["content"]
    assert user.startswith("Please determine whether the model's answer is consistent with the reference answer:")
    assert "Model Answer: pred\nReference Answer: g1; g2" in user
    assert user.endswith('respond only with "Correct" or "Incorrect". Do not provide any additional explanation.')
    assert '"Correct" or "Wrong"' in judge_messages("Q?", "p", ["g"], "kg")[1]["content"]


def test_exact_judge_is_em_only_and_says_so():
    judge = make_judge(JudgeConfig())
    assert judge.name == "exact-match"
    verdicts = judge.judge_many([("q", "The Beatles", ["Beatles"]), ("q", "Fab Four", ["Beatles"]), ("q", None, "x")])
    assert [(v.correct, v.method, v.judge_model) for v in verdicts] == [
        (True, "exact", "exact-match"), (False, "exact", "exact-match"), (False, "exact", "exact-match")]
    assert judge.is_correct("q", "beatles!", "The Beatles")


@respx.mock
def test_llm_verdicts_and_exact_short_circuit():
    route = respx.post(URL).mock(side_effect=[reply("Correct"), reply("Incorrect")])
    judge = openai_judge()
    verdicts = judge.judge_many([("q1", "Paris", ["Paris"]), ("q2", "City of Light", ["Paris"])])
    assert (verdicts[0].method, verdicts[0].correct) == ("exact", True)
    assert (verdicts[1].method, verdicts[1].correct, verdicts[1].judge_model) == ("llm", True, "judge-model")
    assert judge.judge("q3", "London", ["Paris"]).correct is False  # "Incorrect" is NOT correct
    assert route.call_count == 2
    request = route.calls[0].request
    assert request.headers["authorization"] == "Bearer k"
    body = request.read().decode()
    assert '"temperature":0.1' in body.replace(" ", "") and '"max_tokens":10' in body.replace(" ", "")


@respx.mock
def test_retries_5xx_then_succeeds():
    route = respx.post(URL).mock(side_effect=[httpx.Response(500), httpx.Response(503), reply("Correct")])
    delays = []
    llm = OpenAIJudgeLLM("http://judge.test/v1", "m", max_retries=3, backoff_s=0.5, sleep=delays.append)
    assert Judge(llm).judge("q", "x", ["y"]).correct
    assert route.call_count == 3
    assert delays == [0.5, 1.0]  # exponential backoff


@respx.mock
def test_timeouts_exhaust_retries_and_fail_closed():
    route = respx.post(URL).mock(side_effect=httpx.ReadTimeout("slow"))
    judge = openai_judge(max_retries=2)
    verdict = judge.judge("q", "x", ["y"])
    assert (verdict.correct, verdict.method) == (False, "error")
    assert "after 3 attempts" in verdict.error
    assert route.call_count == 3
    assert judge.counts["error"] == 1


@respx.mock
def test_a_judge_error_names_the_endpoint_without_its_credentials():
    secret_url = URL.replace("://", "://user:s3cret@")
    respx.post(secret_url).mock(return_value=httpx.Response(503))
    judge = Judge(OpenAIJudgeLLM(secret_url.removesuffix("/chat/completions"), "m", max_retries=1,
                                 sleep=lambda s: None))
    verdict = judge.judge("q", "x", ["y"])
    assert verdict.method == "error" and "***@" in verdict.error and "s3cret" not in verdict.error


@respx.mock
def test_an_endpoint_that_keeps_failing_stops_the_judge_after_n_failures_in_a_row():
    from searchplay.llm.judge import JudgeOutageError

    route = respx.post(URL).mock(side_effect=httpx.ReadTimeout("no reply"))
    judge = openai_judge(max_retries=0)
    judge.max_consecutive_errors = 3
    assert [v.method for v in judge.judge_many([("q", "x", ["y"])] * 2)] == ["error", "error"]
    with pytest.raises(JudgeOutageError, match="failed 3 times in a row"):
        judge.judge_many([("q", "x", ["y"])] * 2)
    assert route.call_count == 4


@respx.mock
def test_a_batch_larger_than_the_limit_stops_after_the_limit_not_after_the_batch():
    """An evaluation batch of 32 answers against an endpoint that never replies: 16 calls, not 32 (each call waits
    its timeouts, so the batch would cost twice the time before the stop)."""
    from searchplay.llm.judge import JudgeOutageError

    route = respx.post(URL).mock(side_effect=httpx.ReadTimeout("no reply"))
    judge = openai_judge(max_retries=0)
    judge.max_consecutive_errors = 16
    with pytest.raises(JudgeOutageError, match="failed 16 times in a row"):
        judge.judge_many([("q", f"x{i}", ["y"]) for i in range(32)])
    assert route.call_count == 16


@respx.mock
def test_one_good_reply_resets_the_failure_count_and_the_deadline_bounds_the_time():
    from searchplay.llm.judge import JudgeOutageError

    respx.post(URL).mock(side_effect=[httpx.Response(503), reply("Correct"), httpx.Response(503)])
    judge = openai_judge(max_retries=0)
    judge.max_consecutive_errors = 2
    methods = [judge.judge("q", f"x{i}", ["y"]).method for i in range(3)]
    assert methods == ["error", "llm", "error"]  # never two in a row
    judge.deadline_s, judge.llm_seconds = 1.0, 1.5
    with pytest.raises(JudgeOutageError, match=r"judge\.deadline_s"):
        judge.judge("q", "x9", ["y"])


@respx.mock
def test_client_error_is_not_retried():
    route = respx.post(URL).mock(return_value=httpx.Response(401, text="bad key"))
    verdict = openai_judge(max_retries=3).judge("q", "x", ["y"])
    assert (verdict.correct, verdict.method) == (False, "error")
    assert "HTTP 401" in verdict.error
    assert route.call_count == 1


@respx.mock
@pytest.mark.parametrize(
    "response",
    [httpx.Response(200, text="<html>not json"), httpx.Response(200, json={"choices": []}),
     httpx.Response(200, json={"choices": [{"message": {"content": None}}]}), reply("Maybe?")],
)
def test_garbage_replies_fail_closed(response):
    respx.post(URL).mock(return_value=response)
    judge = openai_judge()
    verdict = judge.judge("q", "x", ["y"])
    assert (verdict.correct, verdict.method) == (False, "error")
    assert judge.counts == {"error": 1}


@respx.mock
def test_cache_hits_skip_the_endpoint(tmp_path):
    route = respx.post(URL).mock(return_value=reply("Correct"))
    first = openai_judge(tmp_path).judge("q", "Lutetia", ["Paris"])
    again = openai_judge(tmp_path)  # a new process would open the same file
    second = again.judge("q", "Lutetia", ["Paris"])
    assert first == second and second.method == "llm"
    assert route.call_count == 1
    again.judge("q", "Lutetia", ["Paris", "Lutèce"])  # different golds: a different key
    assert route.call_count == 2


@respx.mock
def test_errors_are_not_cached(tmp_path):
    route = respx.post(URL).mock(side_effect=[httpx.Response(200, text="junk"), reply("Correct")])
    judge = openai_judge(tmp_path, max_retries=0)
    assert judge.judge("q", "x", ["y"]).method == "error"
    assert judge.judge("q", "x", ["y"]).method == "llm"
    assert route.call_count == 2


def test_make_judge_openai_needs_endpoint_and_model():
    with pytest.raises(ValueError, match=r"judge\.endpoint or judge\.model"):
        make_judge(JudgeConfig(backend="openai", model="m"))
    judge = make_judge(JudgeConfig(backend="openai", endpoint="http://judge.test/v1", model="m", cache_path=None))
    assert judge.name == "m"


def test_a_local_judge_is_the_policy_and_a_model_of_its_own_is_refused_at_load():
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match=r"judge\.model must be empty.*vllm serve Qwen"):
        JudgeConfig(backend="local", model="Qwen2.5-7B-Instruct")  # it was judged by the policy under this name
    with pytest.raises(ValueError, match="no policy here"):
        make_judge(JudgeConfig(backend="local"))
    policy = object()
    judge = make_judge(JudgeConfig(backend="local"), backend=policy, policy_name="local-policy (kg_wcr)")
    assert judge.name == "local-policy (kg_wcr)" and judge.llm.backend is policy


class ScriptedEvidenceLLM:
    """Replies in order; an Exception instance stands for a failed call."""

    name = "scripted-llm"

    def __init__(self, replies):
        self.replies, self.conversations = list(replies), []

    def complete_many(self, conversations):
        self.conversations += conversations
        return [self.replies.pop(0) for _ in conversations]


def test_evidence_judgement_without_an_llm_looks_for_a_gold_answer_in_the_span():
    from searchplay.llm.judge import Judge

    verdicts = Judge().judge_evidence_many([("Q?", "Paris is the capital.", ["paris"]),
                                            ("Q?", "Lyon is big.", ["Paris"]), ("Q?", None, ["Paris"])])
    assert [(v.correct, v.method) for v in verdicts] == [(True, "exact"), (False, "exact"), (False, "exact")]


def test_evidence_judgement_with_an_llm_reads_yes_no_and_fails_closed():
    from searchplay.llm.judge import Judge

    llm = ScriptedEvidenceLLM(["YES", "No, it does not.", "perhaps", RuntimeError("down")])
    items = [("Q?", f"span {k}", ["Paris", "City of Light"]) for k in range(4)] + [("Q?", " ", ["Paris"])]
    verdicts = Judge(llm=llm).judge_evidence_many(items)
    assert [(v.correct, v.method) for v in verdicts] == [(True, "llm"), (False, "llm"), (False, "error"),
                                                         (False, "error"), (False, "exact")]
    assert len(llm.conversations) == 4 and "Paris; City of Light" in llm.conversations[0][0]["content"]
