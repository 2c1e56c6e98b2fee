"""Answer judge: exact match first, then an LLM judge with the papers' prompt (SSP App. D; KG Fig. 14).

``judge.backend`` chooses the LLM: ``exact`` (the embedded default: EM alone, because a 135M model
is no judge; ``Judge.name == "exact-match"`` is recorded with every score), ``openai`` (any
OpenAI-compatible endpoint: vLLM, DeepSeek, ...) or ``local`` (a Hugging Face model through a
``PolicyBackend``). The judge fails closed: a judgement that cannot be obtained is *not correct*,
has ``method == 'error'`` and is counted in ``Judge.counts``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import sqlite3
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from searchplay.answers import exact_match, normalize_answer
from searchplay.redaction import redact_credentials

if TYPE_CHECKING:
    from searchplay.config import JudgeConfig
    from searchplay.llm.backend import PolicyBackend

log = logging.getLogger(__name__)

# SSP official code (llm_as_a_judge.py model_based_match) system message.
JUDGE_SYSTEM_PROMPT = "You are a professional judge who evaluates the correctness of answers based on given criteria."

# SSP App. D; the KG paper's Fig. 14 ends with "Correct" or "Wrong".
_JUDGE_TEMPLATE = """Please determine whether the model's answer is consistent with the reference answer:

Question: {question}

Model Answer: {prediction}
Reference Answer: {ground_truth}

Evaluation Criteria:

1. The model answer must accurately respond to the question and be consistent with the reference answer in meaning.
2. For numerical questions, the values must be equal or very close.
3. For textual questions, the core meaning must be correct.
4. Differences in wording or language are allowed as long as the core answer is the same.
5. If the model answer includes the correct answer and does not contain conflicting information, it is also \
considered correct.

Please respond only with "Correct" or "{negative}". Do not provide any additional explanation."""

NEGATIVE_WORD = {"ssp": "Incorrect", "kg": "Wrong"}
GOLD_SEPARATOR = "; "  # several golden answers are shown to the judge as one reference (docs/decisions/agent.md)

Method = Literal["exact", "llm", "error"]
JudgeItem = tuple[str, str | None, Sequence[str]]  # (question, prediction, golden answers)


@dataclass(frozen=True)
class Verdict:
    """One judgement: ``correct``, how it was reached, and which judge reached it."""

    correct: bool
    method: Method
    judge_model: str
    reply: str | None = None  # the LLM's raw reply (method 'llm' or an unparseable 'error')
    error: str | None = None


class JudgeError(RuntimeError):
    """An LLM judgement could not be obtained (network, HTTP status, malformed reply)."""


class JudgeOutageError(RuntimeError):
    """The judge is down, not one answer wrong: too many failures in a row, its time budget spent, or too
    large a share of an evaluation's answers unjudged. Stops the run; nothing is scored from it."""


def judge_messages(question: str, prediction: str, golden_answers: Sequence[str], prompt: str = "ssp") -> list[dict]:
    """Chat messages for one LLM judgement (SSP App. D prompt; SSP code's system message)."""
    user = _JUDGE_TEMPLATE.format(question=question, prediction=prediction,
                                  ground_truth=GOLD_SEPARATOR.join(golden_answers), negative=NEGATIVE_WORD[prompt])
    return [{"role": "system", "content": JUDGE_SYSTEM_PROMPT}, {"role": "user", "content": user}]


_REASONING = re.compile(r"^.*</think>", re.DOTALL)  # everything up to the last closing think tag
_NEGATIVE = re.compile(r"\b(?:incorrect|wrong|not\s+correct|isn'?t\s+correct|not\s+right)\b")
_POSITIVE = re.compile(r"\bcorrect\b")
_HEDGES = re.compile(r"\b(?:cannot|can'?t|unable|unsure|unclear|uncertain|whether|maybe|perhaps|possibly|"
                     r"might|depends|partially|partly)\b|\?")


