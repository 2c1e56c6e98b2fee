"""``PolicyTrainer``: one clipped policy-gradient update of the shared Proposer/Solver weights per call.

The same code runs on CPU, one GPU, or several GPUs with FSDP (``accelerate launch --config_file
accelerate_configs/fsdp.yaml ...``). Every process receives the SAME list of samples and trains on its
share; the global token count is known to all, so token-mean aggregation is exact across processes.

A step reads: micro-batches -> log pi of the policy (with gradient) and of the frozen reference -> clipped loss
with KL -> backward -> optimizer and schedule step -> statistics. The memory savers (AdamW's moments and the
reference on disk, the segmented forward with shared prompt prefixes; docs/decisions/rl.md L14, L14c, L14e) sit
behind ``searchplay.rl.memory_savers.MemorySavers``, whose hooks the step calls at fixed points; the forwards
themselves are ``searchplay.rl.forward``'s. The seam leaves every value as it was; the segmented forward itself
truncates the gradient at its segments' boundaries (L14).

Batch mapping (docs/decisions/rl.md L10): one ``step(samples)`` = one optimizer step; the samples are
split into micro-batches of ``selfplay.micro_batch_size`` sequences whose gradients are accumulated.
One ``update(samples, mini_batches)`` = one role's update, verl's ``update_actor``: ``mini_batches``
optimizer steps over consecutive slices, every slice's pi_old taken from the policy before the first
step. The learning-rate schedule advances once per optimizer step, so its warm-up counts optimizer steps
(docs/decisions/rl.md L8). The SSP code's "global batch 256 / mini-batch 128" is one Proposer update with
1 step and one Solver update with 2 steps (x5 rollouts) per iteration.

Start weights (``start_statistics``): the L2 distance from the start weights and the share of parameters whose
value in the dtype rollouts and evaluation run in differs from theirs (``searchplay.rl.drift``; an fp32 update below
the bf16 rounding step changes no answer), in one pass over this process's shards against the reference (with the
reference on disk: a read kept for the next step's reference pass), and one all-reduce, once per optimizer step.

Under FSDP (accelerate's FSDP2 plugin) the frozen reference is sharded with the policy's plugin: the same units,
mesh, device and mixed precision, so every shard of it sits beside the policy's shard of the same parameter.
"""

from __future__ import annotations

import json
import math
import shutil
import time
from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any

from searchplay.config import ConfigError
from searchplay.io import follow_umask
from searchplay.llm.weights import weights_stamp
from searchplay.precision import autocast_enabled, skip_nonfinite_step
from searchplay.rl.drift import cast_snapshot, compare_with_start, evaluation_dtype, local_shards
from searchplay.rl.forward import Forward, accepts_logits_to_keep, reshard, response_slice
from searchplay.rl.losses import low_var_kl, policy_loss_terms, token_weights
from searchplay.rl.memory_savers import MemorySavers, enable_gradient_checkpointing
from searchplay.rl.sample import TrainingSample

if TYPE_CHECKING:
    from searchplay.config import Params

TRAINER_STATE = "trainer_state.json"


class _Warmup:
    """Linear warm-up then constant (verl ``constant`` schedule); a callable object so LambdaLR saves it.

    lr factor of the step after k optimizer steps: (k + 1) / warmup (first step already learns), or verl's
    k / warmup with ``from_zero`` (first step at lr 0); so once ``warmup`` steps are done the factor is 1.
    The trainer advances it once per optimizer step.
    """

    def __init__(self, warmup_steps: int, from_zero: bool) -> None:
        self.warmup_steps = warmup_steps
        self.from_zero = from_zero

    def __call__(self, k: int) -> float:
        if self.warmup_steps <= 0:
            return 1.0
        done = k if self.from_zero else k + 1
        return min(1.0, done / self.warmup_steps)


