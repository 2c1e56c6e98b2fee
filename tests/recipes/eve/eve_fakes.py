"""Test-only fakes for the EVE recipe: a corpus of one-fact passages and a scripted policy backend that speaks
EVE's prompts (the (q, a, e) Proposer, the verifier, the answer-only and evidence-quoting Solvers).

Like ``tests.selfplay.selfplay_fakes``, it reads its prompt with the real SmolLM2 tokenizer, so the REAL rollout
loop, filters, rewards, advantages and trainer run on it. Nothing here is used outside tests.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path

from searchplay.llm.backend import Completion, SamplingParams

_EVE_DOCUMENT = re.compile(r"\(Title: (.*?)\)\n\1 is located in (.*?)\.")
_EVE_HOPS = re.compile(r"n = (\d+) hops")
_EVE_QUESTION = re.compile(r"In which place does the landmark called (.*?) stand today\?")


def eve_passages(count: int = 40) -> list[dict]:
    """Corpus passages with one fact each: '<Title> is located in <Place>.'"""
    return [{"id": str(k), "title": f"Landmark{k}", "text": f"Landmark{k} is located in Town{k}. It is old."}
            for k in range(count)]


def write_eve_corpus(path: Path, count: int = 40) -> list[dict]:
    passages = eve_passages(count)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(p) + "\n" for p in passages))
    return passages


class EveScriptedBackend:
    """A PolicyBackend for the EVE variant's prompts (test only).

    Proposer: h - 1 searches, then ``<answer>`` (the document's place), ``<evidence>`` (the fact, verbatim
    unless ``evidence_mode`` is 'paraphrase' or 'none') and ``<question>``. Verifier: right with the evidence,
    right without it on every ``memorized_every``-th call. Solver (answer-only and EVE prompts): one search,
    then an answer right on every ``solver_correct_every``-th rollout; the EVE Solver also quotes evidence.
    """

    def __init__(self, tokenizer, evidence_mode: str = "verbatim", solver_correct_every: int = 2,
                 memorized_every: int = 3):
        self.tokenizer = tokenizer
        self.evidence_mode = evidence_mode
        self.solver_correct_every, self.memorized_every = solver_correct_every, memorized_every
        self.solver_count = self.verifier_count = self.updates = 0
        self.places: dict[str, str] = {}

    def update_weights(self, model) -> None:
        self.updates += 1

    def release_memory(self) -> None:
        pass

    def generate(self, prompts: Sequence[Sequence[int]], sampling: SamplingParams) -> list[Completion]:
        return [self._complete(self.tokenizer.decode(list(p))) for p in prompts]

    def _complete(self, text: str) -> Completion:
        turns = text.split("<|im_start|>assistant")[-1].count("<information>")
        if "source document:" in text:
            reply = self._propose(text, turns)
        elif "Do not search." in text:
            reply = self._verify(text)
        else:
            reply = self._solve(text, turns, evidence="copy the passage text" in text)
        ids = self.tokenizer.encode(reply, add_special_tokens=False)
        stop = next((s for s in ("</search>", "</question>", "</answer>") if reply.endswith(s)), None)
        if stop is None:
            ids.append(self.tokenizer.eos_token_id)
        return Completion(ids, reply, "stop" if stop else "eos", stop)

    def _propose(self, text: str, turns: int) -> str:
        title, place = _EVE_DOCUMENT.search(text).groups()
        self.places[title] = place
        hops = int(_EVE_HOPS.search(text).group(1))
        if turns < hops - 1:
            return f"<think>Hop {turns + 1} of {hops}.</think><search>{title} history part {turns}</search>"
        evidence = {"verbatim": f"{title} is located in {place}.", "paraphrase": f"{title} sits in {place} now",
                    "none": ""}[self.evidence_mode]
        block = f"<evidence>{evidence}</evidence>" if evidence else ""
        return (f"<think>Ready.</think><answer>{place}</answer>{block}"
                f"<question>In which place does the landmark called {title} stand today?</question>")

    def _verify(self, text: str) -> str:
        self.verifier_count += 1
        title = _EVE_QUESTION.search(text).group(1)
        if "Evidence:" in text or self.verifier_count % self.memorized_every == 0:
            return f"<answer>{self.places.get(title, 'nowhere')}</answer>"
        return "<answer>Atlantis</answer>"

    def _solve(self, text: str, turns: int, evidence: bool) -> str:
        match = _EVE_QUESTION.search(text)
        title = match.group(1) if match else "none"
        if turns == 0:
            return f"<think>Search it.</think><search>{title} location</search>"
        self.solver_count += 1
        right = self.solver_count % self.solver_correct_every == 0
        answer = self.places.get(title, "nowhere") if right else "Atlantis"
        quote = f"<evidence>Passage 0 about {title} location.</evidence>" if evidence else ""
        return f"<think>Found.</think>{quote}<answer>{answer}</answer>"
