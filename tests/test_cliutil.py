"""`searchplay.cliutil.exit_code_for`: an input a retry reads the same way exits 2, a failed gate 3, the rest 1
(which the Prefect tasks retry)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from searchplay.cli import app
from searchplay.cliutil import exit_code_for
from searchplay.eval.benchmarks import BenchmarkError, HubUnreachableError, TruncatedBenchmarkError
from searchplay.kg.readers import DumpError
from searchplay.kg.store import StoreWriteError
from searchplay.retrieval.corpus import CorpusError
from searchplay.selfplay.checkpoint import CheckpointError
from searchplay.selfplay.loop import SelfplayError
from searchplay.selfplay.seeds import SeedError
from searchplay.warmstart.stage import WarmstartError


@pytest.mark.parametrize(("error", "code"), [
    (DumpError("dump missing.json is not a readable file"), 2), (CorpusError("bad corpus"), 2),
    (BenchmarkError("no file found"), 2), (TruncatedBenchmarkError("cut"), 2), (SeedError("cut pool"), 2),
    (WarmstartError("cut pool"), 2), (SelfplayError("checkpoints of another variant"), 2),
    (CheckpointError("unreadable state"), 2),
    (HubUnreachableError("the hub timed out"), 1), (StoreWriteError("I/O error"), 1), (RuntimeError("?"), 1)])
def test_an_input_a_retry_reads_the_same_way_exits_2_and_other_failures_1(error, code):
    assert exit_code_for(error) == code
    assert isinstance(error, ValueError | RuntimeError)  # the usual bases stay, for callers that catch them


def test_a_read_that_may_pass_is_retried_and_a_missing_or_bad_dump_is_not(tmp_path):
    import errno
    import gzip

    from searchplay.kg.readers import DumpReader

    reader = DumpReader(tmp_path / "dump.json.gz")
    assert exit_code_for(reader._unreadable(OSError(errno.EIO, "Input/output error"))) == 1
    assert exit_code_for(reader._unreadable(gzip.BadGzipFile("Not a gzipped file"))) == 2
    assert exit_code_for(reader._unreadable(FileNotFoundError(errno.ENOENT, "No such file"))) == 2


def test_a_warmstart_on_a_cut_kg_pool_is_one_line_and_exit_2(tmp_path):
    kg = tmp_path / "kg"
    kg.mkdir()
    (kg / "subgraphs.jsonl").write_text('{"seed": "Q2", "split": \n')  # cut mid-record
    result = CliRunner().invoke(app, ["--set", f"kg.out_dir={kg}", "--set", f"warmstart.out_dir={tmp_path / 'ws'}",
                                      "warmstart", "--no-track"])
    assert result.exit_code == 2 and "Traceback" not in result.output, result.output
    assert len(result.output.strip().splitlines()) == 1, result.output
    assert "warm-start error:" in result.output and "subgraphs.jsonl:1: not valid JSON" in result.output
