"""The warmstart stage end to end on a tiny budget: the real SmolLM2, a tiny real LanceDB index (full-text
search), demos from the warm-start split only, masked SFT, validity before and after, every output."""

from __future__ import annotations

import csv
import json

import pytest

from searchplay.config import load_params
from searchplay.timings import split_timings
from searchplay.warmstart.stage import WarmstartError, run_warmstart, warmstart_records
from tests.selfplay.selfplay_fakes import TitleEmbedder, subgraph_record

pytestmark = pytest.mark.slow  # loads SmolLM2 and trains it for a few steps (5.4 min on 2 fp32 cores)


def write_pool(folder, splits):
    records = [subgraph_record(k, 20 - k, split) for k, split in enumerate(splits)]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "subgraphs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return records


def write_chain_index(folder, records):
    """A tiny real LanceDB index (full-text search): one passage per hop, naming the hop's tail."""
    from searchplay.io import write_jsonl
    from searchplay.retrieval.index import build_index

    passages = [{"id": f"{r['id']}-{k}", "title": r["path"][k]["label"],
                 "text": f"The {rel['label']} of {r['path'][k]['label']} is {r['path'][k + 1]['label']}."}
                for r in records for k, rel in enumerate(r["relations"])]
    write_jsonl(folder / "passages.jsonl", passages)
    build_index(folder / "passages.jsonl", folder / "index", "passages", TitleEmbedder(), ann_threshold=10**6,
                fts=True, show_progress=False)


def tiny_params(tmp_path, **warmstart):
    overrides = {"kg.out_dir": str(tmp_path / "kg"), "index.dir": str(tmp_path / "retrieval" / "index"),
                 "search.mode": "fts", "models.device": "cpu", "agent.max_turns": 3, "agent.max_turn_tokens": 48,
                 "warmstart.out_dir": str(tmp_path / "checkpoints" / "warmstart"),
                 "warmstart.reports_dir": str(tmp_path / "reports" / "warmstart"),
                 "tracking.uri": f"sqlite:///{tmp_path / 'mlflow.db'}", "warmstart.demos_per_role": 8,
                 "warmstart.eval_prompts": 2, "warmstart.steps": 14, "warmstart.warmup_steps": 0}
    overrides.update({f"warmstart.{k}": v for k, v in warmstart.items()})
    return load_params(tmp_path / "absent.yaml", overrides)


def test_the_stage_raises_format_validity_above_the_base_model(tmp_path):
    import mlflow

    records = write_pool(tmp_path / "kg", ["warmstart"] * 10 + ["selfplay", "kg_heldout"])
    write_chain_index(tmp_path / "retrieval", records)
    # 4 steps (14 took 8.7 min, 7 about 85 s): the verifier format rate went from 0.0 to 1.0 and the loss from 1.8
    # to 0.43, in bf16 and forced to fp32 alike (2026-12-07; 7 steps: 1.0 and 0.05 in 30 s more)
    params = tiny_params(tmp_path, steps=4)
    metrics = run_warmstart(params, progress=False)

    assert metrics["verifier_format_rate"] > metrics["verifier_format_rate_base"]
    assert metrics["demo_subgraphs"] == 8 and metrics["check_prompts"] == 2  # 10 warm-start subgraphs, disjoint
    assert metrics["trained_tokens"] < metrics["tokens"] and metrics["loss_last"] < metrics["loss_first"]
    reports = tmp_path / "reports" / "warmstart"
    results, timings = split_timings(metrics)  # durations go to timings.json, out of the file DVC compares
    assert json.loads((reports / "metrics.json").read_text()) == results
    assert timings and json.loads((reports / "timings.json").read_text()).items() >= timings.items()
    assert len(list(csv.DictReader((reports / "history.csv").open()))) == 4
    assert (reports / "loss.png").stat().st_size > 0
    samples = json.loads((reports / "samples.json").read_text())
    assert set(samples) == {"base", "warmstart", "demos"}
    used = {d["subgraph_id"] for d in samples["demos"]}
    assert used <= {r["id"] for r in records[:10]}  # demos come from the warm-start split only
    assert (tmp_path / "checkpoints" / "warmstart" / "model" / "config.json").is_file()

    mlflow.set_tracking_uri(params.tracking.uri)
    runs = mlflow.search_runs(experiment_names=["searchplay-warmstart"], output_format="list")
    assert len(runs) == 1 and runs[0].data.metrics["verifier_format_rate"] == metrics["verifier_format_rate"]


def test_disabled_writes_every_output_and_no_model(tmp_path):
    params = tiny_params(tmp_path, enabled=False)
    metrics = run_warmstart(params, progress=False)
    assert metrics["enabled"] is False
    reports = tmp_path / "reports" / "warmstart"
    assert {p.name for p in reports.iterdir()} == {"metrics.json", "samples.json", "history.csv", "loss.png"}
    assert not (tmp_path / "checkpoints" / "warmstart" / "model").exists()


def test_a_pool_without_enough_warmstart_subgraphs_says_how_to_fix_it(tmp_path):
    write_pool(tmp_path / "kg", ["selfplay", "warmstart", "kg_heldout"])
    with pytest.raises(WarmstartError, match=r"kg\.warmstart_share"):
        warmstart_records(tiny_params(tmp_path))


