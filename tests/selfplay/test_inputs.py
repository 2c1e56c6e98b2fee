"""searchplay.selfplay.inputs: what a resume under ``dvc repro`` compares before it continues a run."""

from pathlib import Path

import yaml

from searchplay.llm.weights import model_digest
from searchplay.selfplay.inputs import INPUTS_FILE, changed_inputs, code_digest, run_inputs, write_inputs

ROOT = Path(__file__).resolve().parents[2]


def test_changed_inputs_names_what_differs_and_everything_without_a_record(tmp_path):
    inputs = {"params": "a", "start": "b", "pinned": "c", "code": "d"}
    assert changed_inputs(tmp_path, inputs) == ["code", "params", "pinned", "start"]  # no file: unknown
    write_inputs(tmp_path, inputs)
    assert changed_inputs(tmp_path, inputs) == []
    assert changed_inputs(tmp_path, {**inputs, "start": "e"}) == ["start"]
    (tmp_path / INPUTS_FILE).write_text("{torn")
    assert changed_inputs(tmp_path, inputs) == sorted(inputs)


def test_the_model_digest_follows_weights_and_configs_not_optimizer_states(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    (model / "model.safetensors").write_bytes(b"weights")
    (model / "config.json").write_text("{}")
    before = model_digest(str(model))
    (model / "optimizer.bin").write_bytes(b"moments")
    assert model_digest(str(model)) == before
    (model / "model.safetensors").write_bytes(b"other weights")
    assert model_digest(str(model)) != before
    weights = model_digest(str(model))
    (model / "chat_template.jinja").write_text("{{ messages }}")  # transformers 5 saves it apart from the tokenizer
    assert model_digest(str(model)) != weights
    assert model_digest("HuggingFaceTB/SmolLM2-135M-Instruct") == "HuggingFaceTB/SmolLM2-135M-Instruct"


def test_run_inputs_record_params_start_phase_state_and_code(tmp_path):
    inputs = run_inputs("p1", "a/hub/name", {"phase": "b", "solver_set": [{"q": 1}]})
    assert inputs["params"] == "p1" and inputs["start"] == "a/hub/name" and inputs["code"] == code_digest()
    assert run_inputs("p1", "a/hub/name", {"phase": "b", "solver_set": [{"q": 2}]})["pinned"] != inputs["pinned"]


def test_run_inputs_follow_the_data_the_stage_reads(tmp_path):
    """A KG pool or an index changed under the same params and code (a new dump, another embedder revision): DVC
    runs the stage again, and its old checkpoints, trained on the old data, are not resumed."""
    pool, fingerprint = tmp_path / "subgraphs.jsonl", tmp_path / "index.fingerprint.json"
    pool.write_text('{"id": "a"}\n')
    fingerprint.write_text('{"rows": 10}')
    first = run_inputs("p1", "m", {}, [pool, fingerprint])
    assert run_inputs("p1", "m", {}, [pool, fingerprint]) == first
    fingerprint.write_text('{"rows": 11}')
    assert run_inputs("p1", "m", {}, [pool, fingerprint])["data"] != first["data"]
    write_inputs(tmp_path, first)
    assert changed_inputs(tmp_path, run_inputs("p1", "m", {}, [pool, fingerprint])) == ["data"]
    fingerprint.unlink()  # a search server's index: its absence is part of the record, not an error
    assert run_inputs("p1", "m", {}, [pool, fingerprint])["data"] not in (first["data"], "")


def test_a_run_with_a_held_out_curve_follows_its_benchmark_file(tmp_path):
    """With selfplay.eval_every the run also reads the curve's benchmark (a DVC dep of the stage): an edited
    file re-runs the stage, which must then not keep the curve its old checkpoints measured on the old file."""
    from searchplay.config import load_params
    from searchplay.selfplay.loop import _run_inputs
    from searchplay.selfplay.variants import get_variant

    questions = tmp_path / "benchmarks" / "nq" / "test.jsonl"
    questions.parent.mkdir(parents=True)
    questions.write_text('{"question": "q1", "golden_answers": ["a"]}\n')
    settings = {"evaluate.data_dir": str(tmp_path / "benchmarks"), "selfplay.eval_benchmark": "nq",
                "kg.out_dir": str(tmp_path / "kg"), "index.dir": str(tmp_path / "index")}
    curve = load_params(tmp_path / "absent.yaml", {**settings, "selfplay.eval_every": 2})
    plain = load_params(tmp_path / "absent.yaml", settings)
    before = {name: _run_inputs(params, get_variant("kg_wcr"), {})["data"] for name, params in
              (("curve", curve), ("plain", plain))}
    questions.write_text('{"question": "q2", "golden_answers": ["b"]}\n')
    assert _run_inputs(curve, get_variant("kg_wcr"), {})["data"] != before["curve"]
    assert _run_inputs(plain, get_variant("kg_wcr"), {})["data"] == before["plain"]  # no curve: not read


def test_the_params_digest_holds_what_the_stage_reads_and_nothing_else(tmp_path):
    """A run killed under ``dvc repro`` and an edit DVC would not re-run the stage for (``evaluate.n``, another
    variant's section, MLflow's URI): the rerun continues. An edit to what the run reads starts over."""
    from searchplay.config import load_params
    from searchplay.selfplay.inputs import params_digest

    def digest(variant: str = "kg_wcr", **overrides) -> str:
        return params_digest(load_params(tmp_path / "absent.yaml", overrides), variant)

    same = digest()
    for unread in ({"evaluate.n": 7}, {"ssp.search_turns": 4}, {"tracking.uri": "sqlite:///x.db"},
                   {"kg.num_seeds": 9}, {"selfplay.moments_on_disk": "on"}):
        assert digest(**unread) == same, unread
    for read in ({"selfplay.lr": 2e-6}, {"wcr.alpha": 0.45}, {"agent.max_turns": 3}, {"models.device": "cpu"},
                 {"evaluate.seed": 5}, {"index.nprobes": 7}):
        assert digest(**read) != same, read
    assert digest("ssp", **{"ssp.search_turns": 4}) != digest("ssp")
    unlisted = load_params(tmp_path / "absent.yaml", {})  # a variant run from the CLI alone: every section counts
    assert params_digest(unlisted, "kg_template") == unlisted.digest()


def test_the_params_digest_reads_the_keys_dvc_yaml_lists_for_each_self_play_stage():
    from searchplay.config import load_params
    from searchplay.selfplay.inputs import RUN_ONLY_PARAMS, STAGE_PARAMS

    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    for name, variant in load_params(ROOT / "params.yaml").pipeline.variants.items():
        own = {f"${{item.params[{i}]}}": key for i, key in enumerate(variant.params)}
        listed = {own.get(key, key) for key in stages["selfplay"]["do"]["params"]}
        assert listed == {*STAGE_PARAMS, *variant.params}, name
    phase_a = set(stages["eve_phase_a"]["do"]["params"])
    assert phase_a <= {*STAGE_PARAMS, *RUN_ONLY_PARAMS, "eve"}  # Phase A reads less; its digest holds more