class PolicyTrainer:
    """GRPO/REINFORCE update with a clipped ratio, low-variance KL to a frozen reference, AdamW + warm-up."""

    def __init__(self, model_path: str, params: Params, accelerator: Any = None) -> None:
        import torch
        from accelerate import Accelerator

        from searchplay.assets import resolve
        from searchplay.llm.attention import use_lean_attention
        from searchplay.llm.weights import load_causal_lm

        self.params = params
        self.cfg = params.selfplay
        self.model_path = resolve(model_path)
        self.accelerator = accelerator or Accelerator(cpu=params.models.device == "cpu")
        require_supported_sharding(self.accelerator)
        dtype = _torch_dtype(params.models.dtype, self.accelerator.device.type)
        model = load_causal_lm(self.model_path, dtype=dtype)
        model.config.use_cache = False
        require_fp32_masters(model.parameters(), params.models.dtype)
        enable_gradient_checkpointing(model, self.cfg)
        use_lean_attention(model)  # the backward recomputes attention instead of keeping its inputs' copies
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=self.cfg.lr, weight_decay=self.cfg.weight_decay)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, _Warmup(self.cfg.warmup_steps, self.cfg.warmup_from_zero))
        self.model, self.optimizer = self.accelerator.prepare(model, self.optimizer)
        self.accelerator.register_for_checkpointing(self.scheduler)
        self.model.eval()  # no dropout: on-policy ratios start at exactly 1
        self._dtype = dtype
        self._start_stamp = weights_stamp(self.model_path)  # a reference read later must read these bytes
        self.forward = Forward(self.accelerator.device, autocast_enabled(self.cfg.autocast_bf16,
                                                                         self.accelerator.device.type),
                               self._sharded, accepts_logits_to_keep(model))
        # the moments, the frozen reference (loaded here, or read for each step) and the forward the policy runs
        self.savers = MemorySavers(self.cfg, self.forward, self.model, self.optimizer, self.model_path,
                                   lambda: self._load_reference())
        self.global_step = 0
        self._released = False  # release_training_state: no step or save after it
        self.eval_dtype = evaluation_dtype(params, self.accelerator.device.type, dtype)
        self.start_weights = self._start_weights()  # read by start_statistics; kept across load()
        self._start_stats: tuple[int, dict[str, float]] | None = None  # (global_step, start_statistics())

    # ---- public API ---------------------------------------------------------------------------------
    @property
    def unwrapped_model(self) -> Any:
        return self.accelerator.unwrap_model(self.model)

    @property
    def ref_model(self) -> Any:
        """The frozen reference in memory, or None (none, released, or on disk between its passes)."""
        return self.savers.reference

    def compute_logprobs(self, samples: list[TrainingSample]) -> list[list[float]]:
        """Current-policy log-probs of every response token (0.0 on loss_mask-0 tokens), no gradient."""
        import torch

        out = []
        prefixes = self.savers.shared_prefixes(self.model, samples)
        for batch_samples in _chunks(samples, self.cfg.micro_batch_size):
            batch = self.forward.collate(batch_samples)
            with torch.no_grad():
                logprobs = self.savers.scored_logprobs(self.model, batch_samples, batch, prefixes)
            for row, sample in enumerate(batch_samples):
                window = response_slice(sample, batch.start)
                values = logprobs[row, window].tolist()
                out.append([v if m else 0.0 for v, m in zip(values, sample.loss_mask, strict=True)])
        if self._sharded:
            reshard(self.model)  # no backward follows to shard the root and the tail again
        return out

    def update(self, samples: list[TrainingSample], mini_batches: int = 1) -> dict[str, float]:
        """One role's update (verl ``update_actor``): ``mini_batches`` optimizer steps over consecutive slices.

        pi_old is the policy before the first step for every slice: the first slice's comes from its
        own forward, the later slices' are computed up front without gradient. Each step advances the
        learning-rate schedule once (verl advances it once per ``update_actor`` call; docs/decisions/rl.md L8).
        """
        if not samples:
            raise ValueError("PolicyTrainer.update: no samples (skip the role's update when it has no data)")
        size = math.ceil(len(samples) / min(mini_batches, len(samples)))
        slices = _chunks(samples, size)
        later = [sample for part in slices[1:] for sample in part if sample.old_logprobs is None]
        if later:
            for sample, old in zip(later, self.compute_logprobs(later), strict=True):
                sample.old_logprobs = old
        return combine_stats([self.step(part) for part in slices])

    def release_training_state(self) -> None:
        """Free what only further updates read: AdamW's moments, the gradients, the frozen reference (and the
        start weights, which share its tensors); the policy stays. For a run's last act after its last step
        and checkpoint, e.g. a phase's hand-off (in fp32 at 135M: 1.1 GiB of moments, 0.5 GiB of reference).
        Nothing the policy computes changes; a later ``step`` or ``save`` raises instead of training without
        them."""
        self.optimizer.zero_grad(set_to_none=True)
        self.savers.release()
        self.optimizer.state.clear()
        self.start_weights, self._start_stats = None, None
        self._released = True

    def _check_not_released(self, action: str) -> None:
        if self._released:
            raise RuntimeError(f"PolicyTrainer.{action}: the training state was released (release_training_state)")

    def step(self, samples: list[TrainingSample]) -> dict[str, float]:
        """One optimizer step on ``samples`` (gradient accumulation over micro-batches), then one step of the
        learning-rate schedule; returns statistics (``lr``: the rate this step used)."""
        import torch

        self._check_not_released("step")
        if not samples:
            raise ValueError("PolicyTrainer.step: no samples (skip the update when a step has no valid data)")
        started = time.perf_counter()
        acc, cfg, savers = self.accelerator, self.cfg, self.savers
        num_tokens = float(sum(s.num_loss_tokens for s in samples))
        num_sequences = float(len(samples))
        micro_batches = self._shard(samples)
        before = _fingerprint(self.model)
        lr = self.scheduler.get_last_lr()[0]
        totals = torch.zeros(6, dtype=torch.float64, device=acc.device)  # loss, pg, kl, entropy, clipfrac, ratio
        savers.begin_update(self.model, samples, micro_batches, self.global_step)  # weights fixed until the step
        for index, (batch_samples, weight) in enumerate(micro_batches):
            batch = self.forward.collate(batch_samples)
            last = index == len(micro_batches) - 1
            # DDP syncs gradients once, at the last micro-batch; FSDP2 reduce-scatters each one, since its no_sync
            # would hold every unsharded gradient until the last (a 7B model's 30.5 GB in fp32 on each GPU)
            context = acc.no_sync(self.model) if not last and not acc.is_fsdp2 else nullcontext()
            with context:
                logprobs, entropy = savers.policy_logprobs(self.model, batch_samples, batch)
                # One optimizer step per call and no dropout: the weights that sampled the batch are the
                # weights now, so pi_old is this forward's value (ratio 1, as TRL's GRPO with one iteration).
                old = batch.old_logprobs if batch.old_logprobs is not None else logprobs.detach()
                ref = savers.reference_logprobs(index, batch_samples, batch, logprobs, self.global_step)
                weights = weight * token_weights(batch.mask, cfg.loss_agg_mode, num_tokens, num_sequences)
                pg, clipped = policy_loss_terms(logprobs, old, batch.advantages, cfg.clip_low, cfg.clip_high,
                                                cfg.clip_ratio_c)
                kl = low_var_kl(logprobs, ref) if ref is not None else torch.zeros_like(logprobs)
                pg_loss = (pg * weights).sum()
                kl_loss = (kl * weights).sum()
                loss = pg_loss + cfg.kl_beta * kl_loss
                acc.backward(loss * acc.num_processes)  # processes' gradients are averaged, not summed
            ratio = torch.exp(logprobs.detach() - old)
            totals += torch.stack([loss.detach(), pg_loss.detach(), kl_loss.detach(), (entropy * weights).sum(),
                                   (clipped * weights).sum(), (ratio * weights).sum()]).double()
        grad_norm = float(acc.clip_grad_norm_(self.model.parameters(), cfg.max_grad_norm))
        skip_nonfinite_step(self.optimizer, grad_norm, self.global_step + 1)
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        savers.end_update()
        self.global_step += 1
        totals = acc.reduce(totals, reduction="sum")
        changed = acc.reduce(torch.tensor([float(_fingerprint(self.model) != before)], device=acc.device), "sum")
        seconds = time.perf_counter() - started
        loss, pg_loss, kl, entropy, clip_frac, ratio = totals.tolist()
        return {"loss": loss, "pg_loss": pg_loss, "kl": kl, "entropy": entropy, "clip_frac": clip_frac,
                "ratio_mean": ratio, "grad_norm": grad_norm, "tokens": num_tokens,
                "sequences": num_sequences, "lr": lr, "weights_changed": float(changed.item() > 0),
                "step": float(self.global_step), "seconds": seconds, "tokens_per_s": num_tokens / max(seconds, 1e-9),
                "optimizer_steps": 1.0}

    def save(self, directory: str | Path) -> Path:
        """The resume state: weights, optimizer, scheduler, RNG states and step counter, written atomically.

        Weights and optimizer go through ``torch.distributed.checkpoint`` (``searchplay.rl.resume_state``): under
        FSDP each process writes its own shard, with no gather. Everything goes to ``<dir>.partial`` first, then is
        renamed to ``<dir>``; a crash leaves the previous state intact. Not a Hugging Face folder: ``export`` is.
        """
        from searchplay.rl.resume_state import save_resume_state

        self._check_not_released("save")
        acc = self.accelerator
        final, partial = self._fresh_partial(directory)
        if acc.is_main_process:
            partial.mkdir(parents=True)
        acc.wait_for_everyone()
        save_resume_state(partial, self.model, _torch_optimizer(self.optimizer), acc.process_index)
        acc.wait_for_everyone()
        if acc.is_main_process:
            state = {"global_step": self.global_step, "scheduler": self.scheduler.state_dict(),
                     "model_path": self.model_path, "params": self.params.digest()}
            (partial / TRAINER_STATE).write_text(json.dumps(state, indent=2))
            _replace(partial, final)
        acc.wait_for_everyone()
        return final

    def load(self, directory: str | Path) -> None:
        """Restore a ``save`` directory: weights, optimizer, scheduler, RNG states, step counter (each process
        reads its shards)."""
        from searchplay.rl.resume_state import load_resume_state

        final = Path(directory)
        if not (final / TRAINER_STATE).is_file():
            unfinished = final.with_name(final.name + ".partial").exists()
            hint = " (only an unfinished .partial save exists)" if unfinished else ""
            raise FileNotFoundError(f"{final}: no PolicyTrainer checkpoint ({TRAINER_STATE} missing){hint}")
        state = json.loads((final / TRAINER_STATE).read_text())
        load_resume_state(final, self.model, _torch_optimizer(self.optimizer), self.accelerator.process_index)
        self.scheduler.load_state_dict(state["scheduler"])
        self.global_step = int(state["global_step"])
        self.model.eval()
        self._start_stats = None

    def start_statistics(self) -> dict[str, float]:
        """How far the weights are from the start weights (``model_path``), one pass for both figures:

        - ``distance``: ||theta - theta_0||_2 over every parameter; NaN without the frozen reference
          (``selfplay.kl_beta: 0``);
        - ``changed_share``: the share of all parameter elements whose value cast to ``eval_dtype`` (the dtype
          rollouts and evaluation run in) differs from the start weights' cast: 0 when no update reached an answer.

        Each process compares its own shards (under FSDP the reference is sharded like the policy), then one
        all-reduce sums them. Computed once per optimizer step. theta_0 is the reference in memory; with the
        reference on disk (``selfplay.reference_on_disk``) one read outside a step is kept for the next step's
        reference pass, so no read serves the statistics alone. Both NaN after ``release_training_state``."""
        import torch

        if self._start_stats is not None and self._start_stats[0] == self.global_step:
            return self._start_stats[1]
        if self._released:
            return {"distance": math.nan, "changed_share": math.nan}
        reference = self.savers.start_reference()  # on disk: a read the next step's reference pass uses and drops
        exact = reference is not None  # the start weights themselves, not a cast copy
        if self._sharded:
            reshard(self.model)  # tensors a forward left whole would not match the reference's shards
        start = local_shards(reference.parameters()) if exact else self.start_weights
        squares, changed, total = compare_with_start(local_shards(self.model.parameters()), start, self.eval_dtype)
        sums = self.accelerator.reduce(torch.tensor([squares, changed, total], dtype=torch.float64,
                                                    device=self.accelerator.device), reduction="sum").tolist()
        stats = {"distance": sums[0] ** 0.5 if exact else math.nan,
                 "changed_share": sums[1] / sums[2] if sums[2] else math.nan}
        self._start_stats = (self.global_step, stats)
        return stats

    def export(self, directory: str | Path) -> Path:
        """The policy as a Hugging Face folder (``from_pretrained``-loadable: config, safetensors, tokenizer), written
        atomically by the main process; collective (under FSDP the shards are gathered here, one full copy on the
        main process's CPU). For where something reads the model: a run's end, not every checkpoint."""
        acc = self.accelerator
        final, partial = self._fresh_partial(directory)
        state_dict = None
        if self._sharded:
            from searchplay.rl.resume_state import gathered_weights

            state_dict = gathered_weights(self.model)
        if acc.is_main_process:
            self.unwrapped_model.save_pretrained(partial, state_dict=state_dict)
            _copy_tokenizer(self.model_path, partial)
            _replace(partial, final)
        acc.wait_for_everyone()
        return final

    def _fresh_partial(self, directory: str | Path) -> tuple[Path, Path]:
        """(``directory``, its ``.partial`` sibling), the latter removed by the main process (a killed write's) before
        every process goes on."""
        final = Path(directory)
        partial = final.with_name(final.name + ".partial")
        if self.accelerator.is_main_process and partial.exists():
            shutil.rmtree(partial)
        self.accelerator.wait_for_everyone()
        return final, partial

    def start_change_share(self) -> float:
        """``start_statistics()["changed_share"]`` (logged as ``train/bf16_changed_share``)."""
        return self.start_statistics()["changed_share"]

    def start_distance(self) -> float:
        """``start_statistics()["distance"]`` (logged as ``train/weight_delta_l2_from_start``)."""
        return self.start_statistics()["distance"]

    # ---- internals ----------------------------------------------------------------------------------
    def _start_weights(self) -> list[Any] | None:
        """The weights at construction (``model_path``, the start of self-play, also after a later ``load``) where
        no frozen reference holds them (``selfplay.kl_beta: 0``): a copy of this process's shards in ``eval_dtype``
        (270 MB in bf16 at 135M). None where the reference is kept (in memory, or on disk)."""
        if self.savers.keeps_reference:
            return None  # start_statistics reads the reference's own tensors
        return cast_snapshot(local_shards(self.model.parameters()), self.eval_dtype)

    def _load_reference(self) -> Any:
        """The frozen reference, loaded from ``model_path`` in the policy's dtype; a weights file changed since the
        trainer was made (another run wrote the start checkpoint again) is an error, not another reference."""
        from searchplay.llm.weights import load_causal_lm, read_weights_into_memory

        if weights_stamp(self.model_path) != self._start_stamp:
            raise RuntimeError(f"{self.model_path}: the start checkpoint's weights changed since this training "
                               "began (written again by another run?). The frozen reference is read from it for "
                               "each update (selfplay.reference_on_disk), so training stops instead of using "
                               "another reference; resume once that run is done, or set "
                               "selfplay.reference_on_disk=false to keep the reference in memory")

        ref = load_causal_lm(self.model_path, dtype=self._dtype).requires_grad_(False).eval()
        ref.config.use_cache = False
        if self.accelerator.device.type == "cpu" and Path(self.model_path).is_dir():
            read_weights_into_memory(ref, self.model_path)  # heap memory, not a file mapping on top of it
        if self._sharded:
            return self._shard_like_policy(ref)
        return ref.to(self.accelerator.device)

    def _shard_like_policy(self, reference: Any) -> Any:
        """The reference sharded by the policy's FSDP2 plugin (its wrap policy, mesh, device and mixed
        precision): frozen, so no gradient and no optimizer state; kept out of the accelerator's models, which
        ``save`` writes."""
        from accelerate.utils import fsdp2_prepare_model

        return fsdp2_prepare_model(self.accelerator, reference).requires_grad_(False).eval()

    @property
    def _sharded(self) -> bool:
        return self.accelerator.distributed_type.name in ("FSDP", "DEEPSPEED", "MEGATRON_LM")

    def _shard(self, samples: list[TrainingSample]) -> list[tuple[list[TrainingSample], float]]:
        """This process's micro-batches (sorted by length to limit padding); every process runs the same
        number of them (FSDP needs matching collectives): missing ones are a real sample with weight 0."""
        acc, size = self.accelerator, self.cfg.micro_batch_size
        ordered = sorted(samples, key=lambda s: len(s.prompt_ids) + len(s.response_ids), reverse=True)
        mine = ordered[acc.process_index::acc.num_processes]
        count = math.ceil(math.ceil(len(samples) / acc.num_processes) / size)
        batches = [(chunk, 1.0) for chunk in _chunks(mine, size)]
        return batches + [([ordered[-1]], 0.0)] * (count - len(batches))


