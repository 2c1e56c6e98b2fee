import re
from pathlib import Path

import pytest

from searchplay.config import ConfigError, Params, load_params, parse_override


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "params.yaml"
    path.write_text(text)
    return path


def test_repository_params_file_is_valid(repo_root):
    params = load_params(repo_root / "params.yaml")
    assert params.wcr.alpha == 0.3
    assert params.selfplay.group_size == 5
    assert params.search.top_k == 3


def test_missing_file_means_defaults(tmp_path):
    assert load_params(tmp_path / "absent.yaml") == Params()


def test_misspelled_key_names_the_key_and_the_allowed_ones(tmp_path):
    path = write(tmp_path, "wcr:\n  alpah: 0.5\n")
    with pytest.raises(ConfigError) as error:
        load_params(path)
    message = str(error.value)
    assert "wcr.alpah" in message
    assert "alpha" in message  # the allowed keys are listed


def test_misspelled_section(tmp_path):
    with pytest.raises(ConfigError, match="unknown key 'selfply'"):
        load_params(write(tmp_path, "selfply:\n  iterations: 2\n"))


def test_wrong_type_names_the_key(tmp_path):
    with pytest.raises(ConfigError, match=r"selfplay\.iterations"):
        load_params(write(tmp_path, "selfplay:\n  iterations: many\n"))


def test_out_of_range_value(tmp_path):
    with pytest.raises(ConfigError, match=r"wcr\.alpha"):
        load_params(write(tmp_path, "wcr:\n  alpha: 1.5\n"))


def test_bad_choice_lists_the_allowed_values(tmp_path):
    with pytest.raises(ConfigError) as error:
        load_params(write(tmp_path, "kg:\n  selector: lm\n"))
    assert "kg.selector: expected one of 'llm' or 'random'; got 'lm'" in str(error.value)


def test_an_unregistered_variant_lists_the_registered_ones(tmp_path):
    """The variants are registered above config (self-play, the recipes): the caller passes their names, as the
    CLI does for every verb (tests/test_cli.py), and an unknown one fails before any work with all of them."""
    from searchplay.model_paths import selfplay_variants

    path = write(tmp_path, "selfplay:\n  variant: kgwcr\n")
    with pytest.raises(ConfigError) as error:
        load_params(path, variants=selfplay_variants())
    message = str(error.value)
    assert message.startswith(f"{path}: selfplay.variant: expected one of 'ssp', ") and "got 'kgwcr'" in message
    assert all(repr(name) in message for name in selfplay_variants()) and "'eve'" in message  # the recipe's too
    assert load_params(path).selfplay.variant == "kgwcr"  # without the names: a plain string, checked by its user
    assert load_params(tmp_path / "absent.yaml", variants=selfplay_variants()).selfplay.variant == "kg_wcr"


def test_inconsistent_hops_are_rejected(tmp_path):
    with pytest.raises(ConfigError, match="min_hops"):
        load_params(write(tmp_path, "kg:\n  min_hops: 5\n  max_hops: 3\n"))
    with pytest.raises(ConfigError, match="min_hops"):  # a 1-hop path has no hop to branch a distractor at
        load_params(write(tmp_path, "kg:\n  min_hops: 1\n"))


def test_not_a_mapping(tmp_path):
    with pytest.raises(ConfigError, match="expected a mapping"):
        load_params(write(tmp_path, "- a\n- b\n"))


def test_overrides_win_and_are_validated(tmp_path):
    path = write(tmp_path, "wcr:\n  alpha: 0.3\n")
    assert load_params(path, {"wcr.alpha": 0.5}).wcr.alpha == 0.5
    with pytest.raises(ConfigError):
        load_params(path, {"wcr.alpha": "high"})


