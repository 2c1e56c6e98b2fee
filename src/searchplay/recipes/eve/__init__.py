"""EVE-Agent (Arai & Ichikawa 2026) as a recipe: every EVE module lives in this folder, and importing it
registers EVE into the generic registries (``searchplay.recipes.load_recipes`` does).

* ``prompts``, ``output``: the (q, a, e) Proposer, the evidence-quoting Solver and the verifier prompts, and the
  Proposer's output read off a rollout (EVE §3.1, Eq. 8-9);
* ``rewards``: R_DZ, the evidence verifier, the brevity bonus, R_pro and R_sol (Eqs. 2, 9-21);
* ``phases``: the two phases as one step function and the hand-off between them (§3.4, Algs. 1-2), with their
  per-run objects in ``objects`` (``EveObjects``, on the shared runtime's ``recipe`` slot); ``seeds``: the
  document seeds of both corpus shards; ``corpus_selector``: the corpus selector of App. F;
* ``demos``, ``validity``, ``warmstart``, ``commands``: the warm-start demos of EVE's formats, their validity
  check, the ``warmstart_eve`` stage and its ``searchplay warmstart --eve`` flag;
* ``questions``: the question pool's gate on EVE's rows.

What it registers: its params section ``eve`` (``config.EveParams``), its models' colours, the ``hrpo`` advantage
estimator, the ``eve`` variant and its Proposer prompt, the ``eve`` rewards, the ``eve`` step function
and phases (``a``, ``b``; run names ``eve_phase_a`` / ``eve``), the ``documents`` seed source, the ``eve``
warm-start (evaluated as ``warmstart_eve``) and its stage flag, the ``eve`` demo format (``eve.warmstart_demos``),
the evidence format of ``evaluate.evidence`` and the question-pool gate of source ``eve``.
"""

from __future__ import annotations

from searchplay.agent.trajectory import Trajectory
from searchplay.colors import register_colors
from searchplay.config import Params, register_section
from searchplay.eval.runner import EvidenceFormat, register_evidence_format
from searchplay.model_paths import register_warmstart
from searchplay.quality.questions import register_source_gate
from searchplay.recipes.eve import phases
from searchplay.recipes.eve.advantages import hrpo
from searchplay.recipes.eve.commands import EVE_FLAG_HELP, eve_command
from searchplay.recipes.eve.config import EveParams
from searchplay.recipes.eve.demos import EVE_ROLES, build_eve_demos
from searchplay.recipes.eve.output import model_text
from searchplay.recipes.eve.prompts import eve_proposer_messages, eve_solver_messages, extract_evidence
from searchplay.recipes.eve.questions import EVE_GATE
from searchplay.recipes.eve.rewards import proposer_eve, solver_eve
from searchplay.recipes.eve.seeds import document_seeds
from searchplay.recipes.eve.validity import eve_format_validity
from searchplay.rewards import register_proposer_reward, register_rollout_field, register_solver_reward
from searchplay.rl import register_advantage_estimator
from searchplay.selfplay.loop import register_seed_source, register_step
from searchplay.selfplay.phases import Phases, register_phases
from searchplay.selfplay.seeds import Seed
from searchplay.selfplay.variants import Variant, register_proposer_prompt, register_variant
from searchplay.warmstart.commands import WarmstartStage, register_stage
from searchplay.warmstart.formats import DemoFormat, register_format

NAME = "eve"

VARIANT = Variant("eve", seeds="documents", proposer_prompt="eve", solver_reward="eve", proposer_reward="eve",
                  proposer_advantage="hrpo", step="eve", frozen_solver=True, warmstart="eve",
                  rollout_fields=("evidence",),
                  description="EVE-Agent: (q, a, e) from source documents, R_pro with the evidence verifier and "
                              "HRPO (Phase A), then the Solver on EM + evidence F1 (Phase B) (EVE §3)")


def eve_proposer(seed: Seed) -> list[dict[str, str]]:
    """EVE Proposer: a source document and its hop count h, asking for (q, a, e) (EVE Eq. 8, Alg. 1)."""
    if seed.record is None or "document" not in seed.record:
        raise ValueError(f"seed {seed.seed_id!r} has no source document; the EVE Proposer needs document seeds")
    return eve_proposer_messages(seed.record["document"], seed.num_hops or 1, seed.record.get("task_line"))


def phase_iterations(params: Params, phase: str) -> int:
    """A phase's iterations when ``--iterations`` is not given (``eve.phase_a_iterations`` / ``_b_``)."""
    return phases.phase_a_iterations(params) if phase == "a" else phases.phase_b_iterations(params)


def proposer_documents(params: Params) -> list[Seed]:
    """The ``documents`` seed source: Phase A's source documents (the corpus's 'proposer' shard)."""
    return document_seeds(params, "proposer")


def evidence_span(trajectory: Trajectory) -> str | None:
    """The ``<evidence>`` span of the Solver's own text (EVE App. H)."""
    return extract_evidence(model_text(trajectory))


PHASES = Phases(names=("a", "b"), iterations=phase_iterations, run_name=phases.phase_run_name,
                state=phases.phase_state, finish={"a": phases.finish_phase_a}, prepare=phases.prepare_runtime,
                help="a = Phase A + the hand-off set, eve.phase_a_iterations; b = Phase B from that set, "
                     "eve.phase_b_iterations")
DEMO_FORMAT = DemoFormat(name="eve", roles=EVE_ROLES, build=build_eve_demos, validity=eve_format_validity,
                         enabled=lambda params: params.eve.warmstart_demos,
                         families={"proposer": ("proposer_eve",), "solver": ("solver_eve",),
                                   "verifier": ("verifier_eve",)})
STAGE = WarmstartStage(flag="eve", help=EVE_FLAG_HELP, steps_key="eve.warmstart_steps", run=eve_command)
EVIDENCE = EvidenceFormat(solver_messages=eve_solver_messages, span=evidence_span)

register_section("eve", EveParams)
register_colors({"warmstart_eve": "#aec7e8",  # light blue: the warm-start continued on EVE's formats
                 "eve": "#8c564b"}, phases={"eve_phase_a": "#c49c94"})  # light brown: eve's Phase A
register_proposer_prompt("eve", eve_proposer)
register_solver_reward("eve", solver_eve)
register_rollout_field("evidence", evidence_span)
register_proposer_reward("eve", proposer_eve)
register_advantage_estimator("hrpo", hrpo)
register_step("eve", phases.run_eve_step)
register_seed_source("documents", proposer_documents)
register_phases("eve", PHASES)
register_warmstart("eve", "eve.warmstart_out_dir", "searchplay warmstart --eve", model="warmstart_eve",
                   started_from="warmstart")
register_variant(VARIANT)  # last: it checks every name above
register_stage(STAGE)
register_format(DEMO_FORMAT)
register_evidence_format("eve", EVIDENCE)
register_source_gate("eve", EVE_GATE)
