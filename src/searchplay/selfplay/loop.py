"""The self-play training run: seeds -> N steps -> a checkpoint, an MLflow step and the reports per step.

``run_selfplay(params, variant, iterations, resume)`` is what ``searchplay selfplay`` calls. It loads the
seeds for the variant, builds the runtime (policy backend, verifier, search tool, judge, trainer) unless
one is injected, restores the newest checkpoint on ``resume``, and after EVERY iteration writes a
checkpoint atomically (the resume state, in ``<checkpoint_dir>/<run>/resume/``), logs the iteration's metrics to
MLflow (step = iteration) with decoded sample trajectories as an artifact, and rewrites
``reports/selfplay/<variant>/metrics.json``, ``history.csv`` and ``accuracy.png``. At its end the run exports its
model once, as a Hugging Face folder (``<checkpoint_dir>/<run>/model/``): what evaluation reads.

A resume continues the checkpoint's MLflow run and logs the iterations it lacks (a kill between the
checkpoint and the MLflow log); the checkpoint also holds its iteration's questions, so the question pool
gets back the rows such a kill lost.

Under ``accelerate launch`` every process runs this loop on the same data (``searchplay.selfplay.distributed``);
the main process alone writes checkpoints' state, reports and MLflow, the trainer's save is collective.
"""

from __future__ import annotations

import csv
import io
import logging
import math
import random
import shutil
import time
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path
from typing import Any

from searchplay.config import Params
from searchplay.io import InputError, atomic_write, write_json
from searchplay.model_paths import MODEL_DIR, initial_policy, resume_dir, selfplay_run_dir
from searchplay.selfplay import metrics as m
from searchplay.selfplay import phases
from searchplay.selfplay.accuracy_plot import ACCURACY_PNG, draw_fresh_accuracy
from searchplay.selfplay.checkpoint import CheckpointManager, read_state
from searchplay.selfplay.distributed import Processes, sharded, sharded_judge
from searchplay.selfplay.inputs import INPUTS_FILE, changed_inputs, params_digest, run_inputs, write_inputs
from searchplay.selfplay.replay import ReplayBuffer
from searchplay.selfplay.seeding import seed_sampling
from searchplay.selfplay.seeds import (
    Seed,
    SeedCursor,
    distinct_answers,
    load_answer_seeds,
    load_kg_seeds,
    shuffled,
)
from searchplay.selfplay.step import LoopState, Runtime, StepResult, evaluated_change_share, fixed_role, run_step
from searchplay.selfplay.variants import LOOP_REGISTRIES, Variant, get_variant
from searchplay.timings import is_timing, split_timings, timing_rows, write_timings

log = logging.getLogger(__name__)

STATE_VERSION = 1
TRAINER_DIR = "trainer"  # inside each checkpoint: PolicyTrainer.save (DCP weights + optimizer, scheduler, RNG)

StepFunction = Callable[[Runtime, Variant, Params, LoopState], StepResult]


STEP_FUNCTIONS: dict[str, StepFunction] = {"joint": run_step}  # Variant.step -> one iteration; recipes add theirs


def register_step(name: str, step: StepFunction) -> None:
    """Add a step function under ``name`` (``Variant.step``; a recipe's, at import)."""
    if STEP_FUNCTIONS.get(name, step) is not step:
        raise ValueError(f"the step {name!r} is already registered")
    STEP_FUNCTIONS[name] = step


def step_function(variant: Variant) -> StepFunction:
    """``Variant.step`` -> one self-play iteration: SSP Alg. 1 (both roles every step), or a recipe's."""
    if variant.step not in STEP_FUNCTIONS:
        raise SelfplayError(f"variant {variant.name!r} names the step {variant.step!r}; known: "
                            f"{sorted(STEP_FUNCTIONS)}")
    return STEP_FUNCTIONS[variant.step]


class SelfplayError(InputError, RuntimeError):
    """A run that cannot start or continue; the message says why and what to do."""


# --- seeds and runtime -----------------------------------------------------------------------------------


def kg_seeds(params: Params) -> list[Seed]:
    """KG subgraph records (curriculum order, evaluation held-out removed)."""
    return load_kg_seeds(params.kg.out_dir, split="selfplay")


def answer_seeds(params: Params) -> list[Seed]:
    """SSP answers from ``ssp.seed_answers`` (else the KG pool's distinct answers), in a seeded random order
    (docs/decisions/selfplay.md)."""
    if params.ssp.seed_answers:
        answers = load_answer_seeds(params.ssp.seed_answers, params.ssp.search_turns)
    else:
        answers = distinct_answers(load_kg_seeds(params.kg.out_dir, split="selfplay"))
    return shuffled(answers, params.selfplay.seed)