def test_an_override_to_null_is_applied_not_dropped(tmp_path):
    """`--set index.embedding_cache=null` turns the cache off (docs/usage.md); it was dropped as if not given."""
    key, value = parse_override("index.embedding_cache=null")
    assert load_params(tmp_path / "absent.yaml", {key: value}).index.embedding_cache is None
    with pytest.raises(ConfigError, match=r"the command line: selfplay\.iterations"):
        load_params(tmp_path / "absent.yaml", {"selfplay.iterations": None})


def test_an_empty_benchmark_list_is_refused_before_a_model_loads(tmp_path):
    """`evaluate --benchmarks ,` loaded the model and wrote an empty metrics.json."""
    with pytest.raises(ConfigError, match=r"the command line: evaluate\.benchmarks"):
        load_params(tmp_path / "absent.yaml", {"evaluate.benchmarks": []})


def test_a_mistake_on_the_command_line_is_not_blamed_on_the_params_file(tmp_path):
    from searchplay.model_paths import selfplay_variants

    path = write(tmp_path, "wcr:\n  alpha: 0.3\n")
    for overrides, said in (({"bogus.x": 1}, "unknown key 'bogus'"), ({"eve.bogus": 1}, "unknown key 'eve.bogus'"),
                            ({"kg.min_hops": 5, "kg.max_hops": 3}, "kg: Value error, min_hops (5)"),
                            ({"selfplay.variant": "nope"}, "selfplay.variant: expected one of")):
        with pytest.raises(ConfigError) as raised:
            load_params(path, overrides, variants=selfplay_variants())
        assert str(raised.value).startswith(f"the command line: {said}"), str(raised.value)
    with pytest.raises(ConfigError, match=f"^{re.escape(str(path))}: unknown key 'bogus'"):
        load_params(write(tmp_path, "bogus: 1\n"), {"kg.num_seeds": 3})


def test_a_params_path_that_is_a_folder_is_named_as_one(tmp_path):
    (tmp_path / "params.yaml").mkdir()
    with pytest.raises(ConfigError, match="is a folder, not a params file"):
        load_params(tmp_path / "params.yaml")


def test_a_date_yaml_cannot_build_is_a_configuration_error(tmp_path, monkeypatch):
    """PyYAML builds 2001-02-30 as a date and fails. (lm-format-enforcer, which vLLM imports, makes every later
    SafeLoader read timestamps as strings, process-wide: the test puts PyYAML's own constructor back.)"""
    import yaml

    monkeypatch.setitem(yaml.SafeLoader.yaml_constructors, "tag:yaml.org,2002:timestamp",
                        yaml.constructor.SafeConstructor.construct_yaml_timestamp)
    with pytest.raises(ConfigError, match="2001-02-30"):
        parse_override("selfplay.iterations=2001-02-30")
    with pytest.raises(ConfigError, match="a value YAML cannot read"):
        load_params(write(tmp_path, "selfplay:\n  iterations: 2001-02-30\n"))


def test_parse_override():
    assert parse_override("selfplay.iterations=3") == ("selfplay.iterations", 3)
    assert parse_override("models.policy=Qwen/Qwen2.5-7B-Instruct") == ("models.policy", "Qwen/Qwen2.5-7B-Instruct")
    with pytest.raises(ConfigError, match="KEY=VALUE"):
        parse_override("selfplay.iterations")


def test_flat_and_digest_are_stable():
    params = Params()
    assert params.flat()["wcr.alpha"] == 0.3
    assert params.digest() == Params().digest()
    assert params.digest() != load_params(Path("/nonexistent"), {"wcr.alpha": 0.4}).digest()


def test_the_digest_leaves_out_knobs_that_change_no_output():
    """Where the idle training state waits changes no value (tests/test_moments.py, tests/rl/test_trainer.py), so a
    checkpoint made with it on resumes with it off and the other way round."""
    neutral = {"selfplay.moments_on_disk": False, "selfplay.reference_on_disk": False,
               "selfplay.recompute_layers": False, "warmstart.moments_on_disk": False}
    assert load_params(Path("/nonexistent"), neutral).digest() == Params().digest()


