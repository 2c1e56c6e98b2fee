"""Every metric key the README tells users to chart is one the stages really log.

The committed reports are what the stages log to MLflow (the same dicts): warm-start ``train/<x>`` per
step is ``reports/warmstart/history.csv``'s column x and its other keys are ``metrics.json``'s;
self-play keys are ``history.csv`` columns of every variant; evaluation keys are ``metrics.json``
keys with ``<bench>`` standing for each benchmark.
"""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
REPORTS = ROOT / "reports"


USAGE = ROOT / "docs" / "usage.md"  # the MLflow key table lives in the usage page the README links to


def readme_metric_keys() -> list[tuple[str, str]]:
    """(experiment, key) for every backticked key in the documented MLflow table (docs/usage.md)."""
    text = USAGE.read_text(encoding="utf-8")
    section = text.split("## Compare variants in MLflow", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or cells[0] not in {"warmstart", "selfplay", "evaluate"}:
            continue
        for key in re.findall(r"`([^`]+)`", cells[1]):
            if key.startswith("*"):  # "(and `*_base`)": the suffix of the keys before it
                rows += [(cells[0], k + key[1:]) for _, k in list(rows) if _ == cells[0] and "/" not in k]
            else:
                rows.append((cells[0], key))
    return rows


def header(path: Path) -> set[str]:
    with path.open(encoding="utf-8") as handle:
        return set(next(csv.reader(handle)))


def joint_step(run: str) -> bool:
    from searchplay.selfplay.variants import get_variant

    return get_variant(run.removesuffix("_phase_a")).step == "joint"


EVE_KEYS = ("eve/phase", "evidence/verbatim_rate", "evidence/verbatim_rate_relaxed", "evidence/answer_leak_rate",
            "evidence/tokens_mean", "verifier/v_mean", "verifier/v_nonzero", "verifier/p_with_evidence",
            "verifier/p_without_evidence", "proposer/format_score_mean", "proposer/difficulty_mean",
            "solver/evidence_presence_rate", "solver/evidence_f1_mean", "handoff/set_size")


@pytest.mark.skipif(not (REPORTS / "selfplay" / "eve" / "history.csv").is_file(), reason="no committed eve run")
def test_the_eve_keys_the_readme_names_are_in_its_two_histories():
    text = USAGE.read_text() + (ROOT / "README.md").read_text()
    logged = header(REPORTS / "selfplay" / "eve_phase_a" / "history.csv") | header(
        REPORTS / "selfplay" / "eve" / "history.csv")
    for key in EVE_KEYS:
        assert key.rsplit("/", 1)[-1] in text, key
        assert key in logged, key


def timing_keys(folder: Path) -> set[str]:
    """The durations and rates a stage logs to MLflow and keeps in timings.json (searchplay.timings)."""
    path = folder / "timings.json"
    return {k for k, v in json.loads(path.read_text()).items() if not isinstance(v, list)} if path.is_file() else set()


def logged_keys(experiment: str) -> list[tuple[set[str], list[str]]]:
    """(keys, benchmarks) for every run of one experiment that the README's key must be in."""
    if experiment == "warmstart":
        train = {f"train/{k}" for k in header(REPORTS / "warmstart" / "history.csv")}
        return [(train | set(json.loads((REPORTS / "warmstart" / "metrics.json").read_text()))
                 | timing_keys(REPORTS / "warmstart"), [])]
    if experiment == "selfplay":  # the table's keys are SSP Alg. 1's step; EVE's two phases log their own (below)
        return [(header(path) | timing_keys(path.parent), [])
                for path in sorted((REPORTS / "selfplay").glob("*/history.csv")) if joint_step(path.parent.name)]
    return [(set(json.loads(path.read_text())), json.loads((path.parent / "run.json").read_text())["benchmarks"])
            for path in sorted((REPORTS / "eval").glob("*/metrics.json"))]


def test_the_readme_table_is_parsed():
    keys = readme_metric_keys()
    assert ("selfplay", "solver/reward_mean") in keys and ("evaluate", "<bench>.judge_acc") in keys
    assert ("warmstart", "proposer_valid_rate_base") in keys


@pytest.mark.skipif(not (REPORTS / "warmstart" / "metrics.json").is_file(), reason="no committed reports")
@pytest.mark.parametrize(("experiment", "key"), readme_metric_keys())
def test_every_key_the_readme_names_is_logged(experiment, key):
    runs = logged_keys(experiment)
    assert runs, f"no {experiment} reports under {REPORTS}"
    for keys, benchmarks in runs:
        wanted = {key.replace("<bench>", b) for b in benchmarks} if "<bench>" in key else {key}
        missing = wanted - keys
        assert not missing, f"README names {key!r} ({experiment}) but a run does not log {sorted(missing)[:3]}"


COMPARE = REPORTS / "compare" / "metrics.json"


def run_summary() -> str:
    """The README's paragraph on what the committed run shows, on one line."""
    text = " ".join((ROOT / "README.md").read_text().split())
    return text[text.index("What the committed run shows"):]


@pytest.mark.skipif(not COMPARE.is_file(), reason="no committed comparison report")
def test_the_counts_the_readme_states_are_the_committed_runs():
    from searchplay.eval.curves import read_histories
    from searchplay.eval.paired import STARTED_FROM
    from searchplay.eval.report import _mean_finite

    metrics = json.loads(COMPARE.read_text())
    text, summary = " ".join((ROOT / "README.md").read_text().split()), run_summary()
    held_out = re.search(r"`kg_heldout` \((\d+) held-out KG questions", text)
    assert held_out and int(held_out[1]) == metrics["warmstart.kg_heldout.n"]
    gain = re.search(r"\((\d+) questions turned right, (\d+) wrong", summary)
    assert gain and (int(gain[1]), int(gain[2])) == (metrics["paired.warmstart_vs_base.kg_heldout.only_a"],
                                                     metrics["paired.warmstart_vs_base.kg_heldout.only_b"])
    stated = re.findall(r"`(\w+)` (\d+)/(\d+)", summary[:summary.index("Proposers wrote")])
    assert len(stated) >= 3
    for model, right, wrong in stated:
        key = f"paired.{model}_vs_{STARTED_FROM[model]}.kg_heldout"
        assert (int(right), int(wrong)) == (metrics[f"{key}.only_a"], metrics[f"{key}.only_b"]), model
    searched = re.findall(r"(\w+) (?:searched )?more on (\d+)(?: held-out questions?)? and less on (\d+)", summary)
    assert [model for model, _, _ in searched] == ["kg_wcr", "gdcr", "ssp"]
    for model, more, fewer in searched:
        key = f"behaviour.{model}_vs_{STARTED_FROM[model]}.kg_heldout"
        assert (int(more), int(fewer)) == (metrics[f"{key}.more_searches"], metrics[f"{key}.fewer_searches"]), model
    covered = [re.search(pattern, summary) for pattern in (
        r"(kg_wcr) covered more of the path than its start on (\d+) held-out questions and less on (\d+)",
        r"(gdcr) on (\d+) and (\d+) \(p", r"(ssp) on (\d+) and (\d+) \(p")]
    for found in covered:
        model, more, less = found.groups()
        key = f"coverage.{model}_vs_{STARTED_FROM[model]}.kg_heldout"
        assert (int(more), int(less)) == (metrics[f"{key}.more"], metrics[f"{key}.less"]), model
    found = re.search(r"kg_wcr's searches returned a gold answer on (\d+) held-out questions? where its start's did "
                      r"not and on (\d+) the other way \(exact McNemar p = ([\d.]+); gdcr (\d+) and (\d+)\)", summary)
    for model, (more, less) in (("kg_wcr", found.group(1, 2)), ("gdcr", found.group(4, 5))):
        key = f"behaviour.{model}_vs_{STARTED_FROM[model]}.kg_heldout"
        assert (int(more), int(less)) == (metrics[f"{key}.found_only_a"], metrics[f"{key}.found_only_b"]), model
    assert float(found[3]) == round(metrics["behaviour.kg_wcr_vs_warmstart.kg_heldout.found_p"], 3)
    shares = re.search(r"(\d+)% \(kg_wcr\) and (\d+)% \(gdcr\)", summary)
    histories = read_histories(REPORTS / "selfplay")
    for stated_share, variant in zip(shares.groups(), ("kg_wcr", "gdcr"), strict=True):
        assert int(stated_share) == round(100 * _mean_finite(histories[variant], "filter/gold_checked_rate"))


@pytest.mark.skipif(not COMPARE.is_file(), reason="no committed comparison report")
def test_the_number_of_paired_tests_and_the_p_values_the_readme_names_are_the_committed_report_s():
    metrics = json.loads(COMPARE.read_text())
    p_values = {key: value for key, value in metrics.items() if key.endswith(("_p", ".p"))}
    summary = run_summary()
    stated = re.search(r"of the report's (\d+) paired tests", summary)
    assert stated and int(stated[1]) == len(p_values)
    assert round(metrics["behaviour.ssp_vs_warmstart.pooled.searches_p"], 3) == 0.031
    assert round(metrics["coverage.warmstart_eve_vs_warmstart.kg_heldout.bridges_p"], 3) == 0.049
    assert "ssp's fewer pooled searches, p = 0.031" in summary and "fewer bridge entities, p = 0.049" in summary
    assert metrics["behaviour.warmstart_eve_vs_warmstart.kg_heldout.answers_changed"] == 122