SeedLoader = Callable[[Params], list[Seed]]
SEED_SOURCES: dict[str, SeedLoader] = {"kg": kg_seeds, "answers": answer_seeds}  # Variant.seeds -> loader
LOOP_REGISTRIES.update({"seeds": lambda: SEED_SOURCES, "step": lambda: STEP_FUNCTIONS})  # register_variant checks


def register_seed_source(name: str, loader: SeedLoader) -> None:
    """Add a seed loader under ``name`` (``Variant.seeds``; a recipe's, at import)."""
    if SEED_SOURCES.get(name, loader) is not loader:
        raise ValueError(f"the seed source {name!r} is already registered")
    SEED_SOURCES[name] = loader


def load_seeds(params: Params, variant: Variant) -> list[Seed]:
    """The variant's seeds, from its registered source (``Variant.seeds``): KG subgraph records, SSP answers,
    or a recipe's."""
    if variant.seeds not in SEED_SOURCES:
        raise SelfplayError(f"variant {variant.name!r} names the seed source {variant.seeds!r}; known: "
                            f"{sorted(SEED_SOURCES)}")
    return SEED_SOURCES[variant.seeds](params)


def build_runtime(params: Params, variant: Variant | None = None) -> Runtime:
    """The real runtime: trainer (policy + reference), rollout backend, verifier, search tool, judge; for a
    variant with ``frozen_solver`` or a fixed opponent (``selfplay.trained_roles``) also a frozen backend of the
    initial weights, and a phased variant's own per-run objects (its ``prepare`` hook in
    ``searchplay.selfplay.phases`` sets ``runtime.recipe``)."""
    from dataclasses import replace

    from searchplay.agent.rollout import RolloutConfig, run_rollouts
    from searchplay.llm import load_backend
    from searchplay.llm.judge import make_judge
    from searchplay.llm.tokenizer import encode_prompt
    from searchplay.retrieval import format_documents, load_search_tool
    from searchplay.rl import PolicyTrainer

    # the variant's warm-start checkpoint, or models.policy with warmstart.enabled=false
    start = initial_policy(params, variant.warmstart if variant is not None else "shared")
    log.info("self-play starts from %s", start)
    trainer = PolicyTrainer(start, params)
    processes = Processes.from_accelerator(trainer.accelerator)  # several under `accelerate launch`
    share = engine_share(params, variant)
    backend = sharded(load_backend(start, params, **share), processes)
    backend.update_weights(trainer.model)
    # 'policy': the learning policy answers (SSP §3.2); 'frozen': a copy of the initial weights (SSP code).
    frozen_kwargs = frozen_backend_kwargs(params, trainer.accelerator.device.type) | share
    verifier = backend if params.selfplay.verifier == "policy" else sharded(load_backend(start, params,
                                                                                         **frozen_kwargs), processes)
    judge = sharded_judge(make_judge(params.judge, backend=backend if params.judge.backend == "local" else None),
                          processes)
    search_tool = load_search_tool(params)
    solver_config = RolloutConfig.from_params(params)
    proposer_config = replace(solver_config, temperature=params.selfplay.proposer_temperature)
    top_k = params.search.top_k

    def rollouts(prompt_ids: list[list[int]], role: str, config: Any) -> list[Any]:
        return run_rollouts(backend, search_tool, prompt_ids, role, config, top_k=top_k)

    def fmt(docs: Any) -> str:
        return format_documents(docs, backend.tokenizer, params.search.max_doc_tokens)

    runtime = Runtime(backend=backend, verifier=verifier, judge=judge, trainer=trainer, rollouts=rollouts,
                      solver_config=solver_config, proposer_config=proposer_config,
                      encode=lambda messages: encode_prompt(backend.tokenizer, messages), format_documents=fmt)
    runtime.fixed_role = fixed_role(params.selfplay.trained_roles)
    if variant is not None and (variant.frozen_solver or runtime.fixed_role is not None):
        frozen = verifier if verifier is not backend else sharded(load_backend(start, params, **frozen_kwargs),
                                                                  processes)
        runtime.frozen = frozen
        runtime.frozen_rollouts = lambda ids, role, config: run_rollouts(frozen, search_tool, ids, role, config,
                                                                         top_k=top_k)
    phased = phases.phases_of(variant) if variant is not None else None
    if phased is not None and phased.prepare is not None:
        phased.prepare(runtime, params, start, variant)  # e.g. a hand-off's hooks, in runtime.recipe
    return runtime


def engine_count(params: Params, variant: Variant | None) -> int:
    """Generation engines one process builds: the policy's, a frozen verifier's, and a frozen Solver's or fixed
    opponent's (which shares the frozen verifier's engine when there is one)."""
    frozen_verifier = params.selfplay.verifier != "policy"
    frozen_player = variant is not None and (variant.frozen_solver or fixed_role(params.selfplay.trained_roles)
                                             is not None)
    return 1 + int(frozen_verifier or frozen_player)