def combine_stats(stats: list[dict[str, float]]) -> dict[str, float]:
    """Statistics of several optimizer steps as one row: counts and seconds summed, losses and ratios
    averaged over steps, the largest gradient norm beside the mean, the learning rate the last step used.
    No step at all (an iteration with nothing to train on): zero counts, NaN for the rest."""
    summed = ("tokens", "sequences", "seconds", "optimizer_steps")
    averaged = ("loss", "pg_loss", "kl", "entropy", "clip_frac", "ratio_mean", "grad_norm")
    out = {key: sum(row[key] for row in stats) for key in summed}
    if not stats:
        undefined = (*averaged, "grad_norm_max", "lr", "step", "tokens_per_s")
        return {**out, **dict.fromkeys(undefined, math.nan), "weights_changed": 0.0}
    for key in averaged:
        out[key] = sum(row[key] for row in stats) / len(stats)
    out["grad_norm_max"] = max(row["grad_norm"] for row in stats)
    out["weights_changed"] = max(row["weights_changed"] for row in stats)
    out["lr"], out["step"] = stats[-1]["lr"], stats[-1]["step"]
    out["tokens_per_s"] = out["tokens"] / max(out["seconds"], 1e-9)
    return out


def _chunks(items: list, size: int) -> list[list]:
    return [items[i:i + size] for i in range(0, len(items), size)]


