"""Model resolution below the stages: a variant's final model, its complete self-play checkpoints."""

from __future__ import annotations

from searchplay.model_paths import complete_checkpoints, final_model_dir, resume_dir


def make_checkpoint(root, iteration: int, state: bool = True, suffix: str = ""):
    folder = resume_dir(root, "kg_wcr") / f"iter_{iteration:06d}{suffix}"
    (folder / "trainer").mkdir(parents=True)
    if state:
        (folder / "state.json").write_text("{}")
    return folder


def test_complete_checkpoints_are_the_renamed_ones_with_a_state_file(tmp_path):
    assert complete_checkpoints(resume_dir(tmp_path, "kg_wcr")) == []
    make_checkpoint(tmp_path, 1)
    make_checkpoint(tmp_path, 2)
    make_checkpoint(tmp_path, 3, state=False)  # killed before its state file: not complete
    make_checkpoint(tmp_path, 4, suffix=".partial")
    assert [n for n, _ in complete_checkpoints(resume_dir(tmp_path, "kg_wcr"))] == [1, 2]


def test_the_final_model_is_the_runs_export_never_a_checkpoint(tmp_path):
    make_checkpoint(tmp_path, 1)
    assert final_model_dir(tmp_path, "kg_wcr") is None  # checkpoints alone: nothing to evaluate yet
    (tmp_path / "kg_wcr" / "model").mkdir()
    assert final_model_dir(tmp_path, "kg_wcr") is None  # not loadable: no config.json
    (tmp_path / "kg_wcr" / "model" / "config.json").write_text("{}")
    assert final_model_dir(tmp_path, "kg_wcr") == tmp_path / "kg_wcr" / "model"


def test_initial_policy_is_the_variants_warm_start(tmp_path):
    import pytest

    from searchplay.config import load_params
    from searchplay.model_paths import PolicyError, initial_policy

    params = load_params(tmp_path / "absent.yaml", {"warmstart.out_dir": str(tmp_path / "ws"),
                                                   "eve.warmstart_out_dir": str(tmp_path / "ws_eve")})
    for folder in ("ws", "ws_eve"):
        (tmp_path / folder / "model").mkdir(parents=True)
        (tmp_path / folder / "model" / "config.json").write_text("{}")
    assert initial_policy(params) == str(tmp_path / "ws" / "model")
    assert initial_policy(params, "eve") == str(tmp_path / "ws_eve" / "model")
    (tmp_path / "ws_eve" / "model" / "config.json").unlink()
    with pytest.raises(PolicyError, match="searchplay warmstart --eve"):
        initial_policy(params, "eve")
    with pytest.raises(PolicyError, match="unknown warm-start"):
        initial_policy(params, "other")
    params.warmstart.enabled = False
    assert initial_policy(params, "eve") == params.models.policy


def test_the_model_names_below_eval_come_from_the_registrations(monkeypatch):
    """The warm-starts' model names and the self-play variants' names, as their stages and recipes register them."""
    import pytest

    from searchplay import model_paths

    assert model_paths.warmstart_models() == ("warmstart", "warmstart_eve")  # the shared one, then EVE's (its recipe)
    assert model_paths.warmstart_of_model("warmstart_eve") == "eve" and model_paths.warmstart_of_model("kg_wcr") is None
    assert {"ssp", "kg_wcr", "eve"} <= set(model_paths.selfplay_variants())
    monkeypatch.setattr(model_paths, "WARMSTARTS", dict(model_paths.WARMSTARTS))
    monkeypatch.setattr(model_paths, "SELFPLAY_VARIANTS", list(model_paths.SELFPLAY_VARIANTS))
    model_paths.register_warmstart("toy", "out_dir", "searchplay warmstart", model="warmstart_toy")
    model_paths.register_warmstart("toy", "out_dir", "searchplay warmstart", model="warmstart_toy")  # again: a no-op
    with pytest.raises(ValueError, match="already registered"):
        model_paths.register_warmstart("toy", "out_dir", "searchplay warmstart", model="other")
    model_paths.register_selfplay_variant("toy")
    model_paths.register_selfplay_variant("toy")
    assert model_paths.warmstart_models()[-1] == "warmstart_toy" and model_paths.selfplay_variants().count("toy") == 1


def test_the_shipped_params_list_the_folders_their_stages_load(tmp_path):
    """selfplay@eve loads checkpoints/warmstart_eve/model beside its hand-off set: the variant's ``weights`` is
    that stage's dep, and a warm-start reference's input is its evaluation's, so each must be the folder the code
    loads, or DVC would not re-run the stage when that model changes. A run outside DVC may move the folders."""
    from searchplay.config import load_params
    from searchplay.model_paths import selfplay_variants, start_model_mismatches

    for name in ("params.yaml", "params.paper.yaml"):
        assert start_model_mismatches(load_params(name, variants=selfplay_variants())) == [], name
    params = load_params("params.yaml", variants=selfplay_variants())
    assert params.pipeline.variants["eve"].weights == "checkpoints/warmstart_eve"
    params.pipeline.variants["eve"].weights = "checkpoints/warmstart"
    params.pipeline.references["warmstart"] = "checkpoints/other"
    assert start_model_mismatches(params) == [
        "pipeline.variants.eve.weights: eve's self-play loads checkpoints/warmstart_eve/model; got "
        "'checkpoints/warmstart', so DVC would not re-run it when that model changes",
        "pipeline.references.warmstart: its evaluation loads checkpoints/warmstart/model; got 'checkpoints/other', "
        "so DVC would not re-run it when that model changes"]
    moved = load_params("params.yaml", {"warmstart.out_dir": str(tmp_path / "ws")}, variants=selfplay_variants())
    assert len(start_model_mismatches(moved)) == 4  # ssp, kg_wcr, gdcr and the warm-start's evaluation: loads anyway
