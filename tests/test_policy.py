"""Model resolution below the stages: the newest complete self-play checkpoint, or None."""

from __future__ import annotations

from searchplay.policy import complete_checkpoints, latest_model_dir


def make_checkpoint(root, iteration: int, state: bool = True, model: bool = True, suffix: str = ""):
    folder = root / "kg_wcr" / f"iter_{iteration:06d}{suffix}"
    (folder / "model").mkdir(parents=True)
    if model:
        (folder / "model" / "config.json").write_text("{}")
    if state:
        (folder / "state.json").write_text("{}")
    return folder


def test_latest_model_dir_is_the_newest_complete_checkpoint(tmp_path):
    assert latest_model_dir(tmp_path, "kg_wcr") is None
    make_checkpoint(tmp_path, 1)
    newest = make_checkpoint(tmp_path, 2)
    make_checkpoint(tmp_path, 3, state=False)  # killed before its state file: not complete
    make_checkpoint(tmp_path, 4, suffix=".partial")
    assert [n for n, _ in complete_checkpoints(tmp_path / "kg_wcr")] == [1, 2]
    assert latest_model_dir(tmp_path, "kg_wcr") == newest / "model"


def test_a_checkpoint_without_a_loadable_model_gives_none(tmp_path):
    make_checkpoint(tmp_path, 1, model=False)
    assert latest_model_dir(tmp_path, "kg_wcr") is None


def test_initial_policy_is_the_variants_warm_start(tmp_path):
    import pytest

    from searchplay.config import load_params
    from searchplay.policy import PolicyError, initial_policy

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

    from searchplay import policy

    assert policy.warmstart_models() == ("warmstart", "warmstart_eve")  # the shared one, then EVE's (its recipe)
    assert policy.warmstart_of_model("warmstart_eve") == "eve" and policy.warmstart_of_model("kg_wcr") is None
    assert {"ssp", "kg_wcr", "eve"} <= set(policy.selfplay_variants())
    monkeypatch.setattr(policy, "WARMSTARTS", dict(policy.WARMSTARTS))
    monkeypatch.setattr(policy, "SELFPLAY_VARIANTS", list(policy.SELFPLAY_VARIANTS))
    policy.register_warmstart("toy", "out_dir", "searchplay warmstart", model="warmstart_toy")
    policy.register_warmstart("toy", "out_dir", "searchplay warmstart", model="warmstart_toy")  # again: a no-op
    with pytest.raises(ValueError, match="already registered"):
        policy.register_warmstart("toy", "out_dir", "searchplay warmstart", model="other")
    policy.register_selfplay_variant("toy")
    policy.register_selfplay_variant("toy")
    assert policy.warmstart_models()[-1] == "warmstart_toy" and policy.selfplay_variants().count("toy") == 1
