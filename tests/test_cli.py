import subprocess
import sys

from typer.testing import CliRunner

from searchplay.cli import app

STAGE_VERBS = ["assets", "kg", "corpus", "index", "search", "serve-retriever", "selfplay", "evaluate", "report"]


def test_help_lists_every_stage_verb():
    result = CliRunner().invoke(app, ["--help"])
    assert result.exit_code == 0
    for verb in STAGE_VERBS:
        assert verb in result.output, f"`searchplay --help` does not list {verb!r}"


def test_console_script_is_installed():
    result = subprocess.run([sys.executable, "-m", "searchplay", "--help"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_bad_params_file_is_a_clear_error(tmp_path):
    bad = tmp_path / "params.yaml"
    bad.write_text("selfplay:\n  wcr_alpa: 0.5\n")
    result = CliRunner().invoke(app, ["--params", str(bad), "selfplay", "--help"])
    assert result.exit_code == 0  # --help never needs params
    result = CliRunner().invoke(app, ["--params", str(bad), "evaluate", "--help"])
    assert result.exit_code == 0


def test_assets_check_fails_when_assets_are_missing(tmp_path, monkeypatch):
    monkeypatch.setenv("SEARCHPLAY_HOME", str(tmp_path))
    result = CliRunner().invoke(app, ["assets", "--check"])
    assert result.exit_code == 1


def test_assets_check_lists_the_benchmark_files(tmp_path, monkeypatch, repo_root):
    from searchplay import assets

    monkeypatch.setattr(assets, "status", lambda: [("minilm", "ok", "somewhere")])
    monkeypatch.chdir(repo_root)
    result = CliRunner().invoke(app, ["assets", "--check"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "benchmark bamboogle" in result.output and "data/benchmarks/bamboogle/test.jsonl" in result.output
    missing = CliRunner().invoke(app, ["--set", f"evaluate.data_dir={tmp_path}", "assets", "--check"],
                                 env={"COLUMNS": "200"})
    assert missing.exit_code == 1 and "benchmark files are missing" in missing.output


def test_exit_codes_tell_prefect_what_not_to_retry():
    from searchplay.cliutil import EXIT_DATA_QUALITY, exit_code_for
    from searchplay.quality import DataQualityError

    assert exit_code_for(DataQualityError("expect_column_values_to_be_unique failed")) == EXIT_DATA_QUALITY
    assert exit_code_for(ValueError("anything else")) == 1


def test_prefect_retry_condition_skips_deterministic_failures():
    import subprocess
    from types import SimpleNamespace

    from tasks.stages import retry_unless_deterministic

    def state(code):
        return SimpleNamespace(data=subprocess.CalledProcessError(code, ["dvc", "repro"]))

    assert retry_unless_deterministic(None, None, state(1)) is True
    assert retry_unless_deterministic(None, None, state(2)) is False
    assert retry_unless_deterministic(None, None, state(3)) is False


def test_a_missing_params_file_or_a_bad_set_exits_2_with_the_cause(tmp_path):
    def run(*args: str) -> tuple[int, str]:
        result = CliRunner().invoke(app, list(args))
        return result.exit_code, " ".join(result.output.split())  # rich wraps long lines

    code, output = run("--params", str(tmp_path / "nope.yaml"), "assets", "--check")
    assert code == 2 and "nope.yaml: no such file" in output
    code, output = run("--set", "selfplay.iterations", "assets", "--check")
    assert code == 2 and "KEY=VALUE" in output
    code, output = run("--set", "selfplay.iterations=[1", "assets", "--check")
    assert code == 2 and "--set" in output
