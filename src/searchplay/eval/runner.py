"""Run the Solver on benchmark questions: batched, greedy, top-k search, resumable, timed.

Protocol (SSP §4.1, KG paper §4.2 / Table 4): the Search-R1 solver prompt (SSP App. D) with the
question as Search-R1's data files write it, SSP's turn loop (params ``evaluate.*`` switch each
difference from Search-R1's loop; docs/decisions/eval.md), greedy decoding (validation temperature
0.0), top-3 documents per search, at most 10 rounds; the
prediction is the last ``<answer>`` span, stored beside the model's full output (every turn, with
the ``<information>`` blocks it was shown). Each finished batch is appended to the benchmark's
predictions JSONL (flushed and fsynced) before the next starts, so a crash loses at most the
batch in flight and a rerun skips every question already in the file.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from searchplay.eval.benchmarks import QAItem
from searchplay.eval.scoring import answer_retrieved, score_question
from searchplay.io import atomic_write

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class EvidenceFormat:
    """How ``evaluate.evidence`` asks the Solver for an evidence span and reads it back (a recipe's)."""

    solver_messages: Callable[[str], list[dict[str, str]]]  # question -> the Solver prompt that asks for evidence
    span: Callable[[Any], str | None]  # trajectory -> the evidence span it quoted, if any


EVIDENCE_FORMATS: dict[str, EvidenceFormat] = {}  # at most one: the recipe that registered it -> its format


def register_evidence_format(name: str, evidence_format: EvidenceFormat) -> None:
    """Make ``evidence_format`` what ``evaluate.evidence`` uses (a recipe's, at import)."""
    if EVIDENCE_FORMATS.get(name, evidence_format) is not evidence_format or (EVIDENCE_FORMATS.keys() - {name}):
        raise ValueError(f"an evidence format is already registered ({sorted(EVIDENCE_FORMATS)}); one at most")
    EVIDENCE_FORMATS[name] = evidence_format


def evidence_format() -> EvidenceFormat:
    """The registered evidence format; an error naming how to register one when there is none."""
    if not EVIDENCE_FORMATS:
        raise RuntimeError("evaluate.evidence needs an evidence format and none is registered; "
                           "searchplay.recipes.load_recipes registers the recipes' formats")
    return next(iter(EVIDENCE_FORMATS.values()))


@dataclass
class StageTimes:
    """Wall-clock seconds spent per phase (the speed benchmark reports their shares)."""

    generation: float = 0.0
    retrieval: float = 0.0
    judging: float = 0.0
    questions: int = 0

    @property
    def total(self) -> float:
        return self.generation + self.retrieval + self.judging

    def shares(self) -> dict[str, float]:
        total = self.total or 1.0
        return {"generation": self.generation / total, "retrieval": self.retrieval / total,
                "judging": self.judging / total}


@dataclass
class TimedSearchTool:
    """A SearchTool that adds the time spent in ``search`` to ``times.retrieval``."""

    inner: Any
    times: StageTimes = field(default_factory=StageTimes)

    def search(self, queries: Sequence[str], top_k: int = 3):
        start = time.perf_counter()
        try:
            return self.inner.search(queries, top_k=top_k)
        finally:
            self.times.retrieval += time.perf_counter() - start


def rollout_config(params: Any) -> Any:
    """The agent's ``RolloutConfig`` from params, with the evaluation's turns, (greedy) temperature and protocol
    options (``evaluate.{eos_without_action, final_answer_turn, information_format, question_format}``)."""
    from searchplay.agent.rollout import RolloutConfig

    cfg = params.evaluate
    return RolloutConfig.from_params(params, max_turns=evaluation_turns(params), temperature=cfg.temperature,
                                     eos_without_action=cfg.eos_without_action,
                                     final_answer_turn=cfg.final_answer_turn,
                                     information_format=cfg.information_format, question_format=cfg.question_format)


def evaluation_turns(params: Any) -> int:
    """Interaction rounds per question at evaluation: ``evaluate.max_turns`` where set, else ``agent.max_turns``."""
    return params.evaluate.max_turns or params.agent.max_turns


def read_finished(path: str | Path) -> dict[str, dict[str, Any]]:
    """Prediction records already written (id -> record); a torn last line from a crash is dropped."""
    path = Path(path)
    if not path.exists():
        return {}
    records: dict[str, dict[str, Any]] = {}
    lines = path.read_text(encoding="utf-8").splitlines()
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            if number == len(lines):  # the write in flight when the process died
                _rewrite(path, records.values())
                break
            raise ValueError(f"{path}:{number}: not valid JSON; the predictions file is damaged, "
                             "delete it to evaluate this benchmark again") from None
        records[record["id"]] = record
    return records


def _rewrite(path: Path, records) -> None:
    with atomic_write(path) as handle:
        for record in records:
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")


def _append(path: Path, records: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as handle:
        for record in records:
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
        handle.flush()
        os.fsync(handle.fileno())


def _judge_items(items: Sequence[QAItem], predictions: Sequence[str | None]) -> list[tuple[str, str | None, list[str]]]:
    pairs = zip(items, predictions, strict=True)
    return [(item.question, prediction, item.golden_answers) for item, prediction in pairs]


def solve_batch(items: Sequence[QAItem], backend: Any, search_tool: Any, config: Any, top_k: int,
                evidence: bool = False) -> list[Any]:
    """One batched multi-turn Solver rollout per question (all advance together); ``evidence``: the registered
    evidence format's Solver prompt (a recipe's), which asks for an ``<evidence>`` span before the answer
    (Arai & Ichikawa 2026, App. H: every system gets it)."""
    from searchplay.agent.prompts import solver_messages
    from searchplay.agent.rollout import encode_prompt, run_rollouts

    style = getattr(config, "question_format", "plain")
    ask = evidence_format().solver_messages if evidence else lambda question: solver_messages(question, style)
    prompts = [encode_prompt(backend.tokenizer, ask(item.question)) for item in items]
    return run_rollouts(backend, search_tool, prompts, "solver", config, top_k=top_k)


def full_output(trajectory: Any, tokenizer: Any) -> str:
    """The whole response as the model saw it: every generated turn and every ``<information>`` block.

    Decoded from the token ids kept by the rollout (special tokens included), never rebuilt from parts.
    """
    return tokenizer.decode(trajectory.response_ids, skip_special_tokens=False)


def evidence_scores(trajectory: Any, verdict: Any, evidence_verdict: Any) -> dict[str, Any]:
    """Per-question evidence scores (Arai & Ichikawa 2026, App. H): the quoted span, its presence, whether it
    supports a gold answer (``Judge.judge_evidence_many``) and the joint answer-correct-and-supported."""
    span = evidence_format().span(trajectory) or ""
    supported = bool(evidence_verdict.correct) and evidence_verdict.method != "error"
    return {"evidence": span, "evidence_present": bool(span), "evidence_supported": supported,
            "evidence_judge_method": evidence_verdict.method,
            "joint_correct": supported and bool(verdict.correct) and verdict.method != "error"}


def prediction_record(item: QAItem, trajectory: Any, verdict: Any, model: str, output: str = "",
                      model_revision: str | None = None, settings: str = "",
                      normalization: str = "squad") -> dict[str, Any]:
    """One line of ``predictions/<benchmark>.jsonl``: the question, the extracted answer and the full output,
    the scores, whether any document the searches returned holds a gold answer (``answer_retrieved``),
    the model (params id and revision) that produced it, and the settings fingerprint."""
    return {
        "id": item.id, "benchmark": item.benchmark, "question": item.question,
        "golden_answers": item.golden_answers, "prediction": trajectory.answer or "",
        **score_question(item, trajectory.answer, verdict, normalization),
        "valid": trajectory.valid, "finish_reason": trajectory.finish_reason,
        "num_searches": trajectory.num_searches, "num_turns": len(trajectory.turns),
        "answer_retrieved": answer_retrieved([d for turn in trajectory.turns for d in turn.documents],
                                             item.golden_answers, normalization),
        "search_queries": trajectory.search_queries, "model": model, "model_revision": model_revision,
        "settings": settings, "output": output,
    }


def same_question(record: dict[str, Any] | None, item: QAItem) -> bool:
    """Whether a saved record answers ``item`` as it is now: the same question and gold answers (a regenerated
    KG pool can keep a question's id and change its answer)."""
    return (record is not None and record.get("question") == item.question
            and record.get("golden_answers") == list(item.golden_answers))


def run_benchmark(items: Sequence[QAItem], predictions_path: str | Path, **options: Any) -> list[dict]:
    """``run_benchmarks`` for one benchmark: answer and score ``items`` into ``predictions_path``."""
    path = Path(predictions_path)
    return run_benchmarks({path: items}, **options)[path]


def run_benchmarks(work: dict[Path, Sequence[QAItem]], *, backend: Any, search_tool: Any, judge: Any, config: Any,
                   model: str, batch_size: int, top_k: int = 3, times: StageTimes | None = None,
                   on_batch: Callable[[int], None] | None = None, model_revision: str | None = None,
                   settings: str = "", normalization: str = "squad", evidence: bool = False) -> dict[Path, list[dict]]:
    """Answer and score every item not already in its predictions file (``work``: file -> items) under the
    same ``settings`` fingerprint (model, decoding, judge, metric options); returns each file's records in
    item order. A record the judge could not score (``judge_error``) is never reused: a re-run asks again.

    Batches span benchmarks: seven 5-question benchmarks decode as batches of ``batch_size``, not of 5
    (measured in the main job on 2 fp32 CPU cores: the warm-start's 58 questions took 225 s of
    generation against 237 s one benchmark at a time). Each finished batch is appended to the files of
    the benchmarks it holds before the next batch starts.
    """
    times = times or StageTimes()
    timed_tool = TimedSearchTool(search_tool, times)
    finished = {path: {key: record for key, record in read_finished(path).items()
                       if record.get("settings") == settings and not record.get("judge_error")} for path in work}
    todo = [(path, item) for path, items in work.items() for item in items
            if not same_question(finished[path].get(item.id), item)]
    if reused := sum(len(items) for items in work.values()) - len(todo):
        log.info("%d of %d questions answered before by the same model, settings and code (the predictions "
                 "files): not asked again", reused, reused + len(todo))
        if on_batch:  # the progress bar counts them done, or a resumed run's bar would end short of its total
            on_batch(reused)
    for start in range(0, len(todo), batch_size):
        chunk = todo[start:start + batch_size]
        batch = [item for _, item in chunk]
        retrieval_before, clock = times.retrieval, time.perf_counter()
        trajectories = solve_batch(batch, backend, timed_tool, config, top_k, evidence)
        outputs = [full_output(trajectory, backend.tokenizer) for trajectory in trajectories]
        times.generation += time.perf_counter() - clock - (times.retrieval - retrieval_before)
        clock = time.perf_counter()
        verdicts = judge.judge_many(_judge_items(batch, [t.answer for t in trajectories]))
        records = [prediction_record(item, trajectory, verdict, model, output, model_revision, settings, normalization)
                   for item, trajectory, verdict, output in zip(batch, trajectories, verdicts, outputs, strict=True)]
        if evidence:
            spans = [evidence_format().span(t) for t in trajectories]
            supports = judge.judge_evidence_many([(item.question, span, item.golden_answers)
                                                  for item, span in zip(batch, spans, strict=True)])
            for record, trajectory, verdict, support in zip(records, trajectories, verdicts, supports, strict=True):
                record.update(evidence_scores(trajectory, verdict, support))
        times.judging += time.perf_counter() - clock
        for path in dict.fromkeys(path for path, _ in chunk):
            _append(path, [record for (owner, _), record in zip(chunk, records, strict=True) if owner == path])
        for (path, _), record in zip(chunk, records, strict=True):
            finished[path][record["id"]] = record
        times.questions += len(batch)
        if on_batch:
            on_batch(len(batch))
    return {path: [finished[path][item.id] for item in items] for path, items in work.items()}
