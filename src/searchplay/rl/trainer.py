"""``PolicyTrainer``: one clipped policy-gradient update of the shared Proposer/Solver weights per call.

The same code runs on CPU, one GPU, or several GPUs with FSDP (``accelerate launch --config_file
accelerate_configs/fsdp.yaml ...``). Every process receives the SAME list of samples and trains on its
share; the global token count is known to all, so token-mean aggregation is exact across processes.

Segmented forward (``selfplay.segmented_forward``, docs/decisions/rl.md L14): the policy's forward with
gradient runs one sequence at a time through ``searchplay.rl.segments``; prompt and ``<information>``
tokens fill a KV cache without gradient. Same log-probs; the gradient skips their keys and values.

Batch mapping (docs/decisions/rl.md L10): one ``step(samples)`` = one optimizer step; the samples are
split into micro-batches of ``selfplay.micro_batch_size`` sequences whose gradients are accumulated.
One ``update(samples, mini_batches)`` = one role's update, verl's ``update_actor``: ``mini_batches``
optimizer steps over consecutive slices, every slice's pi_old taken from the policy before the first
step. The learning-rate schedule advances once per optimizer step, so its warm-up counts optimizer steps
(docs/decisions/rl.md L8). The SSP code's "global batch 256 / mini-batch 128" is one Proposer update with
1 step and one Solver update with 2 steps (x5 rollouts) per iteration.

Idle state on disk (``selfplay.moments_on_disk`` / ``reference_on_disk``, on a CPU by default; docs/decisions/rl.md
L14c): AdamW's moments wait in a file between optimizer steps (``searchplay.moments``), and the frozen
reference is read from ``model_path`` for each step's reference pass, which runs before the policy's forward,
and dropped after it (a read by ``start_statistics`` waits for that pass instead). Neither is needed while the
policy's graph is alive; every value stays the same.

Start weights (``start_statistics``): the L2 distance from the start weights and the share of parameters whose
value in the dtype rollouts and evaluation run in differs from theirs (``searchplay.rl.drift``; an fp32 update below
the bf16 rounding step changes no answer), in one pass over this process's shards against the reference already in
memory, and one all-reduce.

Under FSDP (accelerate's FSDP2 plugin) the frozen reference is sharded with the policy's plugin: the same units,
mesh, device and mixed precision, so every shard of it sits beside the policy's shard of the same parameter.
"""

from __future__ import annotations

import json
import logging
import math
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from searchplay.config import ConfigError
from searchplay.io import follow_umask
from searchplay.llm.weights import weights_stamp
from searchplay.moments import MomentsOnDisk, memory_saver_enabled
from searchplay.precision import autocast_enabled
from searchplay.prefix_kv import PrefixStore, shared_prefixes
from searchplay.rl.drift import cast_snapshot, compare_with_start, evaluation_dtype, local_shards
from searchplay.rl.losses import entropy_from_logits, low_var_kl, policy_loss_terms, token_weights
from searchplay.rl.sample import TrainingSample

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from searchplay.config import Params

TRAINER_STATE = "trainer_state.json"
REF_PREFIX_ENTRIES = 64  # the reference's stored prefixes before the store starts afresh (fp32 at 135M: 45 KB a token,
# 11 MB for a 250-token Solver prompt, 28 MB for the KG Proposer's 630-token instruction block)


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


@dataclass
class _MicroBatch:
    """Right-padded tensors; the "window" holds response positions start+1 .. L-1 of every row."""

    input_ids: Any
    attention_mask: Any
    position_ids: Any
    start: int  # logits from this position on predict every response token
    targets: Any  # [B, W] token ids at window positions
    mask: Any  # [B, W] loss mask (1: model token of a response)
    advantages: Any  # [B, W]
    old_logprobs: Any | None  # [B, W] or None