@pytest.mark.parametrize("name", ["params.yaml", "params.paper.yaml"])
def test_shipped_profiles_are_valid(repo_root, name):
    from searchplay.model_paths import selfplay_variants

    load_params(repo_root / name, variants=selfplay_variants())


def test_server_knobs_are_in_serve_which_no_stage_depends_on(repo_root):
    """serve.* tunes serve-retriever only; under search.* every model stage (dvc.yaml) would go stale."""
    import yaml

    knobs = {"max_queries", "max_query_chars", "max_top_k", "server_timeout_s", "server_workers", "server_queue"}
    assert set(Params().serve.model_dump()) == knobs and not knobs & set(Params().search.model_dump())
    stages = yaml.safe_load((repo_root / "dvc.yaml").read_text())["stages"]
    deps = [key for stage in stages.values() for entry in (stage.get("do", stage).get("params") or [])
            for key in (entry if isinstance(entry, dict) else [entry])]
    assert any(key == "search" for key in deps)
    assert not [key for key in deps if key == "serve" or str(key).startswith("serve.")]


def test_a_pipeline_variant_names_two_keys_a_start_its_weights_a_phase_and_its_code(tmp_path):
    from searchplay.model_paths import selfplay_variants

    entry = {"params": ["wcr.alpha", "wcr.casefold"], "start": "checkpoints/warmstart",
             "weights": "checkpoints/warmstart", "phase": "all", "code": "src/searchplay/recipes/__init__.py"}
    params = load_params(tmp_path / "absent.yaml", {"pipeline.variants": {"kg_wcr": entry}})
    assert params.pipeline.variants["kg_wcr"].start == "checkpoints/warmstart"
    with pytest.raises(ConfigError, match="exactly two params keys"):
        load_params(tmp_path / "absent.yaml", {"pipeline.variants": {"kg_wcr": {**entry, "params": ["eve"]}}})
    with pytest.raises(ConfigError, match="start"):
        load_params(tmp_path / "absent.yaml", {"pipeline.variants": {"kg_wcr": {"params": entry["params"],
                                                                                "phase": "all"}}})
    with pytest.raises(ConfigError, match=r"pipeline\.variants\.kg_wcr\.code: Field required"):
        load_params(tmp_path / "absent.yaml", {"pipeline.variants": {"kg_wcr": {k: v for k, v in entry.items()
                                                                                if k != "code"}}})
    with pytest.raises(ConfigError, match=r"pipeline\.variants: unknown variants \['nope'\]; allowed: \[.*'eve'"):
        load_params(tmp_path / "absent.yaml", {"pipeline.variants": {"nope": entry}}, variants=selfplay_variants())


def test_a_variants_own_stages_and_its_warm_starts_reference_go_with_it(tmp_path):
    """pipeline.recipe_stages and pipeline.references name stage groups of dvc.yaml; an entry whose variant is
    gone would make a stage whose input no stage makes, so the params say so before DVC does."""
    every = load_params("params.yaml").pipeline
    assert every.recipe_stages == ["eve"] and "warmstart_eve" in every.references
    variants = {name: v.model_dump() for name, v in every.variants.items() if name != "eve"}
    with pytest.raises(ConfigError, match=r"recipe_stages \['eve'\] are not in pipeline.variants"):
        load_params(tmp_path / "absent.yaml", {"pipeline.variants": variants, "pipeline.recipe_stages": ["eve"]})
    with pytest.raises(ConfigError, match=r"references.warmstart_eve reads checkpoints/warmstart_eve"):
        load_params(tmp_path / "absent.yaml", {"pipeline.variants": variants, "pipeline.recipe_stages": [],
                                               "pipeline.references": every.references})
    all_four = {name: v.model_dump() for name, v in every.variants.items()}
    with pytest.raises(ConfigError, match=r"variants \['eve'\] start from their own Phase A"):
        load_params(tmp_path / "absent.yaml", {"pipeline.recipe_stages": [], "pipeline.variants": all_four})


