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
    code, output = run("--set", "selfplay.lr=abc", "assets", "--check")  # a value given here, not in a file
    assert code == 2 and "the command line: selfplay.lr:" in output and "params.yaml" not in output


# --- errors a retry cannot fix exit 2 with one line, a traceback only with --debug ---


def report_args(tmp_path, out) -> list[str]:
    """``searchplay report`` over one evaluated model, writing to ``out`` (without MLflow: the errors under test
    are the report's own writes, and a patched ``fsync`` or ``mkstemp`` would break MLflow's store first)."""
    evaluated = tmp_path / "eval" / "base"
    evaluated.mkdir(parents=True)
    (evaluated / "metrics.json").write_text('{"nq.judge_acc": 10.0, "nq.em": 10.0, "nq.n": 5}')
    return ["report", "--eval-dir", str(tmp_path / "eval"), "--out", str(out), "--selfplay-dir", str(tmp_path / "no"),
            "--no-track"]


def one_line_error(args: list[str], kind: str, *words: str) -> None:
    result = CliRunner().invoke(app, args)
    lines = result.output.strip().splitlines()
    assert result.exit_code == 2 and "Traceback" not in result.output, result.output
    assert len(lines) == 1 and lines[0].startswith(f"{kind}:"), lines
    for word in words:
        assert word in lines[0], f"{word!r} not in {lines[0]!r}"


def test_a_read_only_output_folder_exits_2_and_debug_shows_the_traceback(tmp_path, monkeypatch):
    import errno
    import os
    import tempfile

    out = tmp_path / "read-only"
    out.mkdir()
    out.chmod(0o500)
    if os.geteuid() == 0:  # root writes into it anyway: the writer raises what any other user gets
        def denied(*args, dir=None, **kwargs):
            raise PermissionError(errno.EACCES, "Permission denied", str(dir))
        monkeypatch.setattr(tempfile, "mkstemp", denied)
    args = report_args(tmp_path, out)
    one_line_error(args, "file system error", str(out), "permission denied", "writable", "--debug")
    debug = CliRunner().invoke(app, ["--debug", *args])
    assert debug.exit_code == 1 and isinstance(debug.exception, PermissionError)
    out.chmod(0o700)


def test_a_full_disk_exits_2_with_one_line(tmp_path, monkeypatch):
    import errno
    import os

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    one_line_error(report_args(tmp_path, tmp_path / "out"), "file system error", "no space left", "free disk space")


def test_an_output_path_that_is_a_file_exits_2_with_one_line(tmp_path):
    taken = tmp_path / "taken"
    taken.write_text("not a folder")
    one_line_error(report_args(tmp_path, taken), "file system error", str(taken), "is a file", "move it away")
    one_line_error(["report", "--eval-dir", str(tmp_path / "eval"), "--out", str(taken / "compare"), "--no-track"],
                   "file system error", "is a file, not a folder")


def test_a_set_into_a_value_exits_2_with_one_line(tmp_path, monkeypatch):
    from searchplay import assets

    monkeypatch.setattr(assets, "status", lambda: [("minilm", "ok", "somewhere")])
    params = tmp_path / "params.yaml"
    params.write_text("selfplay:\n  iterations: 2\n")
    one_line_error(["--params", str(params), "--set", "selfplay.iterations.max=3", "assets", "--check"],
                   "configuration error", "selfplay.iterations is the value 2", "shorten the key")
    one_line_error(["--set", "selfplay=1", "--set", "selfplay.iterations=3", "assets", "--check"],
                   "configuration error", "drop a --set selfplay=...")


def test_selfplay_phase_is_all_a_or_b_and_b_needs_the_phase_a_set(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["selfplay", "--variant", "eve", "--phase", "c"])
    assert result.exit_code == 2 and "--phase 'c'" in result.output
    result = CliRunner().invoke(app, ["--set", "warmstart.enabled=false", "selfplay", "--variant", "eve", "--phase",
                                      "b"])
    assert result.exit_code == 1 and "--variant eve --phase a" in " ".join(result.output.split())