def parse_verdict(reply: str) -> bool | None:
    """``True`` for an explicit "Correct", ``False`` for "Incorrect"/"Wrong" (sentence forms too),
    ``None`` (a judge error, never counted as correct) for anything else.

    A leading ``<think>...</think>`` block is dropped first; a reply still thinking is an error. The
    positive word counts only as a whole word ("Correctness ..." is not a verdict), a hedged or
    self-contradicting reply ("I cannot tell whether it is correct", "correct, or wrong") is an
    error, not a verdict. The anchors' substring test (``"correct" in reply``) would mark
    "Incorrect" correct.

    >>> parse_verdict(' "Correct". '), parse_verdict("The answer is incorrect."), parse_verdict("Correctness?")
    (True, False, None)
    """
    if "<think>" in reply and "</think>" not in reply:
        return None
    text = _REASONING.sub("", reply).lower().replace("’", "'")
    if _HEDGES.search(text):
        return None
    negative = bool(_NEGATIVE.search(text))
    positive = bool(_POSITIVE.search(_NEGATIVE.sub(" ", text)))
    if negative != positive:
        return positive
    return None


# The evidence judgement of evidence-grounded self-play (Arai & Ichikawa 2026, App. H: a binary GPT-4.1 verdict
# on whether the question paired with the span recovers the gold answer). The paper prints no prompt; this one is
# in our words.
EVIDENCE_TEMPLATE = """You are judging whether a piece of evidence supports an answer.
Question: {question}
Gold answer (any of): {golds}
Evidence: {evidence}
Is the question, paired with this evidence, sufficient to recover the gold answer? The evidence must itself \
state or directly entail the gold answer (together with the question); do not use outside knowledge.
Reply with exactly one word: YES or NO."""

_YES_NO = re.compile(r"\b(yes|no)\b")


def parse_yes_no(reply: str) -> bool | None:
    """True for a reply whose first YES/NO word is YES, False for NO, None (a judge error) without one.

    >>> parse_yes_no("YES."), parse_yes_no("<think>hmm</think> no"), parse_yes_no("maybe")
    (True, False, None)
    """
    match = _YES_NO.search(_REASONING.sub("", reply).lower())
    return None if match is None else match.group(1) == "yes"


def evidence_names_gold(evidence: str, golden_answers: Sequence[str], scheme: str = "squad") -> bool:
    """The judge-free stand-in for the evidence judgement: a normalized gold answer inside the normalized span.

    >>> evidence_names_gold("Paris is the capital of France.", ["paris"]), evidence_names_gold("", ["Paris"])
    (True, False)
    """
    span = f" {normalize_answer(evidence, scheme)} "
    return bool(span.strip()) and any(f" {normalize_answer(g, scheme)} " in span for g in golden_answers
                                      if normalize_answer(g, scheme))


class JudgeLLM(Protocol):
    """Replies to many chat conversations; an item is the reply text or the exception that prevented it."""

    name: str

    def complete_many(self, conversations: Sequence[list[dict]]) -> list[str | Exception]: ...


