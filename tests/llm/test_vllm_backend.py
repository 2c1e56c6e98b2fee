"""The vLLM adapter against a fake engine (vLLM cannot run on this CPU-only machine)."""

from __future__ import annotations

import sys
import types
from types import SimpleNamespace

import pytest

from searchplay.llm.backend import SamplingParams
from searchplay.llm.vllm_backend import VllmBackend, colocated_model, completion_from_vllm


class FakeVllmSamplingParams:
    def __init__(self, **kwargs):
        self.__dict__.update(kwargs)


@pytest.fixture
def fake_vllm(monkeypatch):
    module = types.ModuleType("vllm")
    module.SamplingParams = FakeVllmSamplingParams
    monkeypatch.setitem(sys.modules, "vllm", module)
    return module


class FakeModel:
    def __init__(self):
        self.loaded = None

    def load_weights(self, weights):
        self.loaded = dict(weights)


class FakeEngine:
    def __init__(self, outputs):
        self.outputs, self.requests, self.resets = outputs, [], 0
        self.model = FakeModel()
        runner = SimpleNamespace(model=self.model)
        self.llm_engine = SimpleNamespace(model_executor=SimpleNamespace(driver_worker=SimpleNamespace(
            model_runner=runner)))

    def generate(self, requests, sampling, use_tqdm=False):
        self.requests.append((requests, sampling))
        return [SimpleNamespace(outputs=[o]) for o in self.outputs]

    def reset_prefix_cache(self):
        self.resets += 1


def output(ids, text, finish, stop_reason=None):
    return SimpleNamespace(token_ids=ids, text=text, finish_reason=finish, stop_reason=stop_reason)


def test_generate_maps_outputs_and_sampling(fake_vllm):
    engine = FakeEngine([output((5, 6), "<search>q</search>", "stop", "</search>"), output((7,), "x", "stop", 2),
                         output((8, 9, 10), "abc", "length")])
    backend = VllmBackend("unused", engine=engine, tokenizer=object())
    completions = backend.generate([[1, 2], [3], [4]], SamplingParams(max_new_tokens=3, temperature=0.0,
                                                                       stop=("</search>",), seed=7))
    assert [(c.token_ids, c.finish_reason, c.stop) for c in completions] == [
        ([5, 6], "stop", "</search>"), ([7], "eos", None), ([8, 9, 10], "length", None)]
    requests, sampling = engine.requests[0]
    assert requests == [{"prompt_token_ids": [1, 2]}, {"prompt_token_ids": [3]}, {"prompt_token_ids": [4]}]
    assert (sampling.max_tokens, sampling.temperature, sampling.stop, sampling.seed) == (3, 0.0, ["</search>"], 7)
    assert sampling.include_stop_str_in_output is True


def test_update_weights_loads_state_dict_into_the_colocated_model():
    engine = FakeEngine([])
    backend = VllmBackend("unused", engine=engine, tokenizer=object())
    trainer_model = SimpleNamespace(state_dict=lambda: {"w": 1, "b": 2})
    backend.update_weights(trainer_model)
    assert engine.model.loaded == {"w": 1, "b": 2}
    assert engine.resets == 1


def test_colocated_model_v1_path_and_clear_error():
    model = FakeModel()
    v1 = SimpleNamespace(llm_engine=SimpleNamespace(model_executor=SimpleNamespace(driver_worker=SimpleNamespace(
        worker=SimpleNamespace(model_runner=SimpleNamespace(model=model))))))
    assert colocated_model(v1) is model
    with pytest.raises(RuntimeError, match="VLLM_ENABLE_V1_MULTIPROCESSING"):
        colocated_model(SimpleNamespace(llm_engine=SimpleNamespace()))


def test_missing_vllm_says_which_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", None)
    with pytest.raises(ImportError, match=r"searchplay\[gpu\]"):
        VllmBackend("unused", tokenizer=object())


def test_completion_from_vllm_eos_without_reason():
    assert completion_from_vllm(output([1], "a", "stop", None)).finish_reason == "eos"