def test_an_unregistered_variant_stops_every_verb_before_it_starts(tmp_path, monkeypatch):
    """``selfplay.variant`` is a string in config; the CLI checks it (and ``pipeline.variants``) against the
    registered variants, the recipes' included, when it loads the params, so no stage runs on a typo."""
    monkeypatch.chdir(tmp_path)
    listed = ("configuration error", "selfplay.variant: expected one of 'ssp', ", "'eve'", "got 'kgwcr'")
    for verb in (["selfplay"], ["evaluate"], ["kg", "extract"]):
        one_line_error(["--set", "selfplay.variant=kgwcr", *verb], *listed)
    one_line_error(["selfplay", "--variant", "kgwcr"], *listed)
    entry = ("{params: [wcr, wcr], start: checkpoints/warmstart, weights: checkpoints/warmstart, phase: all, "
             "code: src/searchplay/recipes/__init__.py}")
    one_line_error(["--set", f"pipeline.variants={{nope: {entry}}}", "kg", "extract"], "configuration error",
                   "pipeline.variants: unknown variants ['nope']")


def test_the_pipeline_outside_a_git_checkout_is_one_line_and_exit_2(tmp_path, monkeypatch):
    """A retry finds the same folder: exit 2, which the flows do not retry (it exited 1)."""
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["pipeline"])
    said = " ".join(result.output.split())
    assert result.exit_code == 2 and f"pipeline: {tmp_path} is not a git checkout" in said
    assert "Traceback" not in result.output


def test_the_pipeline_ends_with_the_report_s_glance(tmp_path, monkeypatch):
    """After its stage times the pipeline prints the "At a glance" table of the report it made (or found up to
    date), so a first look ends with its result; a run of other stages only does not print an older report's."""
    from searchplay import pipeline
    from searchplay.eval.glance import Counted, PairTests
    from searchplay.eval.report import glance_table, to_markdown

    monkeypatch.chdir(tmp_path)
    pair = PairTests("warmstart", "base", 3, {"correct": Counted(0, 0, 1.0), "searches": Counted(3, 0, 0.25),
                                             "found": Counted(0, 0, 1.0), "coverage": Counted(3, 0, 0.25)})
    (tmp_path / "reports/compare").mkdir(parents=True)
    (tmp_path / "reports/compare/compare.md").write_text(to_markdown([glance_table([pair], "kg_heldout", 4)], "x", []))
    ran: dict[str, float] = {}
    monkeypatch.setattr(pipeline, "run", lambda *args, **kwargs: ran)

    def output(*targets: str) -> str:
        result = CliRunner().invoke(app, ["pipeline", *targets])
        assert result.exit_code == 0, result.output
        return " ".join(result.output.split())

    assert ("At a glance: paired tests on KG held-out (counts: A / B, with the exact test's p) warmstart vs base, "
            "3 questions: no difference shown by any of the 4 tests correct: only A / only B 0 / 0 (p = 1); "
            "searches: A more / A fewer 3 / 0 (p = 0.25);") in output()
    assert output().index("At a glance") < output().index("done.")
    assert "At a glance" not in output("kg")  # the report did not run: its table may be older than these stages
    ran["report"] = 5.0
    assert "At a glance" in output("report")


def test_an_error_outside_a_project_folder_says_the_defaults_paths_were_used(tmp_path, monkeypatch):
    """Without ./params.yaml (a shell in another folder) an error naming a default path says why that path."""
    monkeypatch.chdir(tmp_path)
    taken = tmp_path / "taken"
    taken.write_text("not a folder")
    args = report_args(tmp_path, taken)
    one_line_error(args, "file system error", f"no params.yaml in {tmp_path}", "the project's folder, or give --params")
    (tmp_path / "params.yaml").write_text("selfplay:\n  iterations: 2\n")
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2 and "no params.yaml" not in result.output
    given = CliRunner().invoke(app, ["--params", str(tmp_path / "params.yaml"), *args])
    (tmp_path / "params.yaml").unlink()
    assert given.exit_code == 2 and "no params.yaml" not in given.output
