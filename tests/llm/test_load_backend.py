"""``agent.backend`` resolved: 'auto' picks vLLM where it is installed, the transformers backend elsewhere."""

from __future__ import annotations

import importlib.util

import pytest

from searchplay import llm
from searchplay.config import Params


@pytest.fixture
def fresh_auto():
    llm._auto_backend.cache_clear()
    yield
    llm._auto_backend.cache_clear()


@pytest.mark.parametrize(("installed", "kind"), [(True, "vllm"), (False, "transformers")])
def test_auto_is_vllm_only_where_it_is_installed(fresh_auto, monkeypatch, caplog, installed, kind):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: (object() if installed else None) if name == "vllm" else real(name, *a))
    with caplog.at_level("INFO", logger="searchplay.llm"):
        assert llm.backend_kind(Params.model_validate({"agent": {"backend": "auto"}})) == kind
    assert f"agent.backend=auto: {'vLLM' if installed else 'transformers'}" in caplog.text


@pytest.mark.parametrize("named", ["transformers", "vllm"])
def test_a_named_backend_is_used_as_named(fresh_auto, monkeypatch, named):
    monkeypatch.setattr(importlib.util, "find_spec", lambda *a: pytest.fail("a named backend looks nothing up"))
    assert llm.backend_kind(Params.model_validate({"agent": {"backend": named}})) == named


def test_auto_without_vllm_builds_the_transformers_backend(fresh_auto, monkeypatch, smollm2_path):
    from searchplay.llm.transformers_backend import TransformersBackend

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "vllm" else real(name, *a))
    params = Params.model_validate({"agent": {"backend": "auto"}, "models": {"device": "cpu"}})
    assert isinstance(llm.load_backend(str(smollm2_path), params), TransformersBackend)