FINGERPRINT_CHUNK = 1 << 20  # elements summed at a time in float64 (8 MiB, not a whole tensor's float64 copies)


def _fingerprint(model: Any) -> tuple[float, ...]:
    """(sum, sum of squares) in float64 per parameter tensor of this process's shard: detects any weight change.
    A chunk at a time: float64 copies of a whole embedding (49,152 x 576 at 135M) would add 0.43 GiB at the end
    of every optimizer step, where the step's own peak is. The sums stay on the device until one ``tolist`` (on a
    GPU an ``item`` a chunk would wait for the device thousands of times a step at 7B)."""
    import torch

    sums: list[Any] = []
    with torch.no_grad():
        for param in local_shards(model.parameters()):
            total = squares = torch.zeros((), dtype=torch.float64, device=param.device)
            for chunk in param.detach().reshape(-1).split(FINGERPRINT_CHUNK):
                wide = chunk.double()
                total = total + wide.sum()  # the same additions, in the same order, as Python floats did
                squares = squares + wide.square().sum()
            sums += (total, squares)
    return tuple(torch.stack(sums).tolist()) if sums else ()


def require_supported_sharding(accelerator: Any) -> None:
    """Refuse a sharding the trainer cannot run: it shards the policy and its frozen reference with accelerate's
    FSDP2 plugin (``fsdp_version: 2``). DeepSpeed's engine steps at every micro-batch unless told the accumulation,
    does not honour the trainer's ``no_sync``, and needs a dataloader to size its micro-batches; FSDP1 and
    Megatron-LM would shard the reference differently from the policy."""
    kind = accelerator.distributed_type.name
    if kind == "FSDP" and not accelerator.is_fsdp2:
        raise ConfigError("accelerate FSDP with fsdp_version 1: PolicyTrainer shards with FSDP2; set fsdp_version: 2 "
                          "(accelerate_configs/fsdp.yaml)")
    if kind in ("DEEPSPEED", "MEGATRON_LM"):
        raise ConfigError(f"accelerate distributed_type {kind}: PolicyTrainer shards with FSDP2 only "
                          "(accelerate_configs/fsdp.yaml); see docs/scale.md")


