"""Scores: judge accuracy (the papers' main score) with EM, F1 and sub-EM beside it, and the averages.

Protocol (KG paper §4.1 / App. D.2; SSP §4.1): exact match first, the LLM judge for the rest; scores
on a 100-point scale; "Avg" is the unweighted mean of the seven benchmarks, GeneralQA the mean of
NQ/TriviaQA/PopQA and Multi-HopQA the mean of HotpotQA/2Wiki/MuSiQue/Bamboogle (SSP §4.1, Table 1).
A judge error counts as *not correct* and is counted beside the score, never dropped (fail closed).
EM and judge accuracy carry their n and a Wilson 95% interval (``searchplay.eval.intervals``);
kg_heldout also carries the EM of always giving the training splits' most common answer, and every
benchmark the retrieval recall of the Solver's own searches beside that of one search with the question.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from statistics import mean
from typing import Any

from searchplay.answers import answer_in_documents, exact_match, f1_score, sub_exact_match
from searchplay.eval.benchmarks import GENERAL_QA, MULTIHOP_QA, PAPER_BENCHMARKS, QAItem
from searchplay.eval.intervals import percent_interval

SCORES = ("judge_acc", "em", "f1", "sub_em")  # per-question means, reported x100
GROUPS = {"general_qa": GENERAL_QA, "multihop_qa": MULTIHOP_QA, "avg": PAPER_BENCHMARKS}


def score_question(item: QAItem, prediction: str | None, verdict: Any, normalization: str = "squad") -> dict[str, Any]:
    """The per-question scores for one prediction (None: no answer extracted) and its judge ``Verdict``."""
    judge_error = verdict.method == "error"
    golds = item.golden_answers
    return {
        "em": exact_match(prediction, golds, normalization),
        "f1": f1_score(prediction, golds, normalization),
        "sub_em": sub_exact_match(prediction, golds, normalization),
        "judge_correct": bool(verdict.correct) and not judge_error,
        "judge_method": verdict.method,
        "judge_model": verdict.judge_model,
        "judge_error": judge_error,
    }


INTERVAL_SCORES = ("judge_acc", "em", "retrieval_recall")  # yes/no per question: a binomial interval applies


def benchmark_scores(records: Sequence[dict[str, Any]]) -> dict[str, float]:
    """Means over one benchmark's prediction records, x100, plus counts (n, judge errors, LLM-judged).

    ``judge_acc`` and ``em`` also get ``<score>_ci_low`` / ``<score>_ci_high``: the Wilson 95%
    interval of the proportion correct, on the same 0-100 scale. ``retrieval_recall`` (with its interval)
    is the share of questions where a document the searches returned holds a gold answer, where every
    record says (``answer_retrieved``; records written before it existed do not).
    """
    if not records:
        return {"n": 0}
    correct = {"judge_acc": sum(bool(r["judge_correct"]) for r in records),
               "em": sum(round(r["em"]) for r in records)}
    if all("answer_retrieved" in r for r in records):
        correct["retrieval_recall"] = sum(bool(r["answer_retrieved"]) for r in records)
    scores, intervals = {}, {}
    for score, count in correct.items():
        scores[score] = 100 * count / len(records)
        intervals[f"{score}_ci_low"], intervals[f"{score}_ci_high"] = percent_interval(count, len(records))
    return {
        "n": len(records),
        **scores,
        **intervals,
        "f1": 100 * mean(r["f1"] for r in records),
        "sub_em": 100 * mean(r["sub_em"] for r in records),
        "judge_errors": sum(bool(r["judge_error"]) for r in records),
        "judged_by_llm": sum(r["judge_method"] == "llm" for r in records),
        "valid_rate": 100 * mean(float(r.get("valid", True)) for r in records),
        "mean_searches": mean(float(r.get("num_searches", 0)) for r in records),
        **evidence_metrics(records),
    }


def evidence_metrics(records: Sequence[dict[str, Any]]) -> dict[str, float]:
    """Evidence metrics x100 (Arai & Ichikawa 2026, App. H), where the records carry them
    (``evaluate.evidence``): evidence presence, evidence score
    (the span supports a gold answer) and joint (answer correct AND supported).

    >>> evidence_metrics([{"evidence_present": True, "evidence_supported": True, "joint_correct": False},
    ...                   {"evidence_present": False, "evidence_supported": False, "joint_correct": False}])
    {'evidence_presence': 50.0, 'evidence_score': 50.0, 'joint_acc': 0.0}
    >>> evidence_metrics([{"em": 1.0}])
    {}
    """
    scored = [r for r in records if "evidence_present" in r]
    if not scored:
        return {}
    return {"evidence_presence": 100 * mean(float(r["evidence_present"]) for r in scored),
            "evidence_score": 100 * mean(float(r["evidence_supported"]) for r in scored),
            "joint_acc": 100 * mean(float(r["joint_correct"]) for r in scored)}


def majority_baseline_em(items: Sequence[QAItem], answer: str | None, normalization: str = "squad") -> float:
    """EM (0-100) of always answering ``answer``: the floor a KG score must clear to mean anything, under the
    normalization the models' EM uses (``evaluate.normalization``).

    ``answer`` is the most common answer of the training splits (``searchplay.split.majority_answer``);
    None (no training subgraphs) and no items both give 0.

    >>> items = [QAItem("a", "q?", ["Europe"], "kg_heldout"), QAItem("b", "q?", ["Asia"], "kg_heldout")]
    >>> majority_baseline_em(items, "europe")
    50.0
    """
    if not items or answer is None:
        return 0.0
    return 100 * mean(exact_match(answer, item.golden_answers, normalization) for item in items)


def answer_retrieved(documents: Iterable[Any], golden_answers: Sequence[str], normalization: str = "squad") -> bool:
    """Whether retrieved documents (``title``, ``text``) hold a gold answer: ``answers.answer_in_documents`` on
    "title text", as FlashRAG reads a passage."""
    return answer_in_documents([f"{d.title} {d.text}" for d in documents], golden_answers, normalization)


def question_search_recall(items: Sequence[QAItem], documents: Sequence[Sequence[Any]],
                           normalization: str = "squad") -> float:
    """Retrieval recall (0-100) of one search per question with the question itself as the query: the share
    of ``items`` whose ``documents`` (the top-k for that query, same order) hold a gold answer.

    The reference row for the models' own ``retrieval_recall``: what the index gives a Solver that only
    copies the question into one search.

    >>> from types import SimpleNamespace as Doc
    >>> items = [QAItem("a", "Capital of Peru?", ["Lima"], "nq"), QAItem("b", "Who?", ["Ada"], "nq")]
    >>> question_search_recall(items, [[Doc(title="Peru", text="Its capital is Lima.")], []])
    50.0
    """
    if not items:
        return 0.0
    found = [answer_retrieved(docs, item.golden_answers, normalization)
             for item, docs in zip(items, documents, strict=True)]
    return 100 * mean(found)


def group_scores(per_benchmark: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    """GeneralQA, Multi-HopQA and overall averages over the paper benchmarks that were run.

    Each group is the unweighted mean over its members present in ``per_benchmark``;
    ``num_benchmarks`` says how many that was (the papers' numbers assume all of them).
    """
    groups: dict[str, dict[str, float]] = {}
    for group, members in GROUPS.items():
        present = [per_benchmark[name] for name in members if per_benchmark.get(name, {}).get("n")]
        if present:
            groups[group] = {score: mean(m[score] for m in present) for score in SCORES}
            if all("retrieval_recall" in m for m in present):
                groups[group]["retrieval_recall"] = mean(m["retrieval_recall"] for m in present)
            groups[group]["num_benchmarks"] = len(present)
            groups[group]["judge_errors"] = sum(m["judge_errors"] for m in present)
    return groups


def scores_by_hops(items: Sequence[QAItem], records: Sequence[dict[str, Any]]) -> dict[str, float]:
    """kg_heldout's questions and judge accuracy (0-100) per hop count: ``hops_<k>_n``, ``hops_<k>_judge_acc``.

    ``records`` are the predictions of ``items``, in the same order; items without ``num_hops`` are left out.

    >>> items = [QAItem(i, "q?", ["a"], "kg_heldout", {"num_hops": h}) for i, h in (("x", 3), ("y", 3), ("z", 4))]
    >>> scores_by_hops(items, [{"judge_correct": c} for c in (True, False, False)])
    {'hops_3_n': 2.0, 'hops_3_judge_acc': 50.0, 'hops_4_n': 1.0, 'hops_4_judge_acc': 0.0}
    """
    by_hops: dict[int, list[bool]] = {}
    for item, record in zip(items, records, strict=True):
        if isinstance(hops := item.metadata.get("num_hops"), int):
            by_hops.setdefault(hops, []).append(bool(record["judge_correct"]))
    scores: dict[str, float] = {}
    for hops in sorted(by_hops):
        correct = by_hops[hops]
        scores[f"hops_{hops}_n"] = float(len(correct))
        scores[f"hops_{hops}_judge_acc"] = 100 * sum(correct) / len(correct)
    return scores


def flat_metrics(per_benchmark: dict[str, dict[str, float]], groups: dict[str, dict[str, float]]) -> dict[str, float]:
    """``<benchmark|group>.<score>`` -> number: the DVC metric file and the MLflow metrics."""
    flat: dict[str, float] = {}
    for name, scores in [*per_benchmark.items(), *groups.items()]:
        for key, value in scores.items():
            flat[f"{name}.{key}"] = round(float(value), 4)
    return flat


def by_benchmark(records: Iterable[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    grouped: dict[str, list[dict[str, Any]]] = {}
    for record in records:
        grouped.setdefault(record["benchmark"], []).append(record)
    return grouped


SELFPLAY_HEADLINE = {"iterations": "iteration", "solver_reward": "solver/reward_mean",
                     "solver_accuracy": "solver/accuracy", "proposer_reward": "proposer/reward_mean",
                     "valid_rate_rule": "filter/valid_rate_rule",
                     "groups_with_signal": "train/groups_nonzero_advantage"}


def headline_metrics(metrics: dict[str, float], selfplay: dict[str, float] | None = None) -> dict[str, Any]:
    """The few numbers to compare models by (``headline.json``, nested so DVC shows ``eval.avg_judge_acc``):
    the 7-benchmark averages, kg_heldout beside its majority baseline, the mean valid-output rate, and for
    a self-play model its last iteration's rewards (``reports/selfplay/<variant>/metrics.json``)."""
    valid = [v for k, v in metrics.items() if k.endswith(".valid_rate")]
    evaluation = {"avg_judge_acc": metrics.get("avg.judge_acc"), "avg_em": metrics.get("avg.em"),
                  "avg_f1": metrics.get("avg.f1"), "avg_retrieval_recall": metrics.get("avg.retrieval_recall"),
                  "avg_num_benchmarks": metrics.get("avg.num_benchmarks"),
                  "kg_heldout_em": metrics.get("kg_heldout.em"),
                  "kg_heldout_retrieval_recall": metrics.get("kg_heldout.retrieval_recall"),
                  "kg_heldout_majority_baseline_em": metrics.get("kg_heldout.majority_baseline_em"),
                  "valid_rate": round(sum(valid) / len(valid), 4) if valid else None}
    out: dict[str, Any] = {"eval": {k: v for k, v in evaluation.items() if v is not None}}
    if selfplay:
        out["selfplay"] = {name: selfplay[key] for name, key in SELFPLAY_HEADLINE.items()
                           if selfplay.get(key) is not None}
    return out
