"""The format check samples the roles the warm-start teaches (warmstart.proposers, warmstart.verifier), no other."""

from __future__ import annotations

import pytest

from searchplay.config import load_params
from searchplay.warmstart.validity import format_validity
from tests.selfplay.selfplay_fakes import FakeSearchTool, ScriptedBackend, subgraph_record


@pytest.mark.parametrize(("proposers", "families"), [(["kg", "ssp"], {"kg", "ssp"}), (["kg"], {"kg"})])
def test_the_check_samples_the_taught_proposer_prompts(tmp_path, tokenizer, proposers, families):
    records = [subgraph_record(k, 6, "warmstart") for k in range(2)]
    params = load_params(tmp_path / "absent.yaml", {"warmstart.proposers": proposers, "agent.max_turns": 3})
    backend = ScriptedBackend(tokenizer, [str(r["answer"]) for r in records])

    rates, samples = format_validity(backend, FakeSearchTool(), records, params, str)

    assert {key.split("_")[1] for key in rates if key.startswith("proposer_") and key != "proposer_valid_rate"} \
        == families
    assert {key.removeprefix("proposer_") for key in samples if key.startswith("proposer_")} == families
    assert rates["proposer_kg_valid_rate"] == 1.0  # the scripted Proposer searches twice, then asks
    assert rates["proposer_valid_rate"] == sum(rates[f"proposer_{f}_valid_rate"] for f in families) / len(families)


@pytest.mark.parametrize("verifier", [True, False])
def test_the_check_samples_the_verifier_only_where_it_is_taught(tmp_path, tokenizer, verifier):
    records = [subgraph_record(k, 6, "warmstart") for k in range(2)]
    params = load_params(tmp_path / "absent.yaml", {"warmstart.proposers": ["kg"], "warmstart.verifier": verifier,
                                                    "agent.max_turns": 3})
    backend = ScriptedBackend(tokenizer, [str(r["answer"]) for r in records])

    rates, samples = format_validity(backend, FakeSearchTool(), records, params, str)

    assert ("verifier_format_rate" in rates) is verifier and ("verifier" in samples) is verifier
    assert rates["solver_answer_rate"] == 1.0 and rates["proposer_kg_valid_rate"] == 1.0