def enable_gradient_checkpointing(model: Any, cfg: Any) -> None:
    """``selfplay.gradient_checkpointing``: transformers' recomputation of each decoder layer in the backward of the
    full forward. The segmented forward has its own (``recompute_layers``), so the two are not combined."""
    if not cfg.gradient_checkpointing:
        return
    if cfg.segmented_forward:
        raise ConfigError("selfplay.gradient_checkpointing needs selfplay.segmented_forward=false (the segmented "
                          "forward recomputes its layers with selfplay.recompute_layers instead)")
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    log.info("gradient checkpointing: each decoder layer recomputed in the backward (selfplay.gradient_checkpointing)")


@contextmanager
def checkpointed_layers(model: Any, enabled: bool) -> Iterator[None]:
    """While the block runs, the decoder layers that ``enable_gradient_checkpointing`` marked recompute in the
    backward. transformers checkpoints a layer only in training mode; the trainer keeps the model in eval mode (no
    dropout, so on-policy ratios start at 1), so only the layers' own flag is set, not their children's (their
    dropouts stay off), and only for the update's forward (generation through the same model keeps its cache)."""
    layers = [m for m in model.modules() if getattr(m, "gradient_checkpointing", False) is True] if enabled else []
    modes = [layer.training for layer in layers]
    for layer in layers:
        layer.training = True
    try:
        yield
    finally:
        for layer, mode in zip(layers, modes, strict=True):
            layer.training = mode


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
        self.moments = None  # AdamW's moments on disk between steps (selfplay.moments_on_disk)
        if memory_saver_enabled(self.cfg.moments_on_disk, self.accelerator.device.type) and not self._sharded:
            self.moments = MomentsOnDisk(getattr(self.optimizer, "optimizer", self.optimizer), self.cfg.checkpoint_dir)
        self._dtype = dtype
        # the frozen reference: resident, or read from model_path for each step's reference pass and dropped
        # before the policy's forward (selfplay.reference_on_disk)
        self._reference_from_disk = (self.cfg.kl_beta > 0 and not self._sharded
                                     and memory_saver_enabled(self.cfg.reference_on_disk, self.accelerator.device.type))
        # the segmented forward's scored layers recomputed in the backward (selfplay.recompute_layers)
        self._recompute_layers = memory_saver_enabled(self.cfg.recompute_layers, self.accelerator.device.type)
        self._start_stamp = weights_stamp(self.model_path)  # a reference read later must read these bytes
        self.ref_model = None
        if self.cfg.kl_beta > 0 and not self._reference_from_disk:
            self.ref_model = self._load_reference()
        elif self._reference_from_disk:
            log.info("the frozen reference is read from %s for each update's reference pass and dropped after it "
                     "(selfplay.reference_on_disk=%s)", self.model_path, self.cfg.reference_on_disk)
        self.global_step = 0
        self._released = False  # release_training_state: no step or save after it
        self._keep_logits = _accepts_logits_to_keep(model)
        self._ref_prefixes = PrefixStore()  # the frozen reference's shared prompt prefixes, kept across steps
        self._autocast_on = autocast_enabled(self.cfg.autocast_bf16, self.accelerator.device.type)
        self.eval_dtype = evaluation_dtype(params, self.accelerator.device.type, dtype)
        self.start_weights = self._start_weights()  # read by start_statistics; kept across load()
        self._start_stats: tuple[int, dict[str, float]] | None = None  # (global_step, start_statistics())

    # ---- public API ---------------------------------------------------------------------------------
    @property
    def unwrapped_model(self) -> Any:
        return self.accelerator.unwrap_model(self.model)

    def compute_logprobs(self, samples: list[TrainingSample]) -> list[list[float]]:
        """Current-policy log-probs of every response token (0.0 on loss_mask-0 tokens), no gradient."""
        import torch

        out = []
        store = self._prefix_store(self.model, samples) if self._segmented else None
        for batch_samples in _chunks(samples, self.cfg.micro_batch_size):
            batch = self._collate(batch_samples)
            with torch.no_grad():
                if store is not None:
                    with self._autocast():
                        logprobs = self._sequence_logprobs(self.model, batch_samples, batch, store)
                else:
                    logprobs, _ = self._logprobs(self.model, batch)
            for row, sample in enumerate(batch_samples):
                window = _response_slice(sample, batch.start)
                values = logprobs[row, window].tolist()
                out.append([v if m else 0.0 for v, m in zip(values, sample.loss_mask, strict=True)])
        if self._sharded:
            _reshard(self.model)  # no backward follows to shard the root and the tail again
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
        if self.moments is not None:
            self.moments.release()
        self.optimizer.state.clear()
        self.ref_model, self.start_weights, self._ref_prefixes = None, None, PrefixStore()
        self._start_stats = None
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
        acc, cfg = self.accelerator, self.cfg
        num_tokens = float(sum(s.num_loss_tokens for s in samples))
        num_sequences = float(len(samples))
        micro_batches = self._shard(samples)
        before = _fingerprint(self.model)
        lr = self.scheduler.get_last_lr()[0]
        totals = torch.zeros(6, dtype=torch.float64, device=acc.device)  # loss, pg, kl, entropy, clipfrac, ratio
        store = self._prefix_store(self.model, samples) if self._segmented else None  # weights fixed until the step
        refs = self._reference_pass(micro_batches)  # with the reference on disk: read, used and dropped here
        for index, (batch_samples, weight) in enumerate(micro_batches):
            batch = self._collate(batch_samples)
            last = index == len(micro_batches) - 1
            context = acc.no_sync(self.model) if not last else nullcontext()  # sync gradients once
            with context:
                if self._segmented:
                    with self._autocast():  # one context for the micro-batch: bf16 weight copies made once
                        logprobs, entropy = self._segmented_logprobs(batch_samples, batch, store)
                else:
                    with checkpointed_layers(self.model, cfg.gradient_checkpointing):
                        logprobs, entropy = self._logprobs(self.model, batch, with_entropy=True)
                # One optimizer step per call and no dropout: the weights that sampled the batch are the
                # weights now, so pi_old is this forward's value (ratio 1, as TRL's GRPO with one iteration).
                old = batch.old_logprobs if batch.old_logprobs is not None else logprobs.detach()
                ref = (refs[index] if refs is not None
                       else self._reference_logprobs(batch_samples, batch, logprobs, self.ref_model))
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
        grad_norm = acc.clip_grad_norm_(self.model.parameters(), cfg.max_grad_norm)
        self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.global_step += 1
        totals = acc.reduce(totals, reduction="sum")
        changed = acc.reduce(torch.tensor([float(_fingerprint(self.model) != before)], device=acc.device), "sum")
        seconds = time.perf_counter() - started
        loss, pg_loss, kl, entropy, clip_frac, ratio = totals.tolist()
        return {"loss": loss, "pg_loss": pg_loss, "kl": kl, "entropy": entropy, "clip_frac": clip_frac,
                "ratio_mean": ratio, "grad_norm": float(grad_norm), "tokens": num_tokens,
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
        if self.ref_model is None and self._reference_from_disk:
            self.ref_model = self._load_reference()  # the next step's reference pass uses and drops it
        exact = self.ref_model is not None  # the start weights themselves, not a cast copy
        if self._sharded:
            _reshard(self.model)  # tensors a forward left whole would not match the reference's shards
        start = local_shards(self.ref_model.parameters()) if exact else self.start_weights
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
        if self.ref_model is not None or self._reference_from_disk:
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

    @property
    def _segmented(self) -> bool:
        """``selfplay.segmented_forward`` where the model splits into decoder and head on one process."""
        return self.cfg.segmented_forward and not self._sharded and _decoder_and_head(self.model) is not None

    def _segmented_logprobs(self, samples: list[TrainingSample], batch: _MicroBatch,
                            store: PrefixStore) -> tuple[Any, Any]:
        """``_logprobs`` of the policy with gradient, one sequence at a time through ``segmented_logits``:
        the same values over the window [B, W]; prompt and ``<information>`` runs without gradient, a prompt
        prefix shared with other samples taken from ``store``."""
        import torch
        import torch.nn.functional as F

        from searchplay.rl.segments import first_untrained_end, segmented_logits

        decoder, head = _decoder_and_head(self.model)
        width = batch.mask.shape[1]
        rows, entropies = [], []
        for sample in samples:
            ids = torch.tensor(sample.prompt_ids + sample.response_ids, device=self.accelerator.device)
            mask = _sequence_mask(sample)
            row = torch.zeros(width, device=ids.device)
            entropy = torch.zeros(width, device=ids.device)
            prefix = store.longest(sample.prompt_ids, first_untrained_end(mask))
            for run, logits in segmented_logits(decoder, head, self.model.config, ids, mask, self._autocast, prefix,
                                                recompute=self._recompute_layers):
                window = torch.arange(run.start, run.end, device=ids.device) - batch.start  # position -> window
                scored = -F.cross_entropy(logits, ids[run.start + 1:run.end + 1], reduction="none")
                row = row.index_put((window,), scored)
                with torch.no_grad():
                    entropy[window] = entropy_from_logits(logits.detach())
            rows.append(row)
            entropies.append(entropy)
        return torch.stack(rows), torch.stack(entropies)

    def _reference_pass(self, micro_batches: list[tuple[list[TrainingSample], float]]) -> list[Any] | None:
        """With the reference on disk (``selfplay.reference_on_disk``) and after the first step: every
        micro-batch's log pi_ref, from a reference read for this pass (or the one ``start_statistics`` read and
        kept), dropped so it is gone before the policy's forward and backward (0.5 GiB at 135M in fp32). Else None:
        the loop asks ``_reference_logprobs``."""
        if not self._reference_from_disk:
            return None
        kept, self.ref_model = self.ref_model, None  # one read by start_statistics, never in the policy's forward
        if self.global_step == 0:
            return None
        reference = kept if kept is not None else self._load_reference()
        return [self._reference_logprobs(samples, self._collate(samples), None, reference)
                for samples, _ in micro_batches]

    def _reference_logprobs(self, samples: list[TrainingSample], batch: _MicroBatch, logprobs: Any,
                            reference: Any) -> Any:
        """log pi_ref over the window, or None without KL. Before the first optimizer step the policy IS the
        reference (both loaded from ``model_path``), so its own values are used and the forward is saved.
        The reference never changes, so the keys and values of its shared prompt prefixes are kept across steps."""
        import torch

        if self.cfg.kl_beta <= 0 or self._released:
            return None
        if self.global_step == 0:
            return logprobs.detach()
        with torch.no_grad():
            if self._segmented:
                if len(self._ref_prefixes.entries) > REF_PREFIX_ENTRIES:
                    self._ref_prefixes = PrefixStore()
                self._extend_prefix_store(self._ref_prefixes, reference, samples)
                return self._sequence_logprobs(reference, samples, batch, self._ref_prefixes)
            logprobs = self._logprobs(reference, batch)[0]
        if self._sharded:
            _reshard(reference)
        return logprobs

    def _prefix_store(self, model: Any, samples: list[TrainingSample]) -> PrefixStore:
        """Keys and values of the prompt prefixes ``samples`` share, under ``model``'s current weights."""
        store = PrefixStore()
        self._extend_prefix_store(store, model, samples)
        return store

    def _extend_prefix_store(self, store: PrefixStore, model: Any, samples: list[TrainingSample]) -> None:
        """Add the shared prompt prefixes of ``samples`` to ``store`` (no gradient, the forward's autocast)."""
        import torch

        from searchplay.rl.segments import first_untrained_end

        prompts = [sample.prompt_ids for sample in samples]
        limits = [first_untrained_end(_sequence_mask(sample)) for sample in samples]
        prefixes = [p for p in shared_prefixes(prompts, limits) if p not in store.entries]
        if not prefixes:
            return
        decoder, _ = _decoder_and_head(model)
        with torch.no_grad(), self._autocast():
            store.build(decoder, model.config, prefixes)

    def _sequence_logprobs(self, model: Any, samples: list[TrainingSample], batch: _MicroBatch,
                           store: PrefixStore) -> Any:
        """log pi over the window [B, W] without gradient, one forward per sequence after its shared prefix."""
        import torch
        import torch.nn.functional as F

        from searchplay.rl.segments import first_untrained_end, scored_logits

        decoder, head = _decoder_and_head(model)
        rows = []
        for sample in samples:
            ids = torch.tensor(sample.prompt_ids + sample.response_ids, device=self.accelerator.device)
            mask = _sequence_mask(sample)
            prefix = store.longest(sample.prompt_ids, first_untrained_end(mask))
            positions, logits = scored_logits(decoder, head, model.config, ids, mask, self._autocast, prefix)
            row = torch.zeros(batch.mask.shape[1], device=ids.device)
            row[positions - batch.start] = -F.cross_entropy(logits, ids[positions + 1], reduction="none")
            rows.append(row)
        return torch.stack(rows)

    def _autocast(self) -> Any:
        """bf16 autocast of the forward (``selfplay.autocast_bf16``); weights and optimizer stay in their dtype."""
        import torch

        if not self._autocast_on:
            return nullcontext()
        return torch.autocast(device_type=self.accelerator.device.type, dtype=torch.bfloat16)

    def _shard(self, samples: list[TrainingSample]) -> list[tuple[list[TrainingSample], float]]:
        """This process's micro-batches (sorted by length to limit padding); every process runs the same
        number of them (FSDP needs matching collectives): missing ones are a real sample with weight 0."""
        acc, size = self.accelerator, self.cfg.micro_batch_size
        ordered = sorted(samples, key=lambda s: len(s.prompt_ids) + len(s.response_ids), reverse=True)
        mine = ordered[acc.process_index::acc.num_processes]
        count = math.ceil(math.ceil(len(samples) / acc.num_processes) / size)
        batches = [(chunk, 1.0) for chunk in _chunks(mine, size)]
        return batches + [([ordered[-1]], 0.0)] * (count - len(batches))

    def _collate(self, samples: list[TrainingSample]) -> _MicroBatch:
        import torch

        device = self.accelerator.device
        pad_id = 0  # never attended to (attention mask 0) and never scored (loss mask 0)
        seqs = [s.prompt_ids + s.response_ids for s in samples]
        length = max(len(s) for s in seqs)
        start = min(len(s.prompt_ids) for s in samples) - 1
        width = length - start - 1
        input_ids = torch.full((len(seqs), length), pad_id, dtype=torch.long)
        attention = torch.zeros((len(seqs), length), dtype=torch.long)
        mask = torch.zeros((len(seqs), width))
        advantages = torch.zeros((len(seqs), width))
        old = torch.zeros((len(seqs), width)) if all(s.old_logprobs is not None for s in samples) else None
        for row, (sample, seq) in enumerate(zip(samples, seqs, strict=True)):
            input_ids[row, : len(seq)] = torch.tensor(seq)
            attention[row, : len(seq)] = 1
            window = _response_slice(sample, start)
            mask[row, window] = torch.tensor(sample.loss_mask, dtype=torch.float)
            advantages[row, window] = torch.tensor(sample.advantages, dtype=torch.float)
            if old is not None:
                old[row, window] = torch.tensor(sample.old_logprobs, dtype=torch.float)
        position_ids = torch.arange(length).unsqueeze(0).expand(len(seqs), -1)  # right padding: 0..len-1
        targets = input_ids[:, start + 1:]
        return _MicroBatch(input_ids.to(device), attention.to(device), position_ids.to(device), start,
                           targets.to(device), mask.to(device), advantages.to(device),
                           old.to(device) if old is not None else None)

    def _logprobs(self, model: Any, batch: _MicroBatch, with_entropy: bool = False) -> tuple[Any, Any]:
        """log pi(token) over the window [B, W] (fp32; 0 where the loss mask is 0), and per-token entropy if asked
        (no gradient).

        Only model tokens are scored: the LM head (49k x 576, 28M of SmolLM2's 135M parameters) runs on the
        hidden states of loss-mask-1 positions, not on the ``<information>`` tokens.
        """
        import torch
        import torch.nn.functional as F

        length = batch.input_ids.shape[1]
        selected = batch.mask.bool()
        split = _decoder_and_head(model) if not self._sharded else None
        with self._autocast():
            inputs = {"input_ids": batch.input_ids, "attention_mask": batch.attention_mask,
                      "position_ids": batch.position_ids, "use_cache": False}
            if split is not None:
                decoder, head = split
                hidden = decoder(**inputs).last_hidden_state[:, batch.start:-1]  # positions start .. L-2
                logits = head(hidden[selected]).float()  # [N, V]: the N model tokens only
            else:
                kwargs = {"logits_to_keep": length - batch.start} if self._keep_logits else {}
                logits = model(**inputs, **kwargs).logits[:, -(length - batch.start):-1][selected].float()
        scored = -F.cross_entropy(logits, batch.targets[selected], reduction="none")
        logprobs = torch.zeros(batch.mask.shape, dtype=scored.dtype, device=scored.device).masked_scatter(
            selected, scored)
        entropy = None
        if with_entropy:
            with torch.no_grad():
                entropy = torch.zeros_like(logprobs).masked_scatter(selected, entropy_from_logits(logits.detach()))
        return logprobs, entropy


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


def _sequence_mask(sample: TrainingSample) -> list[int]:
    """The loss mask over prompt + response: the prompt is never scored."""
    return [0] * len(sample.prompt_ids) + list(sample.loss_mask)


def _response_slice(sample: TrainingSample, start: int) -> slice:
    first = len(sample.prompt_ids) - start - 1
    return slice(first, first + len(sample.response_ids))


def _chunks(items: list, size: int) -> list[list]:
    return [items[i:i + size] for i in range(0, len(items), size)]


FINGERPRINT_CHUNK = 1 << 20  # elements summed at a time in float64 (8 MiB, not a whole tensor's float64 copies)


def _fingerprint(model: Any) -> tuple[float, ...]:
    """(sum, sum of squares) in float64 per parameter tensor of this process's shard: detects any weight change.
    A chunk at a time: float64 copies of a whole embedding (49,152 x 576 at 135M) would add 0.43 GiB at the end
    of every optimizer step, where the step's own peak is."""
    import torch

    sums: list[float] = []
    with torch.no_grad():
        for param in local_shards(model.parameters()):
            total = squares = 0.0
            for chunk in param.detach().reshape(-1).split(FINGERPRINT_CHUNK):
                wide = chunk.double()
                total += wide.sum().item()
                squares += wide.square().sum().item()
            sums += (total, squares)
    return tuple(sums)


def _reshard(model: Any) -> None:
    """Shard again the FSDP2 units of a frozen model that keep their parameters gathered after a forward (the root
    and the tail, ``reshard_after_forward=False``): without a backward nothing else would, and its parameters would
    stay whole on every process."""
    from torch.distributed.fsdp import FSDPModule

    for module in model.modules():
        if isinstance(module, FSDPModule):
            module.reshard()


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


def _decoder_and_head(model: Any) -> tuple[Any, Any] | None:
    """(decoder, LM head) for models whose logits are exactly ``head(decoder(x).last_hidden_state)``; None for
    any other class (some scale or soft-cap their logits), which then runs whole."""
    if type(model).__name__ not in _PLAIN_HEAD_MODELS:
        return None
    return model.get_decoder(), model.get_output_embeddings()


_PLAIN_HEAD_MODELS = {"LlamaForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM", "MistralForCausalLM"}


def _accepts_logits_to_keep(model: Any) -> bool:
    import inspect

    return "logits_to_keep" in inspect.signature(model.forward).parameters


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