def engine_share(params: Params, variant: Variant | None) -> dict[str, Any]:
    """vLLM: each engine of this process gets an equal part of ``agent.vllm_memory_share``, so that together
    they never ask for more than that fraction of one device (a frozen copy needs its own weights, and vLLM
    holds them in an engine of its own)."""
    from searchplay.llm import backend_kind

    if backend_kind(params) != "vllm":
        return {}
    return {"memory_share": params.agent.vllm_memory_share / engine_count(params, variant)}


def frozen_backend_kwargs(params: Params, device: str) -> dict[str, Any]:
    """How a backend of the frozen start weights (a frozen Solver or opponent, a frozen verifier) is built: with
    ``selfplay.reference_on_disk`` (on a CPU under 'auto'), its weights are read from the start checkpoint for each
    generation and dropped after it, as the trainer's KL reference is for each update (the same weights each time;
    0.5 GiB less resident at 135M in fp32 between its calls). A vLLM engine of them does not sleep: sleep mode
    takes CUDA's one CuMem pool of the process, which the policy's engine holds (``VllmBackend``'s ``sleep``)."""
    from searchplay.llm import backend_kind
    from searchplay.moments import memory_saver_enabled

    kind = backend_kind(params)
    if kind == "vllm":
        return {"sleep": False}
    on_disk = memory_saver_enabled(params.selfplay.reference_on_disk, device)
    return {"weights_on_disk": True} if on_disk and kind == "transformers" else {}


# --- checkpoint state ------------------------------------------------------------------------------------

def _rng_state(rng: random.Random) -> list[Any]:
    version, internal, gauss = rng.getstate()
    return [version, list(internal), gauss]


def _set_rng_state(rng: random.Random, state: list[Any]) -> None:
    rng.setstate((state[0], tuple(state[1]), state[2]))


