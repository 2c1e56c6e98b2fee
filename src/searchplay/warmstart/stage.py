"""The warmstart stage: demos -> format validity of the base model -> masked SFT -> validity again -> checkpoint.

Runs once after ``kg`` and ``index`` and before every ``selfplay@<variant>``, so every variant starts
from the same weights and their comparison stays fair. Inputs: the ``warmstart`` split of
``<kg.out_dir>/subgraphs.jsonl`` and the built index. Outputs:

* ``<warmstart.out_dir>/model/``: an HF folder (weights + tokenizer), what self-play starts from;
* ``<warmstart.reports_dir>/metrics.json``: validity per role before (``_base``) and after training,
  tokens, demos per role, final loss (a DVC metric);
* ``history.csv`` (loss per step, a DVC plot), ``loss.png``, ``samples.json`` (decoded demos and
  the sampled outputs behind every rate);
* an MLflow run in ``<prefix>-warmstart`` with all of the above.

With ``warmstart.enabled: false`` the stage writes only ``metrics.json`` saying so, and self-play
starts from ``models.policy`` (the papers' setting).
"""

from __future__ import annotations

import csv
import io
import logging
import math
import random
import shutil
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from searchplay.config import Params
from searchplay.io import InputError, atomic_write, follow_umask, read_jsonl, write_json
from searchplay.model_paths import warmstart_model_dir
from searchplay.moments import memory_saver_enabled
from searchplay.precision import autocast_enabled
from searchplay.split import record_split
from searchplay.timings import is_timing, split_timings, timing_rows, write_timings
from searchplay.warmstart.demos import ROLES, Demo, DemoBuilder, partition
from searchplay.warmstart.formats import enabled_formats, family_roles, registered_roles

log = logging.getLogger(__name__)


class WarmstartError(InputError, RuntimeError):
    """The stage cannot run; the message says why and what to do."""


def warmstart_records(params: Params) -> list[dict[str, Any]]:
    """The ``warmstart`` split of the KG pool (never the self-play seeds, never kg_heldout)."""
    path = Path(params.kg.out_dir) / "subgraphs.jsonl"
    if not path.is_file():
        raise WarmstartError(f"{path} not found; run `searchplay kg extract` first")
    try:
        records = [r for r in read_jsonl(path) if record_split(r, str(path)) == "warmstart"]
    except ValueError as exc:
        raise WarmstartError(str(exc)) from None
    if len(records) <= params.warmstart.eval_prompts:
        raise WarmstartError(f"{path}: {len(records)} warm-start subgraphs, need more than warmstart.eval_prompts="
                             f"{params.warmstart.eval_prompts}; raise kg.num_seeds or kg.warmstart_share")
    return records


ROTATIONS = {"proposer": ("proposer_kg", "proposer_ssp"), "solver": ("solver",), "verifier": ("verifier",)}


def schedule(demos: list[Demo], steps: int) -> list[list[Demo]]:
    """The demos of each optimizer step: one Proposer demo (the KG, SSP and a registered format's Proposer
    families in turn), one Solver demo and one verifier demo (the plain form and a registered format's
    alternate: ``formats.DemoFormat.families``), each role cycling through its own demos in order."""
    by_role = {role: [d for d in demos if d.role == role] for role in (*ROLES, *registered_roles())}
    proposers, solvers, verifiers = ([role for role in (*plain, *family_roles(family)) if by_role.get(role)]
                                     for family, plain in ROTATIONS.items())
    cursors: Counter = Counter()
    plan = []
    for step in range(steps):
        roles = [family[step % len(family)] for family in (proposers, solvers, verifiers) if family]
        batch = []
        for role in roles:
            batch.append(by_role[role][cursors[role] % len(by_role[role])])
            cursors[role] += 1
        plan.append(batch)
    return plan


def plain_roles(params: Params) -> tuple[str, ...]:
    """The self-play roles the stage builds demos of: the Proposers of ``warmstart.proposers``, the Solver and,
    with ``warmstart.verifier``, the verifier."""
    cfg = params.warmstart
    return tuple(role for role in ROLES
                 if (role != "verifier" or cfg.verifier)
                 and (not role.startswith("proposer_") or role.removeprefix("proposer_") in cfg.proposers))