def require_fp32_masters(parameters: Any, setting: str) -> None:
    """Refuse an optimizer over bf16/fp16 weights: AdamW would step them directly, and an update under the format's
    spacing is lost (lr 1e-6 moves a weight of 0.02 by under 1% of bf16's spacing there)."""
    import torch

    low = sorted({str(p.dtype) for p in parameters if p.requires_grad and p.dtype in (torch.bfloat16, torch.float16)})
    if low:
        raise ConfigError(f"models.dtype={setting}: the optimizer would step {', '.join(low)} weights, where small "
                          "updates are lost; train fp32 master weights: models.dtype: float32 with "
                          "selfplay.autocast_bf16: true (bf16 compute), or accelerate's FSDP mixed precision")


def _torch_dtype(name: str, device_type: str) -> Any:
    import torch

    if name == "auto":  # fp32 master weights; bf16 compute is selfplay.autocast_bf16's
        return torch.float32
    return getattr(torch, name)


def _torch_optimizer(optimizer: Any) -> Any:
    """The torch optimizer inside accelerate's wrapper (what ``torch.distributed.checkpoint`` reads and fills)."""
    return getattr(optimizer, "optimizer", optimizer)


def _replace(partial: Path, final: Path) -> None:
    """Rename a finished ``partial`` folder to ``final`` (an older ``final`` goes), following the umask."""
    follow_umask(partial)
    old = final.with_name(final.name + ".old")
    if final.exists():
        final.rename(old)
    partial.rename(final)
    shutil.rmtree(old, ignore_errors=True)


def _copy_tokenizer(model_path: str, target: Path) -> None:
    """Put the tokenizer next to the weights so the checkpoint is a complete HF folder (if it has one)."""
    from transformers import AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(model_path)
    except (OSError, ValueError):
        return  # a model folder without tokenizer files (e.g. a test model): weights + config only
    tokenizer.save_pretrained(target)
