"""`searchplay evaluate`: the params a run logs are the ones it used; registering is asked for, never implied."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from searchplay.cli import app


@pytest.fixture()
def captured(monkeypatch):
    """Replace the stage with a recorder that stops the command right after the params are resolved."""
    import searchplay.eval.evaluate as stage

    calls = []

    def fake_evaluate(params, variant, track=True, register=False, allow_base=False, replace=False):
        calls.append({"variant": variant, "selfplay.variant": params.selfplay.variant, "register": register,
                      "allow_base": allow_base})
        raise stage.ModelNotFoundError("stopped by the test")

    monkeypatch.setattr(stage, "evaluate", fake_evaluate)
    return calls


@pytest.mark.parametrize(("flags", "logged_variant"), [(["--variant", "ssp"], "ssp"),
                                                      (["--variant", "kg_wcr"], "kg_wcr"),
                                                      (["--variant", "base"], "kg_wcr")])
def test_a_variants_evaluation_carries_that_variants_params(captured, flags, logged_variant):
    result = CliRunner().invoke(app, ["evaluate", *flags])
    assert result.exit_code == 2 and "stopped by the test" in result.output  # a missing model: not retried
    assert captured == [{"variant": flags[1], "selfplay.variant": logged_variant, "register": False,
                         "allow_base": False}]


def test_register_only_when_asked(captured):
    CliRunner().invoke(app, ["evaluate", "--variant", "ssp", "--register"])
    assert captured[-1]["register"] is True


def test_the_base_model_stands_in_for_a_missing_checkpoint_only_when_asked(captured):
    CliRunner().invoke(app, ["evaluate", "--variant", "gdcr", "--allow-base"])
    assert captured[-1]["allow_base"] is True


@pytest.mark.parametrize("name", ["../../../evil", "kg-wcr", "warmstart/../x"])
def test_a_variant_name_that_is_not_registered_is_one_line_and_exit_2(captured, name):
    result = CliRunner().invoke(app, ["evaluate", "--variant", name])
    assert result.exit_code == 2 and captured == []
    assert "unknown variant" in result.output and "Traceback" not in result.output


def test_an_output_place_that_is_a_file_is_named_before_the_model_loads(captured, tmp_path):
    (tmp_path / "taken").write_text("a file\n")
    (tmp_path / "root").mkdir()
    (tmp_path / "root" / "ssp").write_text("a file\n")
    for out, named in ((tmp_path / "taken", tmp_path / "taken"), (tmp_path / "root", tmp_path / "root" / "ssp")):
        result = CliRunner().invoke(app, ["evaluate", "--out", str(out), "--variant", "ssp"])
        said = " ".join(result.output.split())
        assert result.exit_code == 2 and f"output error: {named} is a file where a folder is needed" in said
    assert captured == []  # stopped before the stage: no model loaded, nothing written


def test_a_judge_outage_exits_non_zero_in_one_line(monkeypatch):
    import searchplay.eval.evaluate as stage
    from searchplay.llm.judge import JudgeOutageError

    def down(params, variant, **kwargs):
        raise JudgeOutageError("4 of 4 answers could not be judged by m at http://***@host/v1")

    monkeypatch.setattr(stage, "evaluate", down)
    result = CliRunner().invoke(app, ["evaluate", "--variant", "ssp"])
    assert result.exit_code == 1 and "judge outage" in result.output and "Traceback" not in result.output


def test_an_evaluation_that_would_replace_a_larger_one_is_one_line_and_exit_2(tmp_path, monkeypatch):
    import json

    monkeypatch.delenv("DVC_ROOT", raising=False)
    out = tmp_path / "base"
    out.mkdir()
    (out / "sample.json").write_text(json.dumps({"ids": {"nq": ["1", "2", "3"], "bamboogle": ["4", "5", "6"]}}))
    result = CliRunner().invoke(app, ["evaluate", "--variant", "base", "--benchmarks", "nq", "--out", str(tmp_path)])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "evaluation kept:" in result.output and "bamboogle (3 questions; not in this run)" in result.output
    assert json.loads((out / "sample.json").read_text())["ids"]["bamboogle"] == ["4", "5", "6"]