def roles_of(params: Params) -> tuple[str, ...]:
    """The demo roles the stage builds: ``plain_roles``, and those of each format the params enable
    (``searchplay.warmstart.formats``)."""
    return (*plain_roles(params), *(role for demo_format in enabled_formats(params) for role in demo_format.roles))


def run_warmstart(params: Params, search_tool: Any = None, progress: bool = True, track: bool = True) -> dict[str, Any]:
    """Run the whole stage; returns the metrics written to ``metrics.json``. With ``track`` one MLflow run spans
    it, opened before the first step (FAILED or KILLED if the stage does not finish)."""
    if not params.warmstart.enabled:
        return write_disabled(params)
    with stage_run(params, "warmstart", track):
        return _run_warmstart(params, search_tool, progress, track)


@contextmanager
def stage_run(params: Params, run_name: str, track: bool) -> Iterator[None]:
    """An MLflow run in ``<prefix>-warmstart`` around the block (nothing without ``track``)."""
    if not track:
        yield
        return
    from searchplay.tracking import start_run

    with start_run(params, "warmstart", run_name, {"method": params.warmstart.method}):
        yield


def _run_warmstart(params: Params, search_tool: Any, progress: bool, track: bool) -> dict[str, Any]:
    cfg = params.warmstart
    reports = Path(cfg.reports_dir)
    import torch

    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    torch.manual_seed(cfg.seed)
    rng = random.Random(cfg.seed)
    started = time.perf_counter()

    from searchplay.assets import resolve
    from searchplay.llm.tokenizer import load_tokenizer
    from searchplay.retrieval import format_documents, load_search_tool

    records = warmstart_records(params)
    demo_records, check_records = partition(records, cfg.eval_prompts, cfg.max_per_answer, cfg.demos_per_role, rng)
    tokenizer = load_tokenizer(params.models.policy)
    search_tool = search_tool or load_search_tool(params)

    def fmt(docs: Any) -> str:
        return format_documents(docs, tokenizer, params.search.max_doc_tokens)

    demos, dropped = _build_demos(params, demo_records, check_records, records, rng, tokenizer, search_tool, fmt)
    per_role = Counter(d.role for d in demos)

    start = resolve(params.models.policy)
    model = load_policy(start, params)
    backend = policy_backend(model, tokenizer, params, start) if check_records else None  # eval_prompts 0: none
    tic = time.perf_counter()
    base_rates, base_samples = check_validity(backend, search_tool, check_records, params, fmt, "base model")
    check_seconds = time.perf_counter() - tic

    if backend is not None:
        backend.release_memory()  # the check's caches and bf16 copy make room for AdamW's state
    history, train_seconds = train(model, demos, params, progress, start=start)
    model = finalize(model, params)
    if backend is not None:
        backend.update_weights(model)
    tic = time.perf_counter()
    rates, samples = check_validity(backend, search_tool, check_records, params, fmt, "warm-start")
    check_seconds += time.perf_counter() - tic
    save_trained_model(model, tokenizer, params)
    drop_stale_outputs(Path(cfg.out_dir), written_outputs(params))

    metrics: dict[str, Any] = {
        "enabled": True, "method": cfg.method, "steps": cfg.steps, "lr": cfg.lr,
        **rates, **{f"{k}_base": v for k, v in base_rates.items()},
        "check_prompts": len(check_records),
        "demos": len(demos), **{f"demos_{role}": per_role.get(role, 0) for role in roles_of(params)},
        "demos_dropped": sum(dropped.values()), "demo_subgraphs": len(demo_records), **sft_totals(history),
        "time_train_s": round(train_seconds, 1), "time_check_s": round(check_seconds, 1),
        "time_total_s": round(time.perf_counter() - started, 1),
        "tokens_per_s": sum(row["tokens"] for row in history) / max(train_seconds, 1e-9),
    }
    write_reports(reports, metrics, history, {"base": base_samples, "warmstart": samples,
                                              "demos": decoded_demos(demos, tokenizer)})
    if track:
        log_to_mlflow(params, metrics, history, reports)
    return metrics


