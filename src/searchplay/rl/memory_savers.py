"""The RL update's memory savers, behind the one seam ``PolicyTrainer`` calls at fixed points.

The first two change what a step keeps in memory, never a value it computes (tested to the bit); the segmented
forward also changes the gradient, which it truncates at the segments' boundaries (docs/decisions/rl.md L14,
cosine about 0.83 to the exact one; ``selfplay.segmented_forward`` false keeps the exact gradient):

- AdamW's moments on disk between optimizer steps (``selfplay.moments_on_disk``; ``searchplay.moments``: the
  hooks sit on the optimizer, so the step itself does nothing for them);
- the frozen reference on disk (``selfplay.reference_on_disk``): read from the start checkpoint for each step's
  reference pass, which runs before the policy's forward (``begin_update``), and dropped after it; a read by the
  start statistics (``start_reference``) is kept for the next pass instead;
- the segmented forward (``selfplay.segmented_forward``, ``recompute_layers``; ``searchplay.rl.segments``): one
  sequence at a time, the prompt prefixes shared by the step's samples run once (``searchplay.prefix_kv``), the
  reference's kept across steps; else the plain forward, its layers recomputed in the backward with
  ``selfplay.gradient_checkpointing``.

The hooks: ``begin_update`` (before the micro-batches), ``policy_logprobs`` (the policy's forward with gradient),
``reference_logprobs`` (log pi_ref of a micro-batch), ``end_update`` (after the optimizer step); and, outside a
step, ``scored_logprobs`` (pi_old), ``start_reference`` (the start weights) and ``release``. The 'auto' settings
are on on a CPU only (``memory_saver_enabled``); under FSDP the moments and the reference stay in memory (sharded)
and the forward is the plain one.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from searchplay.config import ConfigError
from searchplay.moments import MomentsOnDisk, memory_saver_enabled
from searchplay.prefix_kv import PrefixStore
from searchplay.rl.forward import Forward, MicroBatch, decoder_and_head, reshard
from searchplay.rl.sample import TrainingSample

log = logging.getLogger(__name__)

REF_PREFIX_ENTRIES = 64  # the reference's stored prefixes before the store starts afresh (fp32 at 135M: 45 KB a token,
# 11 MB for a 250-token Solver prompt, 28 MB for the KG Proposer's 630-token instruction block)


class MemorySavers:
    """Where the moments, the frozen reference and the prompt prefixes are kept, and which forward the policy
    runs. ``load_reference`` reads the frozen reference (the start weights at ``reference_path``) when needed."""

    def __init__(self, cfg: Any, forward: Forward, model: Any, optimizer: Any, reference_path: str,
                 load_reference: Callable[[], Any]) -> None:
        device_type = forward.device.type
        self.cfg, self.forward, self._load_reference = cfg, forward, load_reference
        self.moments = None  # AdamW's moments on disk between steps (selfplay.moments_on_disk)
        if memory_saver_enabled(cfg.moments_on_disk, device_type) and not forward.sharded:
            self.moments = MomentsOnDisk(getattr(optimizer, "optimizer", optimizer), cfg.checkpoint_dir)
        self.reference_on_disk = (cfg.kl_beta > 0 and not forward.sharded
                                  and memory_saver_enabled(cfg.reference_on_disk, device_type))
        # the segmented forward's scored layers recomputed in the backward (selfplay.recompute_layers)
        self.recompute_layers = memory_saver_enabled(cfg.recompute_layers, device_type)
        # selfplay.segmented_forward where the model splits into decoder and head on one process
        self.segmented = cfg.segmented_forward and not forward.sharded and decoder_and_head(model) is not None
        self.reference = None  # the frozen reference in memory: resident, or one read kept for the next pass
        if cfg.kl_beta > 0 and not self.reference_on_disk:
            self.reference = load_reference()
        elif self.reference_on_disk:
            log.info("the frozen reference is read from %s for each update's reference pass and dropped after it "
                     "(selfplay.reference_on_disk=%s)", reference_path, cfg.reference_on_disk)
        self.reference_prefixes = PrefixStore()  # the frozen reference's shared prompt prefixes, kept across steps
        self._released = False
        self._policy_prefixes: PrefixStore | None = None  # this step's, under the weights before its optimizer step
        self._reference_values: list[Any] | None = None  # this step's reference pass, with the reference on disk

    @property
    def keeps_reference(self) -> bool:
        """A frozen reference holds the start weights (in memory, or on disk): ``selfplay.kl_beta > 0``."""
        return self.reference is not None or self.reference_on_disk

    # ---- the step's hooks -----------------------------------------------------------------------------
    def begin_update(self, model: Any, samples: list[TrainingSample],
                     micro_batches: list[tuple[list[TrainingSample], float]], step: int) -> None:
        """Before the policy's first forward: the prompt prefixes ``samples`` share, under the weights that stay
        fixed until the optimizer step (segmented forward); with the reference on disk and after the first step,
        every micro-batch's log pi_ref from a reference read for this pass (or the one ``start_reference`` kept),
        dropped so it is gone before the policy's forward and backward (0.5 GiB at 135M in fp32)."""
        self._policy_prefixes = self.shared_prefixes(model, samples)
        if not self.reference_on_disk:
            return
        kept, self.reference = self.reference, None  # one read by start_reference, never in the policy's forward
        if step == 0:
            return
        reference = kept if kept is not None else self._load_reference()
        self._reference_values = [self._reference_logprobs(part, self.forward.collate(part), None, reference, step)
                                  for part, _ in micro_batches]

    def policy_logprobs(self, model: Any, samples: list[TrainingSample], batch: MicroBatch) -> tuple[Any, Any]:
        """The policy's forward with gradient: log pi over the window [B, W] and the per-token entropy."""
        if self.segmented:
            with self.forward.autocast():  # one context for the micro-batch: bf16 weight copies made once
                return self.forward.segmented_logprobs(model, samples, batch, self._policy_prefixes,
                                                       self.recompute_layers)
        with checkpointed_layers(model, self.cfg.gradient_checkpointing):
            return self.forward.logprobs(model, batch, with_entropy=True)

    def reference_logprobs(self, index: int, samples: list[TrainingSample], batch: MicroBatch, logprobs: Any,
                           step: int) -> Any:
        """log pi_ref of micro-batch ``index`` (``logprobs``: the policy's), or None without KL."""
        if self._reference_values is not None:
            return self._reference_values[index]
        return self._reference_logprobs(samples, batch, logprobs, self.reference, step)

    def end_update(self) -> None:
        """After the optimizer step: the step's prefixes and reference values go."""
        self._policy_prefixes = self._reference_values = None

    # ---- outside a step -------------------------------------------------------------------------------
    def shared_prefixes(self, model: Any, samples: list[TrainingSample]) -> PrefixStore | None:
        """The keys and values of the prompt prefixes ``samples`` share under ``model``'s weights, for the
        segmented forward; None on the plain path."""
        return self.forward.prefix_store(model, samples) if self.segmented else None

    def scored_logprobs(self, model: Any, samples: list[TrainingSample], batch: MicroBatch,
                        prefixes: PrefixStore | None) -> Any:
        """log pi over the window without gradient (pi_old), after the ``shared_prefixes`` of its samples."""
        if prefixes is not None:
            with self.forward.autocast():
                return self.forward.sequence_logprobs(model, samples, batch, prefixes)
        return self.forward.logprobs(model, batch)[0]

    def start_reference(self) -> Any:
        """The frozen reference (the start weights), or None without one; with the reference on disk, a read
        kept for the next step's reference pass, so no read serves the statistics alone."""
        if self.reference is None and self.reference_on_disk:
            self.reference = self._load_reference()
        return self.reference

    def release(self) -> None:
        """Drop the moments (file and memory), the reference and its prefixes: the training is over."""
        if self.moments is not None:
            self.moments.release()
        self.reference, self.reference_prefixes = None, PrefixStore()
        self._released = True

    def _reference_logprobs(self, samples: list[TrainingSample], batch: MicroBatch, logprobs: Any, reference: Any,
                            step: int) -> Any:
        """log pi_ref over the window, or None without KL. Before the first optimizer step the policy IS the
        reference (both loaded from the start checkpoint), so its own values are used and the forward is saved.
        The reference never changes, so the keys and values of its shared prompt prefixes are kept across steps."""
        import torch

        if self.cfg.kl_beta <= 0 or self._released:
            return None
        if step == 0:
            return logprobs.detach()
        with torch.no_grad():
            if self.segmented:
                if len(self.reference_prefixes.entries) > REF_PREFIX_ENTRIES:
                    self.reference_prefixes = PrefixStore()
                self.forward.extend_prefix_store(self.reference_prefixes, reference, samples)
                return self.forward.sequence_logprobs(reference, samples, batch, self.reference_prefixes)
            values = self.forward.logprobs(reference, batch)[0]
        if self.forward.sharded:
            reshard(reference)
        return values


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
