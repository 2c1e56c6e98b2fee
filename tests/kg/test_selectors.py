"""Selectors: JSON parsing, retries then stop, the random baseline, the OpenAI endpoint (respx, never live)."""

from __future__ import annotations

import httpx
import pytest
import respx

from searchplay.kg.selectors import (
    OpenAISelector,
    RandomSelector,
    SelectionRequest,
    parse_choice,
    select_with_retries,
    selector_messages,
)
from searchplay.kg.store import Edge

EDGES = [Edge("P19", "place of birth", "wikibase-item", 1, "Q3012", "Ulm", "city in Germany"),
         Edge("P69", "educated at", "wikibase-item", 1, "Q11942", "ETH Zurich", "university"),
         Edge("P569", "date of birth", "time", 1, None, "14 March 1879", "")]
REQUEST = SelectionRequest(["Albert Einstein"], [], "physicist", EDGES)


@pytest.mark.parametrize(("reply", "expected"), [
    ('{"answer": 2}', 2), ('Sure! {"answer": 0}', 0), ('{"answer": "3"}', 3), ('{"answer": 4}', None),
    ('{"answer": -1}', None), ("answer: 2", None), ('{"answer": true}', None), ('{"answer": 1', None),
    ('{"foo": 1} {"answer": 1}', 1),
])
def test_parse_choice(reply, expected):
    assert parse_choice(reply, 3) == expected


def test_prompt_lists_candidates_and_asks_for_json():
    user = selector_messages(REQUEST)[1]["content"]
    assert "1. place of birth -> Ulm (city in Germany)" in user and '{"answer": 0}' in user
    assert "Albert Einstein (physicist)" in user


def test_invalid_replies_retried_then_stop_and_counted():
    script = {0: ["nope", '{"answer": 2}'], 1: ["bad"] * 6}
    calls = {0: 0, 1: 0}

    def generate(pending):
        out = []
        for i in pending:
            out.append(script[i][calls[i]])
            calls[i] += 1
        return out

    selections = select_with_retries([REQUEST, REQUEST], generate, max_retries=5)
    assert selections[0].choice == 2 and not selections[0].invalid
    assert selections[0].replies == ["nope", '{"answer": 2}']
    assert selections[1].choice == 0 and selections[1].invalid and len(selections[1].replies) == 6


def test_random_selector_is_seeded():
    picks = [s.choice for s in RandomSelector(7).select([REQUEST] * 20)]
    assert picks == [s.choice for s in RandomSelector(7).select([REQUEST] * 20)]
    assert set(picks) <= {1, 2, 3} and len(set(picks)) > 1


@respx.mock
def test_openai_selector_retries_bad_json_and_http_errors():
    replies = iter([httpx.Response(500), _chat("I pick the second"), _chat('{"answer": 2}')])
    route = respx.post("http://llm.test/v1/chat/completions").mock(side_effect=lambda request: next(replies))
    selector = OpenAISelector("http://llm.test/v1", "deepseek-v3.2", concurrency=1)
    [selection] = selector.select([REQUEST])
    assert selection.choice == 2 and len(selection.replies) == 3 and route.call_count == 3
    body = route.calls[0].request.read().decode()
    assert '"model":"deepseek-v3.2"' in body.replace(" ", "")


@respx.mock
def test_openai_selector_concurrent_and_gives_up_after_retries():
    respx.post("http://llm.test/v1/chat/completions").mock(return_value=_chat("no idea"))
    selector = OpenAISelector("http://llm.test/v1", "m", max_retries=2, concurrency=4)
    selections = selector.select([REQUEST] * 5)
    assert all(s.choice == 0 and s.invalid and len(s.replies) == 3 for s in selections)


def _chat(content: str) -> httpx.Response:
    return httpx.Response(200, json={"choices": [{"message": {"role": "assistant", "content": content}}]})


@pytest.fixture(scope="module")
def smollm2_tokenizer(smollm2_path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(smollm2_path)


@pytest.mark.parametrize(("num_candidates", "written", "allowed"), [
    (3, "", "0123"), (10, "", "0123456789"), (10, "1", ["0", "}"]), (9, "1", ["}"]), (10, "10", ["}"]),
    (3, "2", ["}"]), (12, "1", ["0", "1", "2", "}"]),
])
def test_answer_choices_allow_only_valid_replies(smollm2_tokenizer, num_candidates, written, allowed):
    """After '{"answer": ' only k} with 0 <= k <= n may follow (the transformers backend's token mask); "1" may
    still become "10" when n = 10."""
    from searchplay.kg.selectors import answer_choices
    from searchplay.llm.backend import choice_tokens

    constraint = choice_tokens(smollm2_tokenizer, [answer_choices(num_candidates)])
    ids = smollm2_tokenizer.encode(written, add_special_tokens=False)
    assert sorted(smollm2_tokenizer.decode([i]) for i in constraint(0, ids)) == sorted(allowed)
    closed = smollm2_tokenizer.encode(written + "}", add_special_tokens=False)
    assert constraint(0, closed) == [smollm2_tokenizer.eos_token_id]


def test_a_tokenizer_that_merges_digits_is_masked_by_its_own_tokens():
    """Each reply is allowed as its tokenizer writes it: "10" as one token where the tokenizer merges it."""
    from searchplay.llm.backend import choice_tokens

    class MergingTokenizer:
        eos_token_id = 0

        def encode(self, text, add_special_tokens=False):
            return [100 + int(text[:-1]), 1]  # "k}" -> [k's own token, "}"]

    allowed = choice_tokens(MergingTokenizer(), [("0}", "10}")])
    assert allowed(0, []) == [100, 110] and allowed(0, [110]) == [1] and allowed(0, [110, 1]) == [0]


def test_local_selector_is_served_by_the_policy_backend(monkeypatch, smollm2_tokenizer):
    """The selector's model comes from ``load_backend`` with the run's params (models.device:
    CUDA where there is a GPU, the rollout dtype), not a private CPU copy."""
    import searchplay.llm as llm
    from searchplay.config import Params
    from searchplay.kg.selectors import LocalSelector, make_selector

    seen = {}

    class Backend:
        tokenizer = smollm2_tokenizer

    def fake_load_backend(model, params=None, **kwargs):
        seen.update(model=model, device=params.models.device)
        return Backend()

    monkeypatch.setattr(llm, "load_backend", fake_load_backend)
    params = Params.model_validate({"models": {"device": "cuda"}, "kg": {"selector": "llm"}})
    selector = make_selector(params.kg, params=params)
    assert isinstance(selector, LocalSelector) and seen == {"model": "bundled:smollm2", "device": "cuda"}
