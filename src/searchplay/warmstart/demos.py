"""Synthetic demos for every role self-play uses, built from the warm-start split's KG subgraphs.

A demo is what a rollout of that role would hold if the model already followed the format: the
exact self-play prompt (chat template, tags), the model's turns, and the environment's
``<information>`` blocks from REAL searches of the built index. Each piece is tokenized on its own,
as the rollout loop does (``searchplay.agent.rollout``): prompt and information ids are masked out
of the loss, only the model's own ids are trained.

Roles (``ROLES``): the KG Proposer (subgraph prompt, variants kg/kg_wcr), the SSP Proposer
(answer-only prompt, variant ssp), the Solver (multi-turn search, then ``<answer>``) and the RAG
verifier (materials -> short reasoning -> "Answer: a*" -> end of turn). Texts are composed from the
path with ``searchplay.templates``; a Proposer demo whose question fails the self-play rule filter is
dropped, so no demo teaches a format that still scores zero.

The SSP Proposer sees only the answer, so its demo works backwards from it as SSP App. D's process
does, one grounded step: search the answer, pick an entity the results name that a KG edge links to
the answer (the "Associated Concept"), check that edge with a second search, and ask for the answer
through it (``ssp_question``). Its demos never ask for a chain the prompt does not show: measured,
a warm-start that did taught one fixed question whatever the answer, and the Solver never solved one.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from searchplay.agent.prompts import solver_messages
from searchplay.agent.proposer_prompts import kg_proposer_messages, rag_verification_messages, ssp_proposer_messages
from searchplay.agent.protocol import information_block
from searchplay.agent.trajectory import Trajectory, Turn
from searchplay.question_rules import FilterRules, answer_in_question, rule_filter
from searchplay.retrieval.types import Document
from searchplay.templates import entity_name, relation_phrase, template_question

ROLES: tuple[str, ...] = ("proposer_kg", "proposer_ssp", "solver", "verifier")

Search = Callable[[list[str]], list[list[Document]]]  # queries -> top-k documents per query


@dataclass
class Segment:
    """Token ids tokenized on their own, and whether the loss covers them (the model wrote them)."""

    ids: list[int]
    trained: bool


@dataclass
class Demo:
    role: str  # one of ROLES
    subgraph_id: str
    segments: list[Segment] = field(default_factory=list)

    @property
    def input_ids(self) -> list[int]:
        return [i for s in self.segments for i in s.ids]

    @property
    def loss_mask(self) -> list[int]:
        return [int(s.trained) for s in self.segments for _ in s.ids]

    @property
    def num_tokens(self) -> int:
        return sum(len(s.ids) for s in self.segments)

    @property
    def num_trained(self) -> int:
        return sum(len(s.ids) for s in self.segments if s.trained)


@dataclass(frozen=True)
class Hop:
    """One edge of the gold chain, phrased: ``phrase`` names the tail from the head, ``query`` searches it."""

    head: str
    tail: str
    phrase: str
    query: str


def hops(record: dict[str, Any]) -> list[Hop]:
    """The gold chain of a subgraph record as phrased hops (``searchplay.templates`` phrasing).

    >>> [h.query for h in hops({"path": [{"label": "Ravenna"}, {"label": "Italy"}, {"label": "Europe"}],
    ...                         "relations": [{"label": "country"}, {"label": "continent"}]})]
    ['country of Ravenna', 'continent of Italy']
    """
    labels = [entity_name(str(node["label"])) for node in record["path"]]
    out = []
    for k, relation in enumerate(record["relations"]):
        phrase = relation_phrase(str(relation["label"]), labels[k])
        query = phrase.split(" ", 1)[1] if phrase.split(" ", 1)[0] in ("the", "a", "an") else phrase
        out.append(Hop(labels[k], labels[k + 1], phrase, query))
    return out


def prefix_record(record: dict[str, Any], edges: int) -> dict[str, Any]:
    """The record cut to its first ``edges`` edges (path, relations), for the template question of a prefix."""
    return {**record, "path": record["path"][:edges + 1], "relations": record["relations"][:edges],
            "answer": record["path"][edges]["label"]}


def grounded_prefix(chain: list[Hop], found: dict[str, list[Document]], wanted: int) -> int:
    """How many of the chain's first ``wanted`` hops a Solver can follow: hop k's search results name its tail
    (which the next hop's query then names). 0: not even the first hop.

    >>> chain = hops({"path": [{"label": x} for x in "ABC"], "relations": [{"label": "r"}] * 2})
    >>> found = {"r of A": [Document("1", "A", "The r of A is B.")], "r of B": [Document("2", "B", "nothing")]}
    >>> grounded_prefix(chain, found, 2), grounded_prefix(chain, found, 1)
    (1, 1)
    """
    used = 0
    for hop in chain[:wanted]:
        if not names_answer(found.get(hop.query, []), hop.tail):
            break
        used += 1
    return used


def names_answer(documents: Sequence[Document], answer: str) -> bool:
    """True if a retrieved document's title or text contains the answer (case-insensitive).

    Solver and verifier demos answer from what they were shown: a demo whose documents never name the
    answer would teach the model to produce answers from nowhere (measured: exactly-wrong KG answers).
    """
    needle = answer.casefold()
    return any(needle in f"{d.title} {d.text}".casefold() for d in documents)


def edges_into(records: Sequence[dict[str, Any]]) -> dict[str, list[tuple[str, str]]]:
    """Per node name, the (head name, relation label) edges of the records' gold chains that end in it.

    >>> edges_into([{"path": [{"label": "Lima"}, {"label": "Peru"}], "relations": [{"label": "capital of"}]}])
    {'Peru': [('Lima', 'capital of')]}
    """
    into: dict[str, list[tuple[str, str]]] = {}
    for record in records:
        names = [entity_name(str(node["label"])) for node in record["path"]]
        for k, relation in enumerate(record["relations"]):
            edge = (names[k], str(relation["label"]))
            if names[k] != names[k + 1] and edge not in into.setdefault(names[k + 1], []):
                into[names[k + 1]].append(edge)
    return into


def ssp_question(head: str, relation: str, description: str = "") -> str:
    """The SSP demo's question: the answer asked for through one edge, with its KG description as a clue.

    >>> ssp_question("Romania", "official language", "language")
    'What is the language that is the official language of Romania?'
    """
    phrase = relation_phrase(relation, head)
    return f"What is the {description.strip()} that is {phrase}?" if description.strip() else f"What is {phrase}?"


@dataclass(frozen=True)
class Backstep:
    """An SSP demo's plan: search the answer, find ``hop.head`` named there, check ``hop``, ask ``question``."""

    hop: Hop
    question: str


def one_hop(head: str, relation: str, tail: str) -> Hop:
    """The single edge head -relation-> tail, phrased as ``hops`` phrases a chain's edges."""
    return hops({"path": [{"label": head}, {"label": tail}], "relations": [{"label": relation}]})[0]


def searched_hops(chain: list[Hop], max_searches: int) -> dict[str, list[Hop]]:
    """Which hops each role's demo searches, at most ``max_searches``, always ending with the answer's hop.

    The Proposer knows the whole chain (its prompt holds it) and searches the LAST hops, so its
    documents name the answer and the RAG verifier, reading them, can find it. The Solver starts from
    the question's seed: its first hops, then the last (the hop that names the answer).

    >>> chain = hops({"path": [{"label": x} for x in "ABCDE"], "relations": [{"label": "r"}] * 4})
    >>> {role: [h.head for h in searched] for role, searched in searched_hops(chain, 2).items()}
    {'proposer': ['C', 'D'], 'solver': ['A', 'D']}
    """
    count = max(1, min(max_searches, len(chain)))
    return {"proposer": chain[-count:], "solver": [*chain[:count - 1], chain[-1]]}


# --- the model's turns (pure text) -----------------------------------------------------------------------


def search_turn(chain: list[Hop], k: int) -> str:
    """The k-th searching turn: reason about what is known so far, then search the next hop."""
    if k == 0:
        thought = f"I need {chain[0].phrase} first."
    else:
        thought = f"The results say {chain[k - 1].phrase} is {chain[k - 1].tail}. Next I need {chain[k].phrase}."
    return f"<think> {thought} </think>\n<search> {chain[k].query} </search>"


# Final turns name the last hop in words, not the chain as "A -> B -> C": measured, a 135M model
# trained on arrow chains loops on them ("Canada -> Canada -> ...") until its token budget runs out.


def solver_final_turn(chain: list[Hop], answer: str) -> str:
    return f"<think> The results say {chain[-1].phrase} is {answer}. </think>\n<answer> {answer} </answer>"


def proposer_final_turn(chain: list[Hop], question: str) -> str:
    return (f"<think> The chain starts at {chain[0].head} and ends at {chain[-1].phrase}. I ask for it without "
            f"naming it or the entities between. </think>\n<question> {question} </question>")


def ssp_turns(answer: str, step: Backstep) -> list[str]:
    """The SSP Proposer's three turns: search the answer, check the associated concept, ask."""
    return [f"<think> The answer is {answer}. I search it to find an associated concept. </think>\n"
            f"<search> {answer} </search>",
            f"<think> The results name {step.hop.head}, and {step.hop.phrase} is {answer}. I check that fact. "
            f"</think>\n<search> {step.hop.query} </search>",
            f"<think> The results confirm that {step.hop.phrase} is {answer}. I ask for it without naming it. "
            f"</think>\n<question> {step.question} </question>"]


def verifier_reply(chain: list[Hop], answer: str) -> str:
    """SSP's RAG Solver reply: reasoning within 50 words, then 'Answer:' (SSP App. D)."""
    return f"The question asks for {chain[-1].phrase}, and the materials name it. Answer: {answer}"


# --- building ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DemoBuilder:
    """Turns subgraph records into demos with the self-play prompts, the real search tool and the tokenizer."""

    tokenizer: Any
    encode_prompt: Callable[[list[dict]], list[int]]  # chat messages -> prompt ids (the self-play encoder)
    search: Search
    format_documents: Callable[[Sequence[Document]], str]
    max_searches: int = 2  # searches per Proposer demo, at most (the rollout needs one more turn to answer)
    solver_demos: str = "grounded"  # or "first_last" (warmstart.solver_demos)
    solver_max_hops: int = 2  # grounded Solver demos ask 1..this edges
    rules: FilterRules = field(default_factory=FilterRules)
    noisy_docs: int = 4  # verifier materials: own documents plus this many from other demos (SSP §3.3)
    question_format: str = "plain"  # the Solver prompt's question, as self-play writes it (agent.question_format)
    information_format: str = "ssp"  # the <information> block, as self-play writes it (agent.information_format)

    def encode_text(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def build(self, records: list[dict[str, Any]], roles: Sequence[str], rng: random.Random,
              pool: Sequence[dict[str, Any]] | None = None) -> tuple[list[Demo], Counter]:
        """Demos of ``roles`` for each record (one per role per record); returns them and the drop reasons.

        ``pool``: the records whose gold-chain edges the SSP demos may use as associated concepts
        (default: ``records``).
        """
        plans = [searched_hops(hops(r), self.max_searches) for r in records]
        queries = {hop.query for plan in plans for searched in plan.values() for hop in searched}
        if "solver" in roles and self.solver_demos == "grounded":
            queries |= {hop.query for r in records for hop in hops(r)[:self.solver_max_hops]}
        queries = sorted(queries)
        found = dict(zip(queries, self.search(queries), strict=True)) if queries else {}
        backsteps = self.backsteps(records, pool or records, rng) if "proposer_ssp" in roles else {}
        demos, dropped = [], Counter()
        for index, record in enumerate(records):
            full_chain = hops(record)
            question = template_question(record)
            proposer = plans[index]["proposer"]
            proposer_docs = [found[hop.query] for hop in proposer]
            for role in roles:
                if role == "proposer_ssp":
                    demo = self.ssp_demo(record, backsteps.get(index), dropped)
                    if demo is not None:
                        demos.append(demo)
                    continue
                if role == "proposer_kg":
                    reason = self.proposer_reason(proposer, proposer_docs, question, str(record["answer"]))
                    if reason is not None:
                        dropped[f"{role}:{reason}"] += 1
                        continue
                if role == "solver" and self.solver_demos == "grounded":
                    demo = self.grounded_solver_demo(record, found, rng, dropped)
                    if demo is not None:
                        demos.append(demo)
                    continue
                searched = plans[index]["solver" if role == "solver" else "proposer"]
                if role in ("solver", "verifier") and not names_answer(
                        [d for h in searched for d in found[h.query]], str(record["answer"])):
                    dropped[f"{role}:answer_not_in_documents"] += 1
                    continue
                others = [d for j, plan in enumerate(plans) if j != index for hop in plan["proposer"]
                          for d in found[hop.query]]
                demos.append(self.demo(role, record, full_chain, searched, [found[h.query] for h in searched],
                                       question, others, rng))
        return demos, dropped

    def grounded_solver_demo(self, record: dict[str, Any], found: dict[str, list[Document]], rng: random.Random,
                             dropped: Counter) -> Demo | None:
        """A Solver demo on a prefix of the path: 1..``solver_max_hops`` edges (uniform), searched in order, so
        every query names the question's entity or a tail the last results named; the answer is the last
        searched hop's tail. None (reason counted) when the first hop's results do not name its tail, or when
        the question holds its answer (self-play's rule (4), ``answer_in_question``)."""
        chain = hops(record)
        wanted = rng.randint(1, min(self.solver_max_hops, len(chain)))
        used = grounded_prefix(chain, found, wanted)
        if used == 0:
            dropped["solver:first_hop_not_in_documents"] += 1
            return None
        prefix = prefix_record(record, used)
        question = template_question(prefix)
        if answer_in_question(str(prefix["answer"]), question):
            dropped["solver:answer_in_question"] += 1  # Boston University -> Boston: a demo of copying
            return None
        return self.demo("solver", prefix, hops(prefix), chain[:used], [found[h.query] for h in chain[:used]],
                         question, [], rng)

    def backsteps(self, records: list[dict[str, Any]], pool: Sequence[dict[str, Any]],
                  rng: random.Random) -> dict[int, tuple[Backstep, list[list[Document]]]]:
        """Per record index, an SSP demo's plan and its two searches' documents (absent: nothing grounded).

        Candidates are the pool's edges into the answer whose head the answer's search results name;
        the record's own last hop comes first, the rest in a seeded order. The first candidate whose
        check search names the answer wins.
        """
        into = edges_into(pool)
        answers = sorted({entity_name(str(r["answer"])) for r in records})
        answer_docs = dict(zip(answers, self.search(answers), strict=True)) if answers else {}
        candidates: dict[int, list[tuple[Hop, str]]] = {}  # (hop into the answer, relation label)
        for index, record in enumerate(records):
            answer = entity_name(str(record["answer"]))
            own = (hops(record)[-1].head, str(record["relations"][-1]["label"]))
            others = [edge for edge in into.get(answer, []) if edge != own]
            rng.shuffle(others)
            text = " ".join(f"{d.title} {d.text}" for d in answer_docs[answer]).casefold()
            candidates[index] = [(one_hop(head, label, answer), label) for head, label in [own, *others]
                                 if head.casefold() in text]
        queries = sorted({hop.query for edges in candidates.values() for hop, _ in edges})
        found = dict(zip(queries, self.search(queries), strict=True)) if queries else {}
        plans = {}
        for index, record in enumerate(records):
            answer = entity_name(str(record["answer"]))
            description = str(record["path"][-1].get("description") or "")
            for hop, label in candidates[index]:
                if names_answer(found[hop.query], answer):
                    plans[index] = (Backstep(hop, ssp_question(hop.head, label, description)),
                                    [answer_docs[answer], found[hop.query]])
                    break
        return plans

    def ssp_demo(self, record: dict[str, Any], plan: tuple[Backstep, list[list[Document]]] | None,
                 dropped: Counter) -> Demo | None:
        """The SSP Proposer's demo (answer-only prompt), or None with the reason counted in ``dropped``."""
        if plan is None:
            dropped["proposer_ssp:no_grounded_edge"] += 1
            return None
        step, docs = plan
        answer = str(record["answer"])
        queries = [entity_name(answer), step.hop.query]
        reason = self.filter_reason(queries, docs, step.question, answer)
        if reason is not None:
            dropped[f"proposer_ssp:{reason}"] += 1
            return None
        demo = Demo("proposer_ssp", str(record["id"]))
        messages = ssp_proposer_messages(answer, int(record.get("num_hops") or len(record["relations"])))
        demo.segments.append(Segment(self.encode_prompt(messages), False))
        turns = ssp_turns(entity_name(answer), step)
        for turn, block in zip(turns[:-1], docs, strict=True):
            demo.segments.append(Segment(self.encode_text(turn), True))
            demo.segments.append(Segment(self.encode_text(
                information_block(self.format_documents(block), self.information_format)), False))
        demo.segments.append(Segment(self.encode_text(turns[-1]), True))
        return demo

    def proposer_reason(self, searched: list[Hop], docs: list[list[Document]], question: str,
                        answer: str) -> str | None:
        """The self-play rule filter's verdict on the demo's question and searches (None: it passes)."""
        return self.filter_reason([hop.query for hop in searched], docs, question, answer)

    def filter_reason(self, queries: list[str], docs: list[list[Document]], question: str,
                      answer: str) -> str | None:
        turns = [Turn(text="", start=0, end=0, action="search", search_queries=[query], documents=list(block))
                 for query, block in zip(queries, docs, strict=True)]
        trajectory = Trajectory(role="proposer", prompt_ids=[], response_ids=[], loss_mask=[], turns=turns,
                                question=question)
        return rule_filter(trajectory, answer, self.rules)

    def demo(self, role: str, record: dict[str, Any], chain: list[Hop], searched: list[Hop],
             docs: list[list[Document]], question: str, other_docs: list[Document], rng: random.Random) -> Demo:
        answer = str(record["answer"])
        demo = Demo(role, str(record["id"]))
        if role == "verifier":
            own = list({d.id: d for block in docs for d in block}.values())
            pool = list({d.id: d for d in other_docs if d.id not in {o.id for o in own}}.values())
            materials = own + rng.sample(pool, min(self.noisy_docs, len(pool)))
            rng.shuffle(materials)
            prompt = rag_verification_messages(self.format_documents(materials), question)
            demo.segments.append(Segment(self.encode_prompt(prompt), False))
            demo.segments.append(Segment([*self.encode_text(verifier_reply(chain, answer)),
                                          self.tokenizer.eos_token_id], True))
            return demo
        messages = solver_messages(question, self.question_format) if role == "solver" else kg_proposer_messages(record)
        demo.segments.append(Segment(self.encode_prompt(messages), False))
        for k, block in enumerate(docs):
            demo.segments.append(Segment(self.encode_text(search_turn(searched, k)), True))
            reply = information_block(self.format_documents(block), self.information_format)
            demo.segments.append(Segment(self.encode_text(reply), False))
        final = solver_final_turn(chain, answer) if role == "solver" else proposer_final_turn(chain, question)
        demo.segments.append(Segment(self.encode_text(final), True))
        return demo


# --- which subgraphs ---------------------------------------------------------------------------------------


def partition(records: list[dict[str, Any]], check_count: int, max_per_answer: int, limit: int,
              rng: random.Random) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(demo subgraphs, held-out check subgraphs) from the warm-start split, disjoint.

    The check set is drawn first (``check_count``, never trained on); the demo set keeps at most
    ``max_per_answer`` subgraphs per answer (a pool where one answer is a sixth of all paths would
    otherwise teach that answer) and at most ``limit`` in all.
    """
    shuffled = sorted(records, key=lambda r: str(r["id"]))
    rng.shuffle(shuffled)
    check, rest = shuffled[:check_count], shuffled[check_count:]
    per_answer: Counter = Counter()
    demos = []
    for record in rest:
        if per_answer[str(record["answer"])] >= max_per_answer:
            continue
        per_answer[str(record["answer"])] += 1
        demos.append(record)
        if len(demos) >= limit:
            break
    return demos, check