def _build_demos(params: Params, demo_records: list[dict], check_records: list[dict], records: list[dict],
                 rng: random.Random, tokenizer: Any, search_tool: Any, fmt: Any) -> tuple[list[Any], Counter]:
    """The SFT demos of every role (an enabled format's too) and the drop counts by reason."""
    builder = demo_builder(params, tokenizer, search_tool, fmt)
    check_ids = {str(r["id"]) for r in check_records}
    pool = [r for r in records if str(r["id"]) not in check_ids]
    demos, dropped = builder.build(demo_records, plain_roles(params), rng, pool=pool)
    for demo_format in enabled_formats(params):
        more, more_dropped = demo_format.build(builder, demo_records, demo_format.roles, rng)
        demos += more
        dropped += more_dropped
    if not demos:
        raise WarmstartError(f"no demo survived the rule filter ({dict(dropped)}); check the KG pool")
    log.info("built %d demos from %d subgraphs (%s); dropped %s; %d held-out check subgraphs", len(demos),
             len(demo_records), dict(Counter(d.role for d in demos)), dict(dropped) or "none", len(check_records))
    return demos, dropped


def sft_totals(history: list[dict[str, float]]) -> dict[str, float]:
    """Tokens seen and trained over the SFT steps, and the loss of the first and the last step."""
    return {"tokens": sum(row["tokens"] for row in history),
            "trained_tokens": sum(row["trained_tokens"] for row in history),
            "loss_first": history[0]["loss"], "loss_last": history[-1]["loss"]}


def demo_builder(params: Params, tokenizer: Any, search_tool: Any, fmt: Any) -> DemoBuilder:
    """The demo builder over the real search tool, with the self-play protocol's formats and rule filter."""
    from searchplay.llm.tokenizer import encode_prompt
    from searchplay.question_rules import FilterRules

    top_k = params.search.top_k
    return DemoBuilder(tokenizer, lambda messages: encode_prompt(tokenizer, messages),
                       lambda queries: search_tool.search(queries, top_k=top_k), fmt,
                       max_searches=params.warmstart.max_searches, noisy_docs=params.selfplay.noisy_docs,
                       solver_demos=params.warmstart.solver_demos, solver_max_hops=params.warmstart.solver_max_hops,
                       question_format=params.agent.question_format,
                       information_format=params.agent.information_format,
                       rules=FilterRules.of(params.selfplay))


def write_disabled(params: Params) -> dict[str, Any]:
    """``warmstart.enabled: false``: every declared output says so (DVC needs them); no model is written."""
    note = "warmstart.enabled is false: self-play starts from models.policy (the papers' setting)"
    reports = Path(params.warmstart.reports_dir)
    out = Path(params.warmstart.out_dir)
    drop_stale_outputs(out, {"DISABLED"})
    out.mkdir(parents=True, exist_ok=True)
    (out / "DISABLED").write_text(note + "\n")
    metrics = {"enabled": False, "note": note}
    write_json(reports / "metrics.json", metrics)
    write_json(reports / "samples.json", {})
    with atomic_write(reports / "history.csv") as handle:
        handle.write("step,loss\n")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = plt.figure(figsize=(6, 1.5))
    fig.text(0.5, 0.5, note, ha="center", va="center", fontsize=8)
    fig.savefig(reports / "loss.png", dpi=100)
    plt.close(fig)
    return metrics


# --- model ----------------------------------------------------------------------------------------------