def test_a_pool_line_that_is_no_record_is_named_not_a_traceback(tmp_path):
    write_pool(tmp_path / "kg", ["warmstart"] * 4)
    with (tmp_path / "kg" / "subgraphs.jsonl").open("a") as pool:
        pool.write("[1]\n")
    with pytest.raises(WarmstartError, match=r"subgraphs.jsonl: a line holds list '\[1\]', not a subgraph record"):
        warmstart_records(tiny_params(tmp_path))


def test_the_checks_run_on_a_vllm_engine_that_follows_the_trained_weights(tmp_path, vllm_installed, smollm2_path):
    """With vLLM the format checks sample from an engine of the start weights, and ``update_weights`` after training
    brings it to the trained model: its greedy tokens equal the transformers backend's on that model."""
    import torch

    from searchplay.llm.backend import SamplingParams
    from searchplay.llm.tokenizer import encode_prompt, load_tokenizer
    from searchplay.llm.transformers_backend import TransformersBackend
    from searchplay.llm.vllm_backend import VllmBackend
    from searchplay.warmstart.stage import load_policy, policy_backend

    params = tiny_params(tmp_path)
    params = params.model_copy(update={"agent": params.agent.model_copy(update={"backend": "vllm",
                                                                              "rollout_dtype": "model"})})
    tokenizer = load_tokenizer(str(smollm2_path))
    model = load_policy(str(smollm2_path), params)
    backend = policy_backend(model, tokenizer, params, str(smollm2_path))
    assert isinstance(backend, VllmBackend)
    prompt = [encode_prompt(tokenizer, [{"role": "user", "content": "Name the capital of France."}])]
    greedy = SamplingParams(max_new_tokens=12, temperature=0.0)
    before = backend.generate(prompt, greedy)[0].token_ids
    with torch.no_grad():  # a stand-in for the SFT steps: every weight moves
        for parameter in model.parameters():
            parameter.add_(torch.randn_like(parameter) * 0.02)
    backend.update_weights(model)
    after = backend.generate(prompt, greedy)[0].token_ids
    assert after != before
    assert after == TransformersBackend(model, tokenizer, device="cpu").generate(prompt, greedy)[0].token_ids


@pytest.mark.parametrize(("proposers", "first_steps"), [
    (["kg", "ssp"], ["proposer_kg", "proposer_ssp", "proposer_kg"]),
    (["kg"], ["proposer_kg", "proposer_kg", "proposer_kg"])])
def test_each_step_trains_a_taught_proposer_prompt(tmp_path, proposers, first_steps):
    from searchplay.warmstart.demos import ROLES, Demo
    from searchplay.warmstart.stage import plain_roles, schedule

    params = tiny_params(tmp_path, proposers=proposers)
    roles = plain_roles(params)
    assert set(ROLES) - set(roles) == {f"proposer_{p}" for p in ("kg", "ssp") if p not in proposers}
    steps = schedule([Demo(role, "x") for role in roles], 3)
    assert [step[0].role for step in steps] == first_steps
    assert all([d.role for d in step[1:]] == ["solver", "verifier"] for step in steps)


def test_without_the_verifier_each_step_trains_a_proposer_and_a_solver_demo(tmp_path):
    from searchplay.warmstart.demos import Demo
    from searchplay.warmstart.stage import plain_roles, schedule

    params = tiny_params(tmp_path, proposers=["kg"], verifier=False)
    roles = plain_roles(params)
    assert roles == ("proposer_kg", "solver")
    steps = schedule([Demo(role, "x") for role in roles], 3)
    assert all([d.role for d in step] == ["proposer_kg", "solver"] for step in steps)


def test_without_check_prompts_no_engine_is_built_and_the_loss_is_plotted_alone(tmp_path, tiny_model_dir,
                                                                                 monkeypatch):
    from searchplay.warmstart import stage

    records = write_pool(tmp_path / "kg", ["warmstart"] * 4 + ["selfplay"])
    write_chain_index(tmp_path / "retrieval", records)
    params = tiny_params(tmp_path, eval_prompts=0, steps=1, proposers=["kg"], verifier=False)  # as params.quick
    params = params.model_copy(update={"models": params.models.model_copy(update={"policy": str(tiny_model_dir)})})

    def no_engine(*args, **kwargs):
        raise AssertionError("an engine was built for a check with no prompts")

    monkeypatch.setattr(stage, "policy_backend", no_engine)
    metrics = run_warmstart(params, progress=False, track=False)

    assert metrics["check_prompts"] == 0 and metrics["demo_subgraphs"] == 4
    assert not [key for key in metrics if key.endswith("_rate") or key.endswith("_rate_base")]
    assert "demos_proposer_ssp" not in metrics and metrics["demos_proposer_kg"] > 0
    assert "demos_verifier" not in metrics and metrics["demos_solver"] > 0
    reports = tmp_path / "reports" / "warmstart"
    assert json.loads((reports / "samples.json").read_text())["warmstart"] == {}
    assert (reports / "loss.png").stat().st_size > 0
