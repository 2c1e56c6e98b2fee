"""``params.paper.yaml`` against the papers' numbers: one table, one row per default.

Each row: dotted key, the paper's value, where the number comes from (the papers' tables
quote every one), and the decision that explains a deliberate difference (None: no difference).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from searchplay.config import load_params

ROOT = Path(__file__).resolve().parents[1]

PAPER_DEFAULTS = [
    ("wcr.alpha", 0.3, "KG-paths §3.2, Eq. 5: R = 1[correct] + alpha * C(1 - 1[correct]), alpha 0.3"),
    ("selfplay.group_size", 5, "SSP Table 4 / KG B.1: G = 5 Solver rollouts per question"),
    ("search.top_k", 3, "SSP §4.1 / Search-R1: top-3 passages per search"),
    ("selfplay.clip_low", 0.2, "verl default, SSP code"),
    ("selfplay.clip_high", 0.285, "SSP code: clip-high 0.285"),
    ("selfplay.kl_beta", 0.01, "SSP Table 4: KL 0.01 (low_var_kl, docs/decisions/rl.md)"),
    ("selfplay.lr", 1e-6, "SSP Table 4: lr 1e-6"),
    ("selfplay.warmup_steps", 5, "SSP Table 4: 5 warm-up steps"),
    ("selfplay.batch_size", 256, "SSP Table 4: global batch 256"),
    ("selfplay.proposer_mini_batches", 1, "SSP mini-batch 128: one Proposer step (SSP Table 4)"),
    ("selfplay.solver_mini_batches", 2, "SSP mini-batch 128 x 5 rollouts: two Solver steps"),
    ("selfplay.combine_update", False, "SSP code: separate Proposer then Solver updates"),
    ("selfplay.loss_agg_mode", "seq-mean-token-mean", "papers' objective 1/G sum_i 1/|tau_i| sum_t"),
    ("selfplay.noisy_docs", 4, "SSP §3.3: 4 noisy documents in RAG verification"),
    ("selfplay.rag_verification", True, "SSP §3.3"),
    ("selfplay.batch_completion", "replay", "SSP code: refill from the replay buffer"),
    ("selfplay.replay_reset_every", 10, "SSP code: buffer cleared every 10 steps"),
    ("agent.max_turns", 10, "SSP B.1: 10 interaction rounds"),
    ("agent.max_prompt_tokens", 4096, "SSP Table 4: max prompt 4096"),
    ("agent.max_response_tokens", 8192, "SSP Table 4: max response 8192"),
    ("agent.max_turn_tokens", 8192, "SSP code: a call may take what is left of the 8192-token response"),
    ("selfplay.iterations", 195, "KG Table 4: one epoch, 195 steps"),
    ("judge.model", "Qwen/Qwen2.5-32B-Instruct", "SSP §4.1: LLM judge Qwen2.5-32B-Instruct"),
    ("agent.temperature", 1.0, "SSP / KG: rollout temperature 1.0"),
    ("agent.max_answer_tags", 10, "SSP code: more than 10 answer tags divides the score by 4"),
    ("agent.answer_tag_rule", "either", "SSP code: > 10 opening or > 10 closing tags"),
    ("agent.eos_without_action", "end", "SSP code: an assistant message without a tool call ends the trajectory"),
    ("agent.final_answer_turn", False, "SSP code: max_assistant_turns=10 generation calls, no extra turn"),
    ("agent.information_format", "ssp", "SSP code: \\n<information>\\n{results}</information>\\n\\n"),
    ("agent.question_format", "plain", "SSP code's training prompt: Question: {}"),
    ("evaluate.question_format", "searchr1", "SSP: the evaluation data is the Search-R1-formatted prompt"),
    ("evaluate.eos_without_action", "end", "SSP evaluates with its own turn loop (same format as training)"),
    ("evaluate.final_answer_turn", False, "SSP evaluates with its own turn loop"),
    ("evaluate.information_format", "ssp", "SSP evaluates with its own turn loop"),
    ("kg.min_hops", 3, "KG-paths §3.1: paths of 3 to 7 hops"),
    ("kg.max_hops", 7, "KG-paths §3.1"),
    ("kg.max_candidates", 10, "KG-paths Alg. 1: 10 candidate edges per step"),
    ("kg.max_retries", 5, "KG-paths Alg. 1: 5 retries"),
    ("evaluate.n", 500, "SSP / KG evaluation: 500 questions per benchmark"),
    ("gdcr.k", 2.0, "GDCR paper §3.2: decay k = 2"),
    ("gdcr.sapo_lambda", 0.5, "GDCR paper §3.4 / Table 5: lambda = 0.5"),
    ("gdcr.components", "both", "GDCR Eq. 12: newly cited plus newly retrieved"),
    ("eve.lambda_v", 0.5, "EVE Eq. 17: lambda_V = 0.5"),
    ("eve.lambda_b", 0.1, "EVE Eq. 17: lambda_B = 0.1"),
    ("eve.lambda_e", 0.3, "EVE Eq. 19 / App. C: lambda_E = 0.3"),
    ("eve.l_max", 256, "EVE Eq. 15: L_max = 256 Proposer tokens"),
    ("eve.verifier_samples", 5, "EVE §3.1 / App. C: m = 5 per condition"),
    ("eve.phase_a_iterations", 50, "EVE App. C: 50 Phase A steps (then 50 Phase B)"),
    ("eve.handoff_samples", 5, "EVE App. C: five samples per prompt, valid triples kept"),
    ("eve.hop_weights", [4, 3, 2, 1], "EVE §4.1 / Dr. Zero: hop counts 1-4 in the ratio 4:3:2:1"),
    ("eve.document_tokens", 256, "Dr. Zero's data preparation: documents cut to 256 tokens"),
]

# Where the SSP paper and the SSP code disagree, the profile picks one; the decision records which and why.
DELIBERATE = {
    "selfplay.verifier": ("policy", "paper §3.2: the policy verifies; the code uses a frozen server model "
                                    "(docs/decisions/selfplay.md)"),
    "selfplay.noise_unit": ("document", "paper: noisy documents; the code: whole blocks (docs/decisions/selfplay.md)"),
}


def paper_params():
    return load_params(ROOT / "params.paper.yaml")


def value_of(params, dotted: str):
    section, key = dotted.split(".")
    return getattr(getattr(params, section), key)


@pytest.mark.parametrize(("key", "expected", "source"), PAPER_DEFAULTS, ids=[row[0] for row in PAPER_DEFAULTS])
def test_paper_profile_holds_the_papers_value(key, expected, source):
    assert value_of(paper_params(), key) == expected, f"{key}: the papers say {expected!r} ({source})"


@pytest.mark.parametrize("key", sorted(DELIBERATE))
def test_deliberate_differences_are_the_documented_ones(key):
    expected, decision = DELIBERATE[key]
    assert value_of(paper_params(), key) == expected, decision


def test_layered_over_params_yaml_the_profile_gives_the_same_settings():
    """`searchplay --params params.paper.yaml <verb>` layers the profile over params.yaml key by key, so every key
    where params.yaml's embedded default differs from the papers must be in the profile (RAG verification, the
    replay buffer, 512 tokens a turn, one path a seed...); the DVC graph (`pipeline`) is the one exception."""
    from searchplay.tracking import flat_params

    alone = flat_params(paper_params())
    layered = flat_params(load_params(ROOT / "params.paper.yaml", base=ROOT / "params.yaml"))
    differ = {key: (alone.get(key), layered.get(key)) for key in alone.keys() | layered.keys()
              if not key.startswith("pipeline.") and alone.get(key) != layered.get(key)}
    assert not differ, f"params.paper.yaml leaves these to params.yaml's embedded default: {differ}"


def test_dvc_runs_the_profile_as_params_yaml_with_every_param_each_stage_names(tmp_path, monkeypatch):
    """`cp params.paper.yaml params.yaml && dvc repro`: DVC resolves the stages from its `pipeline` section (no eve:
    its warm-start continues the shared one, off here) and finds every param a stage depends on (else `dvc repro`
    stops with 'Parameters ... are missing')."""
    import shutil

    import yaml
    from dvc.dependency.param import ParamsDependency
    from dvc.repo import Repo

    from searchplay.config import has_dotted

    shutil.copy(ROOT / "dvc.yaml", tmp_path / "dvc.yaml")
    shutil.copy(ROOT / "params.paper.yaml", tmp_path / "params.yaml")
    Repo.init(str(tmp_path), no_scm=True).close()
    monkeypatch.chdir(tmp_path)
    tree = yaml.safe_load((tmp_path / "params.yaml").read_text())
    with Repo(".") as repo:
        stages = repo.index.stages
        missing = {(stage.addressing, key) for stage in stages for dep in stage.deps
                   if isinstance(dep, ParamsDependency) for key in dep.params or [] if not has_dotted(tree, key)}
    assert {stage.addressing for stage in stages} == {
        "kg", "corpus", "index", "warmstart", "selfplay@ssp", "selfplay@kg_wcr", "selfplay@gdcr",
        "evaluate_reference@base", "evaluate@ssp", "evaluate@kg_wcr", "evaluate@gdcr", "report"}
    assert not missing