def load_policy(path: str, params: Params) -> Any:
    """The base policy in fp32 (AdamW's master weights), wrapped with LoRA adapters for ``method: lora``."""
    import torch

    from searchplay.llm.transformers_backend import pick_device
    from searchplay.llm.weights import load_causal_lm

    model = load_causal_lm(path, dtype=torch.float32).to(pick_device(params.models.device))
    model.config.use_cache = True
    cfg = params.warmstart
    if cfg.method == "lora":
        from peft import LoraConfig, get_peft_model

        model = get_peft_model(model, LoraConfig(r=cfg.lora_r, lora_alpha=cfg.lora_alpha, lora_dropout=cfg.lora_dropout,
                                                 target_modules="all-linear", task_type="CAUSAL_LM"))
    return model.eval()


def finalize(model: Any, params: Params) -> Any:
    """LoRA: optionally keep the adapter (``warmstart.lora_save_adapter``), then merge it into the weights."""
    if params.warmstart.method != "lora":
        return model
    if params.warmstart.lora_save_adapter:
        model.save_pretrained(Path(params.warmstart.out_dir) / "adapter")
        follow_umask(Path(params.warmstart.out_dir) / "adapter")
    return model.merge_and_unload()


def policy_backend(model: Any, tokenizer: Any, params: Params, start: str) -> Any:
    """The rollout backend of the model being trained (the validity checks sample through it): the transformers
    backend over ``model`` itself, or a vLLM engine of ``start`` (the weights ``model`` was loaded from), which
    ``update_weights`` brings to the trained weights."""
    from searchplay.llm import backend_kind, load_backend
    from searchplay.llm.transformers_backend import TransformersBackend

    if backend_kind(params) == "vllm":
        return load_backend(start, params, tokenizer=tokenizer)
    return TransformersBackend(model, tokenizer, rollout_dtype=params.agent.rollout_dtype)


def written_outputs(params: Params) -> set[str]:
    """What a finished warm-start leaves in ``warmstart.out_dir``: the model, and the LoRA adapter if kept."""
    cfg = params.warmstart
    return {"model"} | ({"adapter"} if cfg.method == "lora" and cfg.lora_save_adapter else set())


def drop_stale_outputs(out: Path, keep: set[str]) -> None:
    """Remove from ``out`` what an earlier run left and this one did not write. DVC keeps the folder between
    runs (``persist``, so that a killed warm-start resumes), where it would otherwise start empty."""
    for path in (out.iterdir() if out.is_dir() else []):
        if path.name not in keep:
            shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink()
            log.info("removed %s, left by an earlier run", path)


def save_trained_model(model: Any, tokenizer: Any, params: Params) -> None:
    """The trained model into ``warmstart_model_dir``, then the run's resume state goes: until the model is on disk a
    kill (in the check after training, in the save) resumes from the last saved step, not from the first."""
    from searchplay.warmstart import resume

    save_model(model, tokenizer, warmstart_model_dir(params))
    resume.clear(Path(params.warmstart.out_dir) / "resume")


