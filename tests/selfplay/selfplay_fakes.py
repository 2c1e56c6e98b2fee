"""Test-only fakes for the self-play loop: a scripted policy backend and a fake search tool.

The scripted backend reads its prompt (decoded with the real SmolLM2 tokenizer) to tell the roles apart
and writes protocol-conformant turns, so the REAL agent rollout loop, rule filter, judge (exact match),
rewards, advantages and PolicyTrainer run on them. Nothing here is used outside tests.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Sequence
from pathlib import Path

from searchplay.llm.backend import Completion, SamplingParams
from searchplay.retrieval.types import Document

_SSP_ANSWER = re.compile(r"The answer I provided is: (.*?)\.\n")
_KG_ANSWER = re.compile(r'"correct_answer": "(.*?)"')
_CODE = re.compile(r"clue code (\w+)")
_TEMPLATE_HEAD = re.compile(r"of Seed(\d+)\?")  # a subgraph_record's template question ends at its head


def code_of(answer: str) -> str:
    return "c" + hashlib.sha1(answer.encode()).hexdigest()[:8]


def question_for(answer: str) -> str:
    return f"Which entity is described by clue code {code_of(answer)} in this multi hop chain of facts?"


class ScriptedBackend:
    """A PolicyBackend whose generations follow a script per role.

    Proposer: two distinct searches, then a 15-word question encoding the answer's code (passes the rule
    filter) unless ``proposer_mode`` is 'one_search' / 'leak' / 'no_question'. Verifier: answers from the
    code ('Answer: <a>'), or 'garbage' / raises when ``verifier_mode`` says so. Solver: one search, then
    an answer that is correct on every ``solver_correct_every``-th rollout, mentioning the waypoints of
    ``waypoints`` (answer -> titles) in its <think> on the other rollouts.
    """

    def __init__(self, tokenizer, answers: Sequence[str], waypoints: dict[str, list[str]] | None = None,
                 proposer_mode: str = "good", verifier_mode: str = "good", solver_correct_every: int = 3,
                 delay_s: float = 0.0):
        self.tokenizer = tokenizer
        self.by_code = {code_of(a): a for a in answers}
        self.waypoints = waypoints or {}
        self.proposer_mode, self.verifier_mode = proposer_mode, verifier_mode
        self.solver_correct_every = solver_correct_every
        self.delay_s = delay_s
        self.solver_count = 0
        self.updates = 0
        self.verifier_calls = 0

    def update_weights(self, model) -> None:
        self.updates += 1

    def release_memory(self) -> None:
        pass

    def generate(self, prompts: Sequence[Sequence[int]], sampling: SamplingParams) -> list[Completion]:
        if self.delay_s:
            time.sleep(self.delay_s)
        return [self._complete(self.tokenizer.decode(list(p)), sampling) for p in prompts]

    def _complete(self, text: str, sampling: SamplingParams) -> Completion:
        turns = text.split("<|im_start|>assistant")[-1].count("<information>")  # environment replies so far
        if "provided materials" in text:
            reply = self._verify(text)
        elif "question creator" in text:
            reply = self._propose(text, turns)
        else:
            reply = self._solve(text, turns)
        stop = next((s for s in sampling.stop if reply.endswith(s)), None)
        ids = self.tokenizer.encode(reply, add_special_tokens=False)
        if stop is None:
            ids.append(self.tokenizer.eos_token_id)
        return Completion(ids, reply, "stop" if stop else "eos", stop)

    def _propose(self, text: str, turns: int) -> str:
        match = _KG_ANSWER.search(text) or _SSP_ANSWER.search(text)
        answer = match.group(1) if match else "unknown"
        if self.proposer_mode == "no_question":
            return "<think>I cannot think of a question.</think>"
        if turns == 0:
            return f"<think>Start from {answer}.</think><search>facts about {answer}</search>"
        if turns == 1 and self.proposer_mode != "one_search":
            return "<think>Go one step back.</think><search>preceding fact of the chain</search>"
        question = question_for(answer)
        if self.proposer_mode == "leak":
            question = f"Is the answer {answer} described by clue code {code_of(answer)} in this chain?"
        return f"<think>Ready.</think><question>{question}</question>"

    def _verify(self, text: str) -> str:
        self.verifier_calls += 1
        if self.verifier_mode == "error":
            raise RuntimeError("verifier down")
        if self.verifier_mode == "garbage":
            return "I do not know."
        if self.verifier_mode == "wrong":
            return "The materials say. Answer: Atlantis"
        match = _CODE.search(text.split("Question:")[-1])
        return f"The materials name it. Answer: {self.by_code.get(match.group(1), 'none') if match else 'none'}"

    def _solve(self, text: str, turns: int) -> str:
        match = _CODE.search(text)
        answer = self.by_code.get(match.group(1), "none") if match else "none"
        if head := _TEMPLATE_HEAD.search(text):  # a template question (the kg_template control)
            match, answer = head, f"Answer{head.group(1)}"
        if turns == 0:
            return f"<think>Search the clue.</think><search>clue code {match.group(1) if match else ''}</search>"
        self.solver_count += 1
        if self.solver_count % self.solver_correct_every == 0:
            return f"<think>Found it.</think><answer>{answer}</answer>"
        titles = self.waypoints.get(answer, [])[: self.solver_count % 3]
        return f"<think>Maybe via {' and '.join(titles) or 'nothing'}.</think><answer>Atlantis</answer>"


class FakeSearchTool:
    """Three deterministic documents per query (ids derived from the query)."""

    def __init__(self):
        self.queries: list[str] = []

    def search(self, queries: Sequence[str], top_k: int = 3) -> list[list[Document]]:
        self.queries += list(queries)
        results = []
        for query in queries:
            key = hashlib.sha1(query.encode()).hexdigest()[:6]
            results.append([Document(f"{key}-{k}", f"Title {key} {k}", f"Passage {k} about {query}.", 1.0 - k / 10)
                            for k in range(top_k)])
        return results


def subgraph_record(k: int, num_nodes: int, split: str = "selfplay") -> dict:
    """A KG-contract subgraph record (3 hops, one distractor) for a made-up answer."""
    labels = [f"Seed{k}", f"Bridge{k}A", f"Bridge{k}B", f"Answer{k}"]
    path = [{"id": f"Q{k}{j}", "label": label, "description": f"node {j}"} for j, label in enumerate(labels)]
    relations = [{"id": f"P{j}", "label": f"relation {j}"} for j in range(3)]
    return {"id": f"sg-{k}", "seed_id": path[0]["id"], "answer": labels[-1], "answer_type": "entity", "path": path,
            "relations": relations, "waypoints": labels[:-1],
            "distractors": [{"divergence_index": 1, "nodes": [{"id": f"Q{k}9", "label": f"Decoy{k}",
                                                               "description": "a decoy"}],
                             "relations": [{"id": "P9", "label": "relation 9"}]}],
            "num_hops": 3, "num_nodes": num_nodes, "selector": "random", "selector_model": "", "selector_replies": [],
            "split": split}


def write_kg_pool(folder: Path, count: int = 6) -> list[dict]:
    """``subgraphs.jsonl`` sorted by num_nodes descending, as the KG stage writes it."""
    records = [subgraph_record(k, num_nodes=10 - k) for k in range(count)]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "subgraphs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return records


class TitleEmbedder:
    """Test-only passage embedder for a tiny real LanceDB index searched in ``fts`` mode (the vectors are
    never queried): a one-hot of the passage's first word in 8 dimensions."""

    name = "test-title-onehot"
    e5_prefixes = False
    dimension = 8
    max_seq_length = 64

    def encode_passages(self, passages: Sequence[str], show_progress: bool = False):
        import numpy as np

        vectors = np.zeros((len(passages), self.dimension), dtype=np.float32)
        for row, text in enumerate(passages):
            vectors[row, int(hashlib.sha1(text.split()[0].encode()).hexdigest(), 16) % self.dimension] = 1.0
        return vectors

    encode_queries = encode_passages


def write_tiny_index(folder: Path, records: list[dict]) -> Path:
    """A real LanceDB index (flat + full-text) over one passage per subgraph node; returns the index dir."""
    from searchplay.io import write_jsonl
    from searchplay.retrieval.index import build_index

    passages = [{"id": node["id"], "title": node["label"], "text": f"{node['label']} is {node['description']}."}
                for record in records for node in record["path"]]
    write_jsonl(folder / "passages.jsonl", passages)
    build_index(folder / "passages.jsonl", folder / "index", "passages", TitleEmbedder(), ann_threshold=10**6,
                fts=True, show_progress=False)
    return folder / "index"


# --- EVE ---------------------------------------------------------------------------------------------------