def loop_state_dict(state: LoopState, variant: Variant, params: Params, mlflow_run_id: str | None,
                    questions: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """``questions``: this iteration's Solver questions, for the pool file should a kill follow the save."""
    return {"version": STATE_VERSION, "variant": variant.name, "iteration": state.iteration,
            "cursor": state.cursor.position, "num_seeds": len(state.cursor.seeds),
            "first_seed_id": state.cursor.seeds[0].seed_id, "replay": state.replay.to_state(),
            "rng": _rng_state(state.rng), "history": state.history, "params_digest": params.digest(),
            "mlflow_run_id": mlflow_run_id, "questions": questions or [], "extra": state.extra}


def restore(state: LoopState, checkpoint: Path, variant: Variant) -> dict[str, Any]:
    """Load a checkpoint's loop state into ``state`` (trainer files are loaded by the caller)."""
    saved = read_state(checkpoint)
    if saved.get("variant") != variant.name:
        raise SelfplayError(f"{checkpoint} belongs to variant {saved.get('variant')!r}, not {variant.name!r}")
    if saved.get("num_seeds") != len(state.cursor.seeds) or saved.get("first_seed_id") != state.cursor.seeds[0].seed_id:
        log.warning("the seed pool changed since %s (%s seeds then, %d now); the cursor continues by position",
                    checkpoint, saved.get("num_seeds"), len(state.cursor.seeds))
    state.iteration = int(saved["iteration"])
    state.cursor.position = int(saved["cursor"])
    state.replay = ReplayBuffer.from_state(saved["replay"])
    _set_rng_state(state.rng, saved["rng"])
    state.history = list(saved["history"])
    state.extra = dict(saved.get("extra", {}))
    return saved


def save_trainer(runtime: Runtime, folder: Path) -> None:
    """``PolicyTrainer.save`` into ``trainer/``: weights and optimizer as torch.distributed.checkpoint shards (one per
    process under FSDP), scheduler and RNG states. Not a model to read: ``export_model`` writes that."""
    runtime.trainer.save(folder / TRAINER_DIR)


def export_model(runtime: Runtime, run_dir: Path) -> Path:
    """The run's final model, ``<run>/model/``: a Hugging Face folder written once, at the run's end (collective)."""
    return runtime.trainer.export(run_dir / MODEL_DIR)


# --- reports -----------------------------------------------------------------------------------------------


def _finite_or_none(value: Any) -> Any:
    return None if isinstance(value, float) and not math.isfinite(value) else value


def write_reports(folder: Path, history: list[dict[str, float]]) -> None:
    """``metrics.json`` (the last iteration, a DVC metric), ``history.csv`` (every iteration, a DVC plot),
    ``timings.json`` (their durations and rates, kept out of both: ``searchplay.timings``) and
    ``accuracy.png`` (the Solver's accuracy on fresh questions per iteration, titled with the run name)."""
    if not history:
        return
    summary, timings = split_timings({**history[-1], **m.fresh_accuracy_trend(history)})
    write_json(folder / "metrics.json", {k: _finite_or_none(v) for k, v in summary.items()})
    write_timings(folder, {**timings, "iterations": timing_rows(history, "iteration")})
    columns: list[str] = []
    for row in history:
        columns += [k for k in row if k not in columns and not is_timing(k)]
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, restval="", extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for row in history:
        writer.writerow({k: "" if _finite_or_none(v) is None else v for k, v in row.items()})
    with atomic_write(folder / "history.csv") as handle:
        handle.write(buffer.getvalue())
    draw_fresh_accuracy(folder / ACCURACY_PNG, history, folder.name)


QUESTION_POOL = "questions.jsonl"


def write_question_pool(path: Path, iteration: int, questions: list[dict[str, Any]]) -> None:
    """Append this iteration's Solver questions to the pool file, after its data-quality gate.

    Rows of this or later iterations (left by a run killed after writing them) are replaced, so a
    resumed run never duplicates them. The gate (``searchplay.quality.questions``) stops the run
    if a question that reached the Solver breaks a rule filter invariant.
    """
    from searchplay.io import read_jsonl, write_jsonl
    from searchplay.quality.questions import validate_question_pool

    rows = [{"iteration": iteration, **question} for question in questions]
    validate_question_pool(rows)
    kept = [row for row in read_jsonl(path) if row["iteration"] < iteration] if path.exists() else []
    write_jsonl(path, kept + rows)


def restore_question_rows(path: Path, iteration: int, questions: list[dict[str, Any]]) -> bool:
    """Make the pool file's rows of the checkpoint's iteration (and after) the checkpoint's questions: a run
    killed between the checkpoint and the pool write left none, or, where it had started over, an earlier
    run's rows of that iteration; True if it rewrote them."""
    from searchplay.io import read_jsonl

    found = [row for row in read_jsonl(path) if row["iteration"] >= iteration] if path.exists() else []
    if found == [{"iteration": iteration, **question} for question in questions]:
        return False
    write_question_pool(path, iteration, questions)
    return True


# --- the run -----------------------------------------------------------------------------------------------


def run_selfplay(params: Params, variant_name: str, iterations: int, resume: bool = False,
                 runtime: Runtime | None = None,
                 on_iteration: Callable[[int, dict[str, float]], None] | None = None,
                 phase: str = "all", resume_if_unchanged: bool = False) -> list[dict[str, float]]:
    """Train ``iterations`` self-play steps in total (a resumed run continues up to the same total).

    ``phase``: 'all' trains every phase the variant has in one run; a phased variant (``searchplay.selfplay.phases``)
    can train one phase (each a DVC stage), with its own checkpoints, reports and MLflow run.
    ``resume_if_unchanged`` (the DVC stage's mode): resume where the checkpoints were made from the same inputs
    (``searchplay.selfplay.inputs``), else remove them and start over.
    """
    from searchplay.tracking import start_run

    variant = get_variant(variant_name)
    cfg = params.selfplay
    check_run(params, variant, phase)
    run_name = phases.run_name(variant, phase)
    run_dir = selfplay_run_dir(cfg.checkpoint_dir, run_name)  # model/ (the export) and resume/ (the checkpoints)
    manager = CheckpointManager(resume_dir(cfg.checkpoint_dir, run_name), cfg.keep_checkpoints)
    pinned = phases.pinned_state(params, variant, phase)  # first: a phase without its hand-off set fails at once
    inputs = _run_inputs(params, variant, pinned)
    resume, stale = _what_to_resume(manager, inputs, resume, resume_if_unchanged)
    state = LoopState(0, SeedCursor(load_seeds(params, variant)), ReplayBuffer(), random.Random(cfg.seed))
    state.extra.update(pinned)
    owned = runtime is None  # built here, so no caller reuses it after this run: its last act may free memory
    runtime = runtime or build_runtime(params, variant)
    processes = _share_checkpoints(runtime, variant, manager, inputs, clear=stale, run_dir=run_dir)
    if processes.world > 1:
        log.info("self-play process %d of %d", processes.rank, processes.world)
    if not processes.is_main:
        return _follow(runtime, variant, params, state, manager, iterations, resume, run_dir)
    reports = Path(cfg.reports_dir) / run_name
    previous_run, continued, logged = _resume(runtime, variant, params, state, manager, reports, resume)
    _clear_earlier_outputs(run_dir, keep=manager.root, restored=state.iteration > 0)
    tags = {"variant": variant.name, "solver_reward": variant.solver_reward, "proposer_prompt": variant.proposer_prompt,
            "phase": phase, "trained_roles": cfg.trained_roles}
    if previous_run and not continued:  # another tracking store, or other params: a new run
        tags["resumed_from_run"] = previous_run
    unlogged = [row for row in state.history if int(row["iteration"]) not in logged]
    if state.iteration >= iterations:
        log.info("%s: %d iterations already done (asked for %d); nothing to train", variant.name, state.iteration,
                 iterations)
        write_reports(reports, state.history)
        tracked = variant.heldout_analysis or (continued and unlogged) or phases.finisher(variant, phase) is not None
        with start_run(params, "selfplay", run_name, tags, run_id=continued) if tracked else nullcontext():
            if tracked:  # what a kill after the last checkpoint left, in its run
                _after_the_last_checkpoint(runtime, variant, params, reports, processes, unlogged)
            finish_phase(runtime, variant, params, state, run_dir, reports, phase, release=owned)  # the export
        return state.history
    with start_run(params, "selfplay", run_name, tags, run_id=continued) as run:
        for row in unlogged:  # a new run after a resume carries the whole curve; a continued one its holes
            _log_iteration(row, int(row["iteration"]))
        _train_iterations(runtime, variant, params, state, manager, reports, iterations, run.info.run_id,
                          on_iteration)
        _heldout_analysis(runtime, variant, params, reports, processes)
        finish_phase(runtime, variant, params, state, run_dir, reports, phase, release=owned)  # in its run
    return state.history


def untrained_warning(history: list[dict[str, float]], run_name: str) -> str | None:
    """What to tell a user whose run changed no weight (``train/weights_changed`` 0 in every iteration that logged
    it): its exported model is the one it started from. None where an update changed one, or none logged it.

    >>> untrained_warning([{"train/weights_changed": 0.0}], "ssp")[:46]
    'ssp: no update changed a weight in 1 iteration'
    >>> untrained_warning([{"train/weights_changed": 0.0}, {"train/weights_changed": 1.0}], "ssp") is None
    True
    """
    changed = [row["train/weights_changed"] for row in history
               if not math.isnan(row.get("train/weights_changed", math.nan))]
    if not changed or any(flag > 0 for flag in changed):
        return None
    return (f"{run_name}: no update changed a weight in {len(changed)} iteration(s), so the exported model is the one "
            "it started from: the iteration lines say why (no valid question, or no group with a signal)")


def check_run(params: Params, variant: Variant, phase: str) -> None:
    """A run's settings that cannot work together, before anything loads: ``SelfplayError`` naming the fix."""
    try:
        phases.check_phase(variant, phase)
        check_trained_roles(variant, params.selfplay.trained_roles)
        check_rollout_temperatures(params)
    except ValueError as exc:
        raise SelfplayError(str(exc)) from None


def check_rollout_temperatures(params: Params) -> None:
    """The trainer takes pi_old and pi at temperature 1 (the papers' rollouts sample at 1.0), so a trained role's
    rollouts at another temperature would train off-policy, silently: ValueError instead."""
    roles = {"both": ("proposer", "solver"), "solver": ("solver",), "proposer": ("proposer",)}
    temperatures = {"solver": ("agent.temperature", params.agent.temperature),
                    "proposer": ("selfplay.proposer_temperature", params.selfplay.proposer_temperature)}
    for role in roles[params.selfplay.trained_roles]:
        name, value = temperatures[role]
        if value != 1.0:
            raise ValueError(f"{name}={value}: self-play trains the {role} on log-probabilities at temperature 1 "
                             f"(the papers' rollout temperature), so its rollouts must sample at 1.0 too")


def check_trained_roles(variant: Variant, trained_roles: str) -> None:
    """A fixed-opponent run (SSP Table 2) needs both roles in SSP's joint step; ValueError otherwise."""
    if trained_roles == "both":
        return
    if variant.step != "joint":
        raise ValueError(f"selfplay.trained_roles={trained_roles} needs the joint self-play step; {variant.name!r} "
                         f"runs its own ({variant.step!r}): set selfplay.trained_roles=both")
    if variant.questions != "proposer":
        raise ValueError(f"selfplay.trained_roles={trained_roles}: {variant.name!r} has no Proposer (its questions "
                         f"come from the KG's templates): set selfplay.trained_roles=both")


def finish_phase(runtime: Runtime, variant: Variant, params: Params, state: LoopState, root: Path, reports: Path,
                 phase: str, release: bool = False) -> None:
    """The run's end: the final model exported to ``<root>/model``, then the phase's last act after its last
    iteration, if it has one (e.g. writing the hand-off set). With ``release`` (a runtime no caller reuses), the
    trainer's moments and reference are freed first: nothing trains after it, the last checkpoint is written, and
    the act's generations reuse that memory."""
    log.info("exported the final model to %s", export_model(runtime, root))
    finish = phases.finisher(variant, phase)
    if finish is not None:
        if release:
            runtime.trainer.release_training_state()
        finish(runtime, variant, params, state, root, reports)


def _run_inputs(params: Params, variant: Variant, pinned: dict[str, Any]) -> dict[str, str]:
    """``searchplay.selfplay.inputs.run_inputs`` of this run. Without a start model on disk (a caller's runtime,
    as in tests; ``build_runtime`` would fail on it first) the start is recorded as unresolved."""
    from searchplay.model_paths import PolicyError
    from searchplay.retrieval.index import fingerprint_path

    try:
        start = initial_policy(params, variant.warmstart)
    except PolicyError:
        start = "unresolved"
    data = [Path(params.kg.out_dir) / "subgraphs.jsonl", fingerprint_path(params.index.dir)]
    if params.selfplay.eval_every:  # the held-out curve's benchmark questions (a DVC dep of the stage too)
        from searchplay.selfplay.heldout import benchmark_splits

        data += benchmark_splits(params.evaluate.data_dir, params.selfplay.eval_benchmark)
    return run_inputs(params_digest(params, variant.name), start, pinned, data)


def _what_to_resume(manager: CheckpointManager, inputs: dict[str, str], resume: bool,
                    resume_if_unchanged: bool) -> tuple[bool, bool]:
    """(resume, the old checkpoints are stale and go): ``--resume`` continues whatever is there,
    ``--resume-if-unchanged`` only a run of the same inputs; without either, checkpoints are refused."""
    latest = manager.latest()
    stale = resume_if_unchanged and latest is not None and _stale_checkpoints(manager, inputs)
    resume = resume or (resume_if_unchanged and not stale)
    if latest is not None and not resume and not stale:
        raise SelfplayError(f"{manager.root} already holds checkpoints (newest: {latest.name}); pass --resume to "
                            "continue, or move the folder away to start over")
    return resume, stale


def _stale_checkpoints(manager: CheckpointManager, inputs: dict[str, str]) -> bool:
    """Whether the checkpoints under ``manager.root`` were made from other inputs (logged, with which)."""
    changed = changed_inputs(manager.root, inputs)
    if changed:
        log.warning("%s holds checkpoints of another run (%s changed, or unknown: no %s); removing them and "
                    "starting from iteration 1", manager.root, ", ".join(changed), INPUTS_FILE)
    else:
        log.info("%s holds checkpoints of this run (same params, start, phase state and code); resuming",
                 manager.root)
    return bool(changed)


def _share_checkpoints(runtime: Runtime, variant: Variant, manager: CheckpointManager, inputs: dict[str, str],
                       clear: bool = False, run_dir: Path | None = None) -> Processes:
    """The processes of this run (several under accelerate), told to ``manager``. The main one removes a killed
    save's leftovers (with ``clear``, every old checkpoint and the old run's exported model) and records the run's
    inputs."""
    processes = Processes.from_accelerator(getattr(runtime.trainer, "accelerator", None))
    if processes.world > 1 and phases.one_process(variant):
        raise SelfplayError(f"{variant.name!r} runs on one process only (its phases hand off files one process "
                            "writes); launch it without accelerate")
    manager.processes = processes
    if processes.is_main:
        if clear:
            manager.clear()
            if run_dir is not None:
                shutil.rmtree(run_dir / MODEL_DIR, ignore_errors=True)
        for path in manager.remove_partials():
            log.info("removed the unfinished checkpoint %s (killed mid-save)", path)
        write_inputs(manager.root, inputs)
    processes.barrier()
    return processes


def _clear_earlier_outputs(run_dir: Path, keep: Path, restored: bool) -> None:
    """A run that ``restored`` nothing starts at iteration 1: what an earlier run left in its folder beside the
    checkpoints (its exported model, a phase's hand-off set, which a resumed run would keep) is not this run's."""
    if restored or not run_dir.is_dir():
        return
    for path in sorted(run_dir.iterdir()):
        if path.resolve() == keep.resolve():
            continue
        log.info("removing %s: an earlier run's output (this run starts from iteration 1)", path)
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()


def _resume(runtime: Runtime, variant: Variant, params: Params, state: LoopState, manager: CheckpointManager,
            reports: Path, resume: bool) -> tuple[str | None, str | None, set[int]]:
    """With ``resume`` and a checkpoint: restore the loop, trainer and backend from the newest one; returns the
    MLflow run it logged to, the run to continue (None: open a new one) and the iterations already logged."""
    latest = manager.latest()
    if not resume or latest is None:
        if resume:
            log.info("--resume: no checkpoint under %s; starting from iteration 1", manager.root)
        return None, None, set()
    saved = restore(state, latest, variant)
    previous_run = saved.get("mlflow_run_id")
    continued, logged = _run_to_continue(params, previous_run, state.iteration)
    runtime.trainer.load(latest / TRAINER_DIR)
    runtime.backend.update_weights(runtime.trainer.model)
    log.info("resumed %s from %s (iteration %d)", variant.name, latest, state.iteration)
    if restore_question_rows(reports / QUESTION_POOL, state.iteration, saved.get("questions", [])):
        log.info("put iteration %d's questions back into %s (lost by a kill)", state.iteration, QUESTION_POOL)
    return previous_run, continued, logged


def _train_iterations(runtime: Runtime, variant: Variant, params: Params, state: LoopState,
                      manager: CheckpointManager, reports: Path, iterations: int, run_id: str,
                      on_iteration: Callable[[int, dict[str, float]], None] | None) -> None:
    """Iterations ``state.iteration + 1 .. iterations``: train, checkpoint, log, report, one after another."""
    import mlflow

    run_name = reports.name
    for iteration in range(state.iteration + 1, iterations + 1):
        result, row = train_iteration(runtime, variant, params, state, iteration, iterations)
        tic = time.perf_counter()
        manager.save(iteration, loop_state_dict(state, variant, params, run_id, result.questions),
                     lambda folder: save_trainer(runtime, folder))
        row["time/checkpoint_s"] = time.perf_counter() - tic
        _log_iteration(row, iteration)
        mlflow.log_dict(result.samples, f"samples/iter_{iteration:06d}.json")
        write_reports(reports, state.history)
        write_question_pool(reports / QUESTION_POOL, iteration, result.questions)
        print(progress_line(iteration, iterations, row, run_name), flush=True)
        if on_iteration is not None:
            on_iteration(iteration, row)
    if warning := untrained_warning(state.history, run_name):
        log.warning(warning)


def _after_the_last_checkpoint(runtime: Runtime, variant: Variant, params: Params, reports: Path,
                               processes: Processes, unlogged: list[dict[str, float]]) -> None:
    """What a run killed after its last checkpoint had left to do, in its MLflow run: the iterations it had not
    logged, and the held-out analysis (GDCR's RQ1), which follows the last checkpoint."""
    for row in unlogged:
        _log_iteration(row, int(row["iteration"]))
    _heldout_analysis(runtime, variant, params, reports, processes)


def _heldout_analysis(runtime: Runtime, variant: Variant, params: Params, reports: Path,
                      processes: Processes) -> None:
    """The variant's held-out analysis (GDCR's RQ1), on one process only."""
    if variant.heldout_analysis and processes.world > 1:
        log.warning("%s: the held-out analysis runs on one process only; skipped under %d processes",
                    variant.name, processes.world)
    elif variant.heldout_analysis:
        heldout_analysis(runtime, params, reports)


def _follow(runtime: Runtime, variant: Variant, params: Params, state: LoopState, manager: CheckpointManager,
            iterations: int, resume: bool, run_dir: Path) -> list[dict[str, float]]:
    """A non-main process's run: the same steps and collective saves and export as the main process, nothing else
    written."""
    latest = manager.latest()
    if resume and latest is not None:
        restore(state, latest, variant)
        runtime.trainer.load(latest / TRAINER_DIR)
        runtime.backend.update_weights(runtime.trainer.model)
    for iteration in range(state.iteration + 1, iterations + 1):
        train_iteration(runtime, variant, params, state, iteration, iterations, rank=manager.processes.rank)
        manager.save(iteration, {}, lambda folder: save_trainer(runtime, folder))
    export_model(runtime, run_dir)
    return state.history


def train_iteration(runtime: Runtime, variant: Variant, params: Params, state: LoopState, iteration: int,
                    iterations: int, rank: int = 0) -> tuple[StepResult, dict[str, float]]:
    """One step and, every ``selfplay.eval_every``, the held-out scores; the row is appended to the history.

    Sampling is seeded from (``selfplay.seed``, iteration, rank) first, so the step repeats (``seeding``).
    """
    seed_sampling(params.selfplay.seed, iteration, rank)
    tic = time.perf_counter()
    result = step_function(variant)(runtime, variant, params, state)
    state.iteration = iteration
    row = {"iteration": float(iteration), **result.metrics,
           "train/bf16_changed_share": evaluated_change_share(runtime.trainer),  # every variant, all processes
           "time/iteration_s": time.perf_counter() - tic, "data/epoch": float(state.cursor.epoch)}
    every = params.selfplay.eval_every
    if every and (iteration % every == 0 or iteration == iterations):
        row.update(held_out_scores(runtime, params))
    state.history.append(row)
    return result, row


def held_out_scores(runtime: Runtime, params: Params) -> dict[str, float]:
    """``selfplay.eval_every``'s small held-out evaluation (kg_heldout + one benchmark), timed."""
    from searchplay.selfplay.heldout import heldout_curve

    tic = time.perf_counter()
    scores = heldout_curve(runtime, params, Path(params.kg.out_dir) / "subgraphs.jsonl")
    return {**scores, "time/heldout_eval_s": time.perf_counter() - tic}


def heldout_analysis(runtime: Runtime, params: Params, reports: Path) -> dict[str, float]:
    """The GDCR paper's RQ1 on the kg_heldout subgraphs with the trained Solver (``selfplay.heldout``), logged
    to the run and written to ``reports/selfplay/<variant>/rq1.*``."""
    import mlflow

    from searchplay.selfplay.heldout import run_heldout_analysis

    tic = time.perf_counter()
    summary = run_heldout_analysis(runtime, params, reports, Path(params.kg.out_dir) / "subgraphs.jsonl")
    if summary:
        mlflow.log_metrics({k: v for k, v in summary.items() if math.isfinite(v)})
        for name in ("rq1.png", "rq1.md", "rq1.csv"):
            mlflow.log_artifact(str(reports / name), "rq1")
        log.info("RQ1 on %d held-out questions in %.0f s: r(GDCR, correct) = %s", int(summary["rq1/questions"]),
                 time.perf_counter() - tic, summary["rq1/gdcr_correctness_r"])
    return summary


def progress_line(iteration: int, total: int, row: dict[str, float], variant: str) -> str:
    """One stdout line per iteration; the Prefect task parses ``iteration i/n`` from it (keep the shape)."""
    def show(key: str, fmt: str = ".3f") -> str:
        value = row.get(key, math.nan)
        return "nan" if not math.isfinite(value) else format(value, fmt)

    return (f"selfplay iteration {iteration}/{total} [{variant}]: valid rule {show('filter/valid_rate_rule', '.2f')} "
            f"rag {show('filter/valid_rate_rag', '.2f')} | questions {show('batch/questions', '.0f')} "
            f"(replayed {show('batch/replayed', '.0f')}) | solver reward {show('solver/reward_mean')} "
            f"acc {show('solver/accuracy')} | proposer reward {show('proposer/reward_mean')} | "
            f"groups with signal {show('train/groups_nonzero_advantage', '.0f')}/{show('train/groups', '.0f')} | "
            f"weights changed {show('train/weights_changed', '.0f')} | {show('time/iteration_s', '.0f')} s")


UNDEFINED_WHY = ("a statistic with nothing to average this iteration (no correct or no incorrect rollout, "
                 "no RAG verification, a single coverage value): left out of the chart, never logged as NaN")


def _loggable(row: dict[str, float]) -> tuple[dict[str, float], list[str]]:
    """(the finite metrics of an iteration, the undefined ones): MLflow draws NaN as a broken chart, so an
    undefined point is skipped, counted in ``metrics/undefined`` and named in ``undefined/iter_*.json``."""
    values = {k: float(v) for k, v in row.items() if k != "iteration"}
    undefined = sorted(k for k, v in values.items() if not math.isfinite(v))
    finite = {k: v for k, v in values.items() if math.isfinite(v)}
    return {**finite, "metrics/undefined": float(len(undefined))}, undefined


LOGGED_EVERY_ITERATION = "metrics/undefined"  # the one metric _loggable always returns: its steps are the iterations


def _run_to_continue(params: Params, run_id: str | None, iteration: int) -> tuple[str | None, set[int]]:
    """(the MLflow run a resume continues, the iterations it holds): the checkpoint's run, unless
    ``resumable_run`` refuses it or it holds iterations past the checkpoint's (its curve would fork);
    then ``(None, set())`` and the resume opens a new run."""
    from searchplay.tracking import logged_steps, resumable_run

    if not run_id or resumable_run(params, "selfplay", run_id) is None:
        return None, set()
    steps = logged_steps(params, run_id, LOGGED_EVERY_ITERATION)
    return (None, set()) if any(step > iteration for step in steps) else (run_id, steps)


def _log_iteration(row: dict[str, float], step: int) -> None:
    import mlflow

    metrics, undefined = _loggable(row)
    mlflow.log_metrics(metrics, step=step)
    if undefined:
        mlflow.log_dict({"iteration": step, "undefined": undefined, "why": UNDEFINED_WHY},
                        f"undefined/iter_{step:06d}.json")
        log.info("iteration %d: %d metrics undefined, not logged: %s", step, len(undefined), ", ".join(undefined))