def save_model(model: Any, tokenizer: Any, folder: Path) -> None:
    """Write the HF folder into ``<folder>.partial`` and rename it into place (a kill leaves no half model)."""
    partial = folder.with_name(folder.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    model.save_pretrained(partial)
    tokenizer.save_pretrained(partial)
    follow_umask(partial)
    if folder.exists():
        shutil.rmtree(folder)
    partial.rename(folder)


# --- training ---------------------------------------------------------------------------------------------


def train(model: Any, demos: list[Demo], params: Params, progress: bool,
          start: str = "") -> tuple[list[dict[str, float]], float]:
    """``warmstart.steps`` optimizer steps on the schedule; returns the per-step history and the seconds.

    Every ``warmstart.save_every`` steps the training state goes to ``<out_dir>/resume/``; a run killed after
    a save continues from it (``searchplay.warmstart.resume``) and ends with the same weights. The state stays
    until ``save_trained_model`` has written the model. ``start``: the
    model it trains from, whose digest joins the resume state's fingerprint."""
    from tqdm.auto import tqdm

    from searchplay.io import code_digest
    from searchplay.llm.weights import model_digest
    from searchplay.warmstart import resume
    from searchplay.warmstart.sft import SFTTrainer

    cfg = params.warmstart
    device = next(model.parameters()).device.type
    autocast = autocast_enabled(cfg.autocast_bf16, device)
    log.info("warm-start SFT: %s forward (warmstart.autocast_bf16=%s)", "bf16 autocast" if autocast else "fp32",
             cfg.autocast_bf16)
    trainer = SFTTrainer(model, cfg.lr, cfg.weight_decay, cfg.warmup_steps, cfg.max_grad_norm,
                         segmented=cfg.segmented_forward, autocast=autocast,
                         moments_dir=cfg.out_dir if memory_saver_enabled(cfg.moments_on_disk, device) else None)
    folder = Path(cfg.out_dir) / "resume"
    settings = cfg.model_dump(exclude={"save_every", "threads", "moments_on_disk"})
    key = resume.fingerprint(demos, {**settings, "start": model_digest(start) if start else "",
                                     "code": code_digest()})  # no run continues on other code than it began with
    done, history = resume.load(folder, trainer, key) or (0, [])
    if done:
        log.info("warm-start: resuming after step %d of %d (%s)", done, cfg.steps, folder)
    offset = history[-1]["elapsed_s"] if history else 0.0
    tic = time.perf_counter()
    batches = schedule(demos, cfg.steps)[done:]
    bar = tqdm(batches, desc="warm-start SFT", unit="step", disable=not progress, initial=done, total=cfg.steps)
    for step, batch in enumerate(bar, start=done + 1):
        stats = trainer.step(batch)
        history.append({"step": float(step), **stats, "elapsed_s": offset + time.perf_counter() - tic})
        bar.set_postfix(loss=f"{stats['loss']:.3f}")
        if step == 1 or step % 10 == 0 or step == cfg.steps:
            log.info("warm-start step %d/%d: loss %.3f, %d tokens (%d trained)", step, cfg.steps, stats["loss"],
                     stats["tokens"], stats["trained_tokens"])
        if cfg.save_every and step % cfg.save_every == 0 and step < cfg.steps:
            resume.save(folder, trainer, history, step, key)
    if trainer.moments is not None:
        trainer.moments.release()  # the training is over: the file and the moments in it go
    model.zero_grad(set_to_none=True)  # the last step's gradients: not needed by the check and the save after
    return history, offset + time.perf_counter() - tic


def check_validity(backend: Any, search_tool: Any, records: list[dict[str, Any]], params: Params, fmt: Any,
                   label: str) -> tuple[dict[str, float], dict[str, list[dict]]]:
    """The format rates and samples of ``backend`` on the check prompts; none without a backend (no prompts)."""
    from searchplay.warmstart.validity import format_validity

    if backend is None:
        return {}, {}
    tic = time.perf_counter()
    rates, samples = format_validity(backend, search_tool, records, params, fmt, seed=params.warmstart.seed)
    log.info("format validity of the %s on %d held-out prompts (%.0f s): %s", label, len(records),
             time.perf_counter() - tic, {k: round(v, 2) for k, v in rates.items()})
    return rates, samples


# --- reports ----------------------------------------------------------------------------------------------


def decoded_demos(demos: list[Demo], tokenizer: Any, per_role: int = 2) -> list[dict[str, Any]]:
    """The first ``per_role`` demos of each role as text, trained spans marked, for a reader to check."""
    out = []
    for role in (*ROLES, *registered_roles()):
        for demo in [d for d in demos if d.role == role][:per_role]:
            out.append({"role": role, "subgraph_id": demo.subgraph_id, "tokens": demo.num_tokens,
                        "trained_tokens": demo.num_trained,
                        "segments": [{"trained": s.trained, "text": tokenizer.decode(s.ids)} for s in demo.segments
                                     if s.trained or len(s.ids) < 400]})
    return out


RATES = (("proposer_valid_rate", "Proposer\npasses filter"), ("solver_answer_rate", "Solver\ncloses <answer>"),
         ("verifier_format_rate", "verifier\n'Answer:'"), ("solver_em", "Solver EM"))
BEFORE = ("_base", "base model")  # the suffix of the rates before training in metrics.json, and its label


def write_reports(folder: Path, metrics: dict[str, Any], history: list[dict[str, float]],
                  samples: dict[str, Any], rates: tuple[tuple[str, str], ...] = RATES,
                  before: tuple[str, str] = BEFORE, after: str = "warm-start",
                  prompts_key: str = "check_prompts") -> None:
    """metrics.json and history.csv (results, which DVC compares), timings.json (durations and rates, which it
    ignores: ``searchplay.timings``), samples.json and loss.png."""
    results, timings = split_timings(metrics)
    write_json(folder / "metrics.json", results)
    write_timings(folder, {**timings, "steps": timing_rows(history, "step")})
    write_json(folder / "samples.json", samples)
    columns = [key for key in history[0] if not is_timing(key)]
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    writer.writerows(history)
    with atomic_write(folder / "history.csv") as handle:
        handle.write(buffer.getvalue())
    plot_loss(history, metrics, folder / "loss.png", rates, before, after, prompts_key)


def plot_loss(history: list[dict[str, float]], metrics: dict[str, Any], path: Path,
              rates: tuple[tuple[str, str], ...] = RATES, before: tuple[str, str] = BEFORE,
              after: str = "warm-start", prompts_key: str = "check_prompts") -> None:
    """Loss per step beside the validity rates (``rates``: metric key, bar label) before and after, one figure;
    the loss alone where nothing was checked (``warmstart.eval_prompts: 0``)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    checked = any(key in metrics for key, _ in rates)
    if checked:
        fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.6), gridspec_kw={"width_ratios": [3, 2]})
        plot_rates(right, metrics, rates, before, after, prompts_key)
    else:
        fig, left = plt.subplots(figsize=(6, 3.6))
    left.plot([r["step"] for r in history], [r["loss"] for r in history], marker=".", color="tab:blue")
    left.set_xlabel("optimizer step")
    left.set_ylabel("NLL per trained token")
    left.set_title(f"{after} SFT ({metrics['method']}, {int(metrics['trained_tokens']):,} trained of "
                   f"{int(metrics['tokens']):,} tokens)", fontsize=9)
    left.grid(alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial.png")
    fig.savefig(partial, dpi=110)
    plt.close(fig)
    partial.replace(path)


def plot_rates(axes: Any, metrics: dict[str, Any], rates: tuple[tuple[str, str], ...], before: tuple[str, str],
               after: str, prompts_key: str) -> None:
    """The validity rates before and after training as paired bars (a role the check left out: no bars)."""
    rates = tuple((key, name) for key, name in rates if key in metrics)
    keys = [key for key, _ in rates]
    xs = range(len(keys))
    for shift, suffix, label, color in ((-0.2, before[0], before[1], "tab:gray"), (0.2, "", after, "tab:green")):
        values = [metrics.get(k + suffix, math.nan) for k in keys]
        bars = axes.bar([x + shift for x in xs], [0.0 if math.isnan(v) else v for v in values], width=0.4,
                        label=label, color=color)
        axes.bar_label(bars, fmt="%.2f", fontsize=7, padding=1)  # a 0.00 bar is otherwise invisible
    axes.set_xticks(list(xs), [name for _, name in rates], fontsize=8)
    axes.set_ylim(0, 1.15)
    prompts = int(metrics.get(prompts_key, metrics["check_prompts"]))
    axes.set_title(f"format validity on {prompts} held-out prompts per role", fontsize=9)
    axes.legend(fontsize=8, loc="upper left")


def log_to_mlflow(params: Params, metrics: dict[str, Any], history: list[dict[str, float]], reports: Path,
                  run_name: str = "warmstart") -> None:
    """Log the step history, the metrics and the reports into the active run (``stage_run``)."""
    import mlflow

    for row in history:
        mlflow.log_metrics({f"train/{k}": v for k, v in row.items() if k != "step" and math.isfinite(v)},
                           step=int(row["step"]))
    mlflow.log_metrics({k: float(v) for k, v in metrics.items()
                        if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)})
    mlflow.log_artifacts(str(reports), artifact_path=run_name)
