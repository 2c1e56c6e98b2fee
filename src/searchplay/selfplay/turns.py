"""A Solver trajectory seen step by step, for step-level credit (GDCR paper Eq. 3: H = (q, tau_1, a_1, o_1, ...)).

A step is one generation turn: its thought (the turn's ``<think>`` spans) and its observation (the documents
its search returned; None for the final answer or an invalid action). ``token_turns`` maps each response
token back to its step, so a step advantage reaches exactly that step's tokens (GDCR Eq. 14).
"""

from __future__ import annotations

from searchplay.agent.protocol import extract_think
from searchplay.agent.trajectory import Trajectory


def trajectory_steps(trajectory: Trajectory) -> list[tuple[str, str | None]]:
    """(thought, observation) per turn; the observation is the titles and texts of the turn's search results."""
    steps = []
    for turn in trajectory.turns:
        observation = None
        if turn.action == "search":
            observation = "\n".join(f"{doc.title}\n{doc.text}" for doc in turn.documents)
        steps.append((extract_think(turn.text), observation))
    return steps


def token_turns(trajectory: Trajectory) -> list[int]:
    """The turn index of every response token (a turn's environment reply counts as its own, masked anyway)."""
    owners = [-1] * len(trajectory.response_ids)
    for index, turn in enumerate(trajectory.turns):
        end = turn.env_end if turn.env_end is not None else turn.end
        owners[turn.start:end] = [index] * (end - turn.start)
    return owners