class VerdictCache:
    """SQLite cache of LLM replies keyed by (judge model, prompt, question, prediction, golds)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False)
        self._db.execute("CREATE TABLE IF NOT EXISTS replies (key TEXT PRIMARY KEY, reply TEXT NOT NULL)")
        self._db.commit()

    @staticmethod
    def key(model: str, prompt: str, question: str, prediction: str, golden_answers: Sequence[str]) -> str:
        blob = json.dumps([model, prompt, question, prediction, list(golden_answers)], ensure_ascii=False)
        return hashlib.sha256(blob.encode()).hexdigest()

    def get(self, key: str) -> str | None:
        with self._lock:
            row = self._db.execute("SELECT reply FROM replies WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def put(self, key: str, reply: str) -> None:
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO replies VALUES (?, ?)", (key, reply))
            self._db.commit()

    def close(self) -> None:
        self._db.close()


class Judge:
    """``is_correct``/``judge``/``judge_many`` over exact match and an optional LLM.

    ``counts`` tallies verdict methods ('exact', 'llm', 'error') so callers can report failures.
    """

    def __init__(self, llm: JudgeLLM | None = None, prompt: str = "ssp", cache: VerdictCache | None = None,
                 normalization: str = "squad", max_consecutive_errors: int = 0, deadline_s: float | None = None):
        self.llm = llm
        self.max_consecutive_errors = max_consecutive_errors  # 0: never stop early
        self.deadline_s = deadline_s  # seconds of LLM calls this judge may spend in all (None: no bound)
        self.consecutive_errors = 0
        self.llm_seconds = 0.0
        self.normalization = normalization  # searchplay.answers scheme of the exact-match shortcut
        self.prompt = prompt
        self.cache = cache
        self.name = llm.name if llm is not None else "exact-match"
        self.counts: Counter[str] = Counter()

    def is_correct(self, question: str, prediction: str | None, golden_answers: Sequence[str]) -> bool:
        return self.judge(question, prediction, golden_answers).correct

    def judge(self, question: str, prediction: str | None, golden_answers: Sequence[str]) -> Verdict:
        return self.judge_many([(question, prediction, golden_answers)])[0]

    def judge_many(self, items: Sequence[JudgeItem]) -> list[Verdict]:
        """Judge many (question, prediction, golds) at once; LLM calls for the non-exact ones are batched."""
        items = [(q, p, [g] if isinstance(g, str) else list(g)) for q, p, g in items]
        verdicts: list[Verdict | None] = [None] * len(items)
        pending: list[int] = []
        for i, (_question, prediction, golds) in enumerate(items):
            if exact_match(prediction, golds, self.normalization):
                verdicts[i] = Verdict(True, "exact", self.name)
            elif self.llm is None or not (prediction or "").strip() or not golds:
                verdicts[i] = Verdict(False, "exact", self.name)  # no LLM, or nothing to compare: EM's verdict
            else:
                pending.append(i)
        for i, verdict in zip(pending, self._llm_verdicts([items[i] for i in pending]), strict=True):
            verdicts[i] = verdict
        done = [v for v in verdicts if v is not None]
        self.counts.update(v.method for v in done)
        return done

    def judge_evidence_many(self, items: Sequence[tuple[str, str | None, Sequence[str]]]) -> list[Verdict]:
        """Does each (question, evidence, golds)'s span support a gold answer? (Arai & Ichikawa 2026, App. H)

        An empty span is not correct without a call. Without an LLM the verdict is ``evidence_names_gold``
        (method 'exact'); with one, the YES/NO reply to ``EVIDENCE_TEMPLATE``, failing closed as answers do.
        """
        verdicts: list[Verdict | None] = [None] * len(items)
        pending = []
        for i, (_question, evidence, golds) in enumerate(items):
            if not (evidence or "").strip():
                verdicts[i] = Verdict(False, "exact", self.name)
            elif self.llm is None:
                verdicts[i] = Verdict(evidence_names_gold(evidence or "", list(golds), self.normalization), "exact",
                                      self.name)
            else:
                pending.append(i)
        if pending:
            conversations = [[{"role": "user", "content": EVIDENCE_TEMPLATE.format(
                question=items[i][0], golds=GOLD_SEPARATOR.join(items[i][2]), evidence=items[i][1])}]
                for i in pending]
            assert self.llm is not None
            for i, reply in zip(pending, self.llm.complete_many(conversations), strict=True):
                parsed = None if isinstance(reply, Exception) else parse_yes_no(reply)
                verdicts[i] = (Verdict(parsed, "llm", self.name, reply=reply) if parsed is not None else
                               Verdict(False, "error", self.name, reply=None if isinstance(reply, Exception) else reply,
                                       error=str(reply) if isinstance(reply, Exception) else "unparseable reply"))
        return [v for v in verdicts if v is not None]

    @property
    def where(self) -> str:
        """The judge for a message: its model and, for an endpoint, the URL without credentials."""
        url = getattr(self.llm, "shown_url", None)
        return f"{self.name} at {url}" if url else self.name

    def _llm_verdicts(self, items: Sequence[JudgeItem]) -> list[Verdict]:
        if not items:
            return []
        keys = [VerdictCache.key(self.name, self.prompt, q, p or "", list(g)) for q, p, g in items]
        replies: list[str | Exception | None] = [self.cache.get(k) if self.cache else None for k in keys]
        missing = [i for i, reply in enumerate(replies) if reply is None]
        conversations = [judge_messages(items[i][0], items[i][1] or "", list(items[i][2]), self.prompt)
                         for i in missing]
        assert self.llm is not None
        # in chunks of max_consecutive_errors calls, so an endpoint that never replies stops the judge after that
        # many calls, not after the whole batch
        verdicts = {i: self._verdict(reply, keys[i]) for i, reply in enumerate(replies) if reply is not None}
        chunk = self.max_consecutive_errors or len(missing) or 1
        for start in range(0, len(missing), chunk):
            if self.deadline_s is not None and self.llm_seconds >= self.deadline_s:
                raise JudgeOutageError(f"judge {self.where} spent its {self.deadline_s:.0f} s (judge.deadline_s); "
                                       "stopping instead of waiting on it")
            part = missing[start:start + chunk]
            tic = time.perf_counter()
            replied = self.llm.complete_many(conversations[start:start + chunk])
            self.llm_seconds += time.perf_counter() - tic
            verdicts.update({i: self._verdict(reply, keys[i]) for i, reply in zip(part, replied, strict=True)})
            self._count_failures([verdicts[i] for i in part])
        return [verdicts[i] for i in range(len(items))]

    def _count_failures(self, verdicts: Sequence[Verdict]) -> None:
        """Stop at ``max_consecutive_errors`` failed calls in a row: an outage, not a verdict on the answers."""
        for verdict in verdicts:
            self.consecutive_errors = self.consecutive_errors + 1 if verdict.method == "error" else 0
            if self.max_consecutive_errors and self.consecutive_errors >= self.max_consecutive_errors:
                raise JudgeOutageError(f"judge {self.where} failed {self.consecutive_errors} times in a row "
                                       f"(judge.max_consecutive_errors); last: {verdict.error}")

    def _verdict(self, reply: str | Exception | None, key: str) -> Verdict:
        if isinstance(reply, Exception) or reply is None:
            log.warning("judge %s failed; counting the answer as not correct: %s", self.name, reply)
            return Verdict(False, "error", self.name, error=f"{type(reply).__name__}: {reply}")
        parsed = parse_verdict(reply)
        if parsed is None:
            log.warning("judge %s gave an unparseable reply %r; counting as not correct", self.name, reply[:80])
            return Verdict(False, "error", self.name, reply=reply, error="unparseable reply")
        if self.cache is not None:
            self.cache.put(key, reply)
        return Verdict(parsed, "llm", self.name, reply=reply)


class OpenAIJudgeLLM:
    """Chat completions from an OpenAI-compatible endpoint with timeouts, retries and exponential backoff.

    Retried: timeouts, connection errors, HTTP 429 and 5xx. Not retried: other 4xx, malformed JSON.
    """

    def __init__(self, endpoint: str, model: str, api_key: str | None = None, timeout_s: float = 60.0,
                 max_retries: int = 3, backoff_s: float = 1.0, temperature: float = 0.1, max_tokens: int = 10,
                 concurrency: int = 8, sleep: Callable[[float], None] = time.sleep):
        import httpx

        self.name = model
        self.url = endpoint.rstrip("/") + "/chat/completions"
        self.shown_url = redact_credentials(self.url)  # what errors and logs name: never user:password
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.concurrency = concurrency
        self._sleep = sleep
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client(timeout=timeout_s, headers=headers)

    def complete(self, messages: list[dict]) -> str:
        import httpx

        body = {"model": self.name, "messages": messages, "temperature": self.temperature,
                "max_tokens": self.max_tokens}
        last: Exception | None = None
        for attempt in range(self.max_retries + 1):
            if attempt:
                self._sleep(self.backoff_s * 2 ** (attempt - 1))
            try:
                response = self._client.post(self.url, json=body)
            except httpx.TransportError as exc:  # timeouts, refused connections
                last = exc
                continue
            if response.status_code == 429 or response.status_code >= 500:
                last = JudgeError(f"{self.shown_url} answered HTTP {response.status_code}")
                continue
            if response.status_code >= 400:
                raise JudgeError(f"{self.shown_url} answered HTTP {response.status_code}: {response.text[:200]}")
            return _reply_text(response)
        reason = redact_credentials(str(last))  # httpx's messages may quote the URL
        raise JudgeError(f"no reply from {self.shown_url} after {self.max_retries + 1} attempts: {reason}") from last

    def complete_many(self, conversations: Sequence[list[dict]]) -> list[str | Exception]:
        def one(messages: list[dict]) -> str | Exception:
            try:
                return self.complete(messages)
            except Exception as exc:  # fail closed, per item
                return exc

        with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
            return list(pool.map(one, conversations))


def _reply_text(response: Any) -> str:
    try:
        content = response.json()["choices"][0]["message"]["content"]
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise JudgeError(f"malformed chat-completions reply: {response.text[:200]!r}") from exc
    if not isinstance(content, str):
        raise JudgeError(f"reply content is not text: {content!r}")
    return content


class LocalJudgeLLM:
    """A Hugging Face model judging through a ``PolicyBackend`` (batched generation)."""

    def __init__(self, backend: PolicyBackend, name: str, temperature: float = 0.1, max_tokens: int = 10):
        self.backend = backend
        self.name = name
        self.temperature = temperature
        self.max_tokens = max_tokens

    def complete_many(self, conversations: Sequence[list[dict]]) -> list[str | Exception]:
        from searchplay.llm.backend import SamplingParams
        from searchplay.llm.tokenizer import encode_prompt

        try:
            prompts = [encode_prompt(self.backend.tokenizer, messages) for messages in conversations]
            sampling = SamplingParams(max_new_tokens=self.max_tokens, temperature=self.temperature)
            return [c.text for c in self.backend.generate(prompts, sampling)]
        except Exception as exc:  # fail closed for the whole batch
            return [exc] * len(conversations)


def make_judge(config: JudgeConfig, backend: PolicyBackend | None = None, normalization: str = "squad",
               policy_name: str = "local-policy") -> Judge:
    """Build the judge ``params.judge`` describes; under ``backend: local`` the policy ``backend`` judges, named
    ``policy_name``; ``normalization`` is the answer scheme of the exact-match check that runs before any LLM."""
    if config.backend == "exact":
        return Judge(normalization=normalization)
    if config.backend == "openai":
        if not config.endpoint or not config.model:
            raise ValueError("judge.backend is 'openai' but judge.endpoint or judge.model is empty; set both "
                             "(e.g. judge.endpoint=http://localhost:5000/v1, judge.model=Qwen2.5-32B-Instruct)")
        llm = OpenAIJudgeLLM(config.endpoint, config.model, os.environ.get(config.api_key_env), config.timeout_s,
                             config.max_retries, config.backoff_s, config.temperature, config.max_tokens,
                             config.concurrency)
        cache = VerdictCache(config.cache_path) if config.cache_path else None
        return Judge(llm, config.prompt, cache, normalization, config.max_consecutive_errors, config.deadline_s)
    if backend is None:
        raise ValueError("judge.backend is 'local' (the policy judges) but there is no policy here to judge with")
    # No cache for local judges: the policy's weights change every step.
    return Judge(LocalJudgeLLM(backend, policy_name, config.temperature, config.max_tokens),
                 config.prompt, normalization=normalization, max_consecutive_errors=config.max_consecutive_errors,
                 deadline_s=config.deadline_s)