def test_delete_dotted_removes_a_key_and_names_one_that_is_not_there():
    from searchplay.config import delete_dotted

    tree = {"pipeline": {"variants": {"ssp": {}, "kg_wcr": {}}}}
    delete_dotted(tree, "pipeline.variants.ssp")
    assert tree == {"pipeline": {"variants": {"kg_wcr": {}}}}
    with pytest.raises(ConfigError, match=r"cannot remove pipeline\.variants\.ssp: params have no such key"):
        delete_dotted(tree, "pipeline.variants.ssp")
    delete_dotted(tree, "pipeline.variants.ssp", missing_ok=True)
    assert tree == {"pipeline": {"variants": {"kg_wcr": {}}}}


def test_a_params_file_is_layered_over_params_yaml_key_by_key(tmp_path):
    from searchplay.config import load_params

    (tmp_path / "params.yaml").write_text("kg:\n  selector: random\n  num_seeds: 500\nselfplay:\n  lr: 2.0e-5\n")
    (tmp_path / "quick.yaml").write_text("kg:\n  num_seeds: 40\n")
    layered = load_params(tmp_path / "quick.yaml", base=tmp_path / "params.yaml")
    assert (layered.kg.num_seeds, layered.kg.selector, layered.selfplay.lr) == (40, "random", 2.0e-5)
    alone = load_params(tmp_path / "quick.yaml")  # library use without a base: the file over the defaults
    assert alone.kg.selector != "random"


def test_the_quick_profile_given_to_params_says_how_it_is_applied(repo_root):
    from typer.testing import CliRunner

    from searchplay.cli import app

    result = CliRunner().invoke(app, ["--params", str(repo_root / "params.quick.yaml"), "search", "Paris"])
    output = " ".join(result.output.split())  # rich wraps long lines
    assert result.exit_code == 2 and "`searchplay pipeline --quick`" in output and "params.paper.yaml" in output
    assert "pipeline.recipe_stages" not in output  # one cause, not the errors of the half-applied profile


@pytest.mark.parametrize(("content", "message"), [(b"", "the file is empty"),
                                                  (bytes(range(256)), "not a text file"),
                                                  (b"kg:\n  num_seeds: [1\n", "not valid YAML at line 3")])
def test_an_empty_binary_or_malformed_params_file_is_one_line_and_exit_2(tmp_path, content, message):
    from typer.testing import CliRunner

    from searchplay.cli import app

    bad = tmp_path / "bad.yaml"
    bad.write_bytes(content)
    result = CliRunner().invoke(app, ["--params", str(bad), "search", "Paris"])
    assert result.exit_code == 2 and message in result.output and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1


@pytest.mark.parametrize("override", [{"kg.num_seeds": True}, {"selfplay.lr": False}, {"judge.deadline_s": True}])
def test_a_bool_where_a_number_belongs_is_refused(override):
    from searchplay.config import ConfigError, load_params

    with pytest.raises(ConfigError, match="expected a number"):
        load_params("absent.yaml", override)
    assert load_params("absent.yaml", {"selfplay.rag_verification": True}).selfplay.rag_verification is True


def test_no_param_is_named_as_dvc_leaves_it_out_of_a_run_cache_key(repo_root):
    """DVC hashes a stage's params for its run cache without any key named like an output's metadata (``size``,
    ``nfiles``, at any depth), so a stage whose only change is such a param would get the old outputs back."""
    from dvc_data.hashfile.meta import Meta

    from searchplay.config import _flatten
    from searchplay.recipes import load_params as load_with_recipes

    ignored = {Meta.PARAM_SIZE, Meta.PARAM_NFILES}
    for path in ("params.yaml", "params.paper.yaml"):
        keys = [key for key, _ in _flatten(load_with_recipes(repo_root / path).model_dump())]
        assert len(keys) > 100
        assert [key for key in keys if ignored & set(key.split("."))] == [], path  # a section's name counts too
