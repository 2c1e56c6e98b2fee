"""EVE-Agent's rewards (Arai & Ichikawa 2026, §2-3) and the Dr. Zero terms it keeps.

The Proposer writes a question, an answer and an evidence span copied from its source document or
its search results; it is rewarded by Dr. Zero's format score and difficulty (Eqs. 2, 9), by how much
the span raises the Solver's chance of the answer (the evidence verifier, Eqs. 10-14) and by a
brevity bonus (Eq. 15), summed as Eq. 16. The Solver is rewarded for the answer and for its own
evidence's token F1 against the Proposer's (Eqs. 19-21). Pure functions over strings and counts;
``searchplay.recipes.eve.advantages.hop_grouped_advantages`` is HRPO's advantage (Eq. 5). ``proposer_eve`` and
``solver_eve`` (at the end) are these rewards in the registries' signatures (``searchplay.rewards.registry``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from searchplay.answers import exact_match, normalize_answer, token_f1
from searchplay.rewards.registry import ProposerOutcome, SolverGroup, SolverRewards

if TYPE_CHECKING:
    from searchplay.config import Params

LAMBDA_V = 0.5  # Eq. 17
LAMBDA_B = 0.1  # Eq. 17
LAMBDA_E = 0.3  # Eq. 19, App. C
L_MAX = 256  # Eq. 15, Proposer tokens
VERIFIER_SAMPLES = 5  # m, §3.1


def drzero_difficulty(k: int, n: int) -> float:
    """Dr. Zero's difficulty reward R_DZ = 1{0 < k < n} (n - k) / (n - 1) for k of n Solver answers right (Eq. 2).

    >>> drzero_difficulty(1, 5), drzero_difficulty(2, 5), drzero_difficulty(5, 5), drzero_difficulty(0, 5)
    (1.0, 0.75, 0.0, 0.0)
    """
    if n < 2 or not 0 <= k <= n:
        raise ValueError(f"drzero_difficulty: need n >= 2 and 0 <= k <= n, got k={k}, n={n}")
    return (n - k) / (n - 1) if 0 < k < n else 0.0


def drzero_difficulty_expectation(p: float, n: int) -> float:
    """phi_n(p) = n/(n-1) (1-p) (1-(1-p)^(n-1)): R_DZ's mean when k ~ Bin(n, p) (Eqs. 3-4, Lemma B.1).

    >>> round(drzero_difficulty_expectation(1 - 5 ** -0.25, 5), 4)  # the maximizer p* = 1 - n^(-1/(n-1))
    0.6687
    """
    return n / (n - 1) * (1.0 - p) * (1.0 - (1.0 - p) ** (n - 1))


def evidence_verifier(correct_with: Sequence[bool], correct_without: Sequence[bool]) -> float:
    """V-hat = (1/m) sum 1{a+ = a} - (1/m) sum 1{a- = a}: the marginal accuracy the span buys (Eqs. 10-14).

    ``correct_with``: the m single-turn, search-free answers given (q, e); ``correct_without``: the m
    given q alone, same weights (the paper's weight-swap). In [-1, 1].

    >>> evidence_verifier([True, True, True, True, False], [True, False, False, False, False])
    0.6
    """
    if not correct_with or not correct_without:
        raise ValueError("evidence_verifier: both conditions need at least one sample (paper: m = 5 each)")
    plus = sum(map(bool, correct_with)) / len(correct_with)
    minus = sum(map(bool, correct_without)) / len(correct_without)
    return round(plus - minus, 12)


def brevity_bonus(num_tokens: int, l_max: int = L_MAX) -> float:
    """B(e) = max(0, 1 - |e| / L_max), |e| in Proposer tokens (Eq. 15).

    >>> brevity_bonus(64), brevity_bonus(256), brevity_bonus(300)
    (0.75, 0.0, 0.0)
    """
    if num_tokens < 0 or l_max <= 0:
        raise ValueError(f"brevity_bonus: need num_tokens >= 0 and l_max > 0, got {num_tokens}, {l_max}")
    return max(0.0, 1.0 - num_tokens / l_max)


def eve_proposer_reward(format_score: float, difficulty: float, verifier: float, brevity: float,
                        lambda_v: float = LAMBDA_V, lambda_b: float = LAMBDA_B) -> float:
    """R_pro = 1/2 F_fmt + R_DZ + lambda_V V + lambda_B B(e) (Eqs. 16-17); (0, 0) recovers Dr. Zero (Eq. 18).

    An invalid rollout has F_fmt = 0 and gets 1/2 F_fmt = 0: pass difficulty = verifier = brevity = 0.

    >>> eve_proposer_reward(1.0, 0.75, 0.6, 0.75)  # a worked example of Eqs. 16-18
    1.625
    """
    return round(0.5 * format_score + difficulty + lambda_v * verifier + lambda_b * brevity, 12)


def eve_solver_reward(pred_answer: str | None, pred_evidence: str | None, answer: str, evidence: str,
                      lambda_e: float = LAMBDA_E) -> float:
    """R_sol = 1{EM(a-hat, a)} + lambda_E F1_tok(Norm(e-hat), Norm(e)) (Eqs. 19-21), in [0, 1 + lambda_E].

    A missing answer or evidence scores 0 on its term.

    >>> eve_solver_reward("Paris", "the capital of France is Paris", "paris", "Paris is the capital of France")
    1.3
    """
    correct = exact_match(pred_answer, answer) if pred_answer is not None else 0.0
    overlap = token_f1(pred_evidence, evidence) if pred_evidence is not None else 0.0
    return round(correct + lambda_e * overlap, 12)


def eve_valid(question: str | None, answer: str | None) -> bool:
    """The validity filter: q and a non-empty and Norm(a) not a substring of Norm(q) (§3.1, App. D).

    >>> eve_valid("Who wrote Hamlet?", "Shakespeare"), eve_valid("Which Shakespeare play is it?", "Shakespeare")
    (True, False)
    """
    q, a = (question or "").strip(), (answer or "").strip()
    return bool(q) and bool(a) and normalize_answer(a) not in normalize_answer(q)


def drzero_format_score(question: str | None, answer: str | None, assistant_turns: int, think_turns: int,
                        tool_calls: int, tool_responses: int, hops: int, source_document: str,
                        responses_text: Sequence[str] = ()) -> float:
    """F_fmt = 1/4 (1 + F_think + F_tool(h) + F_ans) in [0, 1], 0 for an invalid rollout (Eq. 9, App. D).

    F_think = T_think / max(1, T_ass). F_tool(h) = 1 if h = 1, else min((1 + T_tc)/h, 1) when the valid
    tool calls equal the returned responses (and there is one), else 0. F_ans = 1 for yes/no or a
    normalized answer of <= 5 words inside Norm(Sigma), 1/2 for 6-10 words inside it, else 0; Sigma is
    the source document plus the responses, the responses only when the tool-call condition holds.

    >>> drzero_format_score("Q?", "Paris", 2, 2, 1, 1, 2, "Paris is in France.")
    1.0
    """
    if not eve_valid(question, answer):
        return 0.0
    think = think_turns / max(1, assistant_turns)
    calls_ok = tool_calls == tool_responses and tool_calls > 0
    tool = 1.0 if hops == 1 else (min((1 + tool_calls) / hops, 1.0) if calls_ok else 0.0)
    sigma = normalize_answer(" ".join([source_document, *(responses_text if calls_ok else ())]))
    target = normalize_answer(answer or "")
    words = len(target.split())
    if target in ("yes", "no") or (words and target in sigma and words <= 5):
        answer_score = 1.0
    elif words and target in sigma and words <= 10:
        answer_score = 0.5
    else:
        answer_score = 0.0
    return 0.25 * (1.0 + think + tool + answer_score)


def is_verbatim(evidence: str | None, sources: Sequence[str], relaxed: bool = False) -> bool:
    """Is the evidence span a contiguous piece of one source (the document or a returned snippet)? (§3.1)

    Strict: whitespace collapsed on both sides, then a substring test. ``relaxed``: Norm() on both
    sides (lower case, punctuation and articles dropped). An empty span is never verbatim.

    >>> is_verbatim("capital of  France", ["Paris is the capital of France."])
    True
    >>> is_verbatim("The Capital of France", ["Paris is the capital of France."]), is_verbatim(
    ...     "The Capital of France", ["Paris is the capital of France."], relaxed=True)
    (False, True)
    """
    def squash(text: str) -> str:
        return normalize_answer(text) if relaxed else " ".join(text.split())

    span = squash(evidence or "")
    return bool(span) and any(span in squash(source) for source in sources)


# --- the registry entries (registered by searchplay.recipes.eve) ---------------------------------------


def proposer_eve(outcome: ProposerOutcome, params: Params) -> float:
    """EVE's R_pro = 1/2 F_fmt + R_DZ + lambda_V V-hat + lambda_B B(e) (EVE Eqs. 2, 9, 14-17).

    ``outcome.record`` holds what Phase A measured: ``format_score`` (F_fmt), ``verifier`` (V-hat) and
    ``evidence_tokens`` (|e|), the last two None when not measured (no evidence). Invalid rollouts get
    1/2 F_fmt (= 0). A valid one without evidence gets V = B = 0 (our rule: the paper leaves it open).
    R_DZ needs at least two Solver answers; with fewer it is 0.
    """
    format_score = float(outcome.record.get("format_score", 0.0))
    if not outcome.valid:
        return 0.5 * format_score
    cfg = params.eve
    n = len(outcome.solver_correct)
    difficulty = drzero_difficulty(sum(outcome.solver_correct), n) if n >= 2 else 0.0
    verifier, tokens = outcome.record.get("verifier"), outcome.record.get("evidence_tokens")
    measured = verifier is not None and tokens is not None
    brevity = brevity_bonus(tokens, cfg.l_max) if measured else 0.0
    return eve_proposer_reward(format_score, difficulty, verifier if measured else 0.0, brevity, cfg.lambda_v,
                               cfg.lambda_b)


def solver_eve(group: SolverGroup, params: Params) -> SolverRewards:
    """EVE's R_sol = 1{EM(a-hat, a)} + lambda_E F1(Norm(e-hat), Norm(e)) per rollout (EVE Eqs. 19-21).

    ``predictions`` are the rollouts' answers (an invalid rollout's counts as missing: R_correct = 0, the
    Search-R1 convention); each rollout's ``evidence`` (its ``<evidence>`` span, the ``evidence`` rollout field)
    is scored against the gold span ``record['evidence']``. The raw F1 is kept in ``details['evidence_f1']``.
    """
    gold = group.record.get("evidence")
    if gold is None:
        raise ValueError("the EVE Solver reward needs the question's gold evidence (record['evidence'], the "
                         "Proposer's span)")
    evidence = [rollout.get("evidence") for rollout in group.rollouts] or [None] * group.size
    answers = group.predictions or [None] * group.size
    rewards = [eve_solver_reward(a if z else None, e, group.answer, gold, params.eve.lambda_e)
               for a, e, z in zip(answers, evidence, group.valid, strict=True)]
    return SolverRewards(rewards, details={"evidence_f1": [token_f1(e, gold) if e else 0.0 for e in evidence]})
