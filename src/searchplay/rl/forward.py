"""The RL update's forwards: log pi of every response token under a model, over a padded micro-batch's window.

``Forward.logprobs`` is the plain forward of a right-padded micro-batch. The segmented forward
(``searchplay.rl.segments``) runs one sequence at a time after a prompt prefix it shares with other samples
(``searchplay.prefix_kv``): ``segmented_logprobs`` with gradient for the policy, ``sequence_logprobs`` without
for pi_old and the reference. Every path gives the plain forward's values (tested); which one a step runs is
``searchplay.rl.memory_savers``'s choice.
"""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

from searchplay.prefix_kv import PrefixStore, shared_prefixes
from searchplay.rl.losses import entropy_from_logits
from searchplay.rl.sample import TrainingSample


@dataclass
class MicroBatch:
    """Right-padded tensors; the "window" holds response positions start+1 .. L-1 of every row."""

    input_ids: Any
    attention_mask: Any
    position_ids: Any
    start: int  # logits from this position on predict every response token
    targets: Any  # [B, W] token ids at window positions
    mask: Any  # [B, W] loss mask (1: model token of a response)
    advantages: Any  # [B, W]
    old_logprobs: Any | None  # [B, W] or None


@dataclass(frozen=True)
class Forward:
    """How the trainer runs a model: on ``device``, under bf16 autocast or not, and whole (``sharded``: FSDP2
    units) or split into decoder and LM head."""

    device: Any
    autocast_bf16: bool
    sharded: bool
    keep_logits: bool  # the model's forward takes ``logits_to_keep``

    def autocast(self) -> Any:
        """bf16 autocast of the forward (``selfplay.autocast_bf16``); weights and optimizer stay in their dtype."""
        import torch

        if not self.autocast_bf16:
            return nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=torch.bfloat16)

    def collate(self, samples: list[TrainingSample]) -> MicroBatch:
        import torch

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
            window = response_slice(sample, start)
            mask[row, window] = torch.tensor(sample.loss_mask, dtype=torch.float)
            advantages[row, window] = torch.tensor(sample.advantages, dtype=torch.float)
            if old is not None:
                old[row, window] = torch.tensor(sample.old_logprobs, dtype=torch.float)
        position_ids = torch.arange(length).unsqueeze(0).expand(len(seqs), -1)  # right padding: 0..len-1
        targets = input_ids[:, start + 1:]
        device = self.device
        return MicroBatch(input_ids.to(device), attention.to(device), position_ids.to(device), start,
                          targets.to(device), mask.to(device), advantages.to(device),
                          old.to(device) if old is not None else None)

    def logprobs(self, model: Any, batch: MicroBatch, with_entropy: bool = False) -> tuple[Any, Any]:
        """log pi(token) over the window [B, W] (fp32; 0 where the loss mask is 0), and per-token entropy if asked
        (no gradient).

        Only model tokens are scored: the LM head (49k x 576, 28M of SmolLM2's 135M parameters) runs on the
        hidden states of loss-mask-1 positions, not on the ``<information>`` tokens.
        """
        import torch
        import torch.nn.functional as F

        length = batch.input_ids.shape[1]
        selected = batch.mask.bool()
        split = decoder_and_head(model) if not self.sharded else None
        with self.autocast():
            inputs = {"input_ids": batch.input_ids, "attention_mask": batch.attention_mask,
                      "position_ids": batch.position_ids, "use_cache": False}
            if split is not None:
                decoder, head = split
                hidden = decoder(**inputs).last_hidden_state[:, batch.start:-1]  # positions start .. L-2
                logits = head(hidden[selected]).float()  # [N, V]: the N model tokens only
            else:
                kwargs = {"logits_to_keep": length - batch.start} if self.keep_logits else {}
                logits = model(**inputs, **kwargs).logits[:, -(length - batch.start):-1][selected].float()
        scored = -F.cross_entropy(logits, batch.targets[selected], reduction="none")
        logprobs = torch.zeros(batch.mask.shape, dtype=scored.dtype, device=scored.device).masked_scatter(
            selected, scored)
        entropy = None
        if with_entropy:
            with torch.no_grad():
                entropy = torch.zeros_like(logprobs).masked_scatter(selected, entropy_from_logits(logits.detach()))
        return logprobs, entropy

    def segmented_logprobs(self, model: Any, samples: list[TrainingSample], batch: MicroBatch, store: PrefixStore,
                           recompute: bool) -> tuple[Any, Any]:
        """``logprobs`` of the policy with gradient, one sequence at a time through ``segmented_logits``:
        the same values over the window [B, W]; prompt and ``<information>`` runs without gradient, a prompt
        prefix shared with other samples taken from ``store``; ``recompute``: ``selfplay.recompute_layers``."""
        import torch
        import torch.nn.functional as F

        from searchplay.rl.segments import first_untrained_end, segmented_logits

        decoder, head = decoder_and_head(model)
        width = batch.mask.shape[1]
        rows, entropies = [], []
        for sample in samples:
            ids = torch.tensor(sample.prompt_ids + sample.response_ids, device=self.device)
            mask = sequence_mask(sample)
            row = torch.zeros(width, device=ids.device)
            entropy = torch.zeros(width, device=ids.device)
            prefix = store.longest(sample.prompt_ids, first_untrained_end(mask))
            for run, logits in segmented_logits(decoder, head, model.config, ids, mask, self.autocast, prefix,
                                                recompute=recompute):
                window = torch.arange(run.start, run.end, device=ids.device) - batch.start  # position -> window
                scored = -F.cross_entropy(logits, ids[run.start + 1:run.end + 1], reduction="none")
                row = row.index_put((window,), scored)
                with torch.no_grad():
                    entropy[window] = entropy_from_logits(logits.detach())
            rows.append(row)
            entropies.append(entropy)
        return torch.stack(rows), torch.stack(entropies)

    def sequence_logprobs(self, model: Any, samples: list[TrainingSample], batch: MicroBatch,
                          store: PrefixStore) -> Any:
        """log pi over the window [B, W] without gradient, one forward per sequence after its shared prefix."""
        import torch
        import torch.nn.functional as F

        from searchplay.rl.segments import first_untrained_end, scored_logits

        decoder, head = decoder_and_head(model)
        rows = []
        for sample in samples:
            ids = torch.tensor(sample.prompt_ids + sample.response_ids, device=self.device)
            mask = sequence_mask(sample)
            prefix = store.longest(sample.prompt_ids, first_untrained_end(mask))
            positions, logits = scored_logits(decoder, head, model.config, ids, mask, self.autocast, prefix)
            row = torch.zeros(batch.mask.shape[1], device=ids.device)
            row[positions - batch.start] = -F.cross_entropy(logits, ids[positions + 1], reduction="none")
            rows.append(row)
        return torch.stack(rows)

    def prefix_store(self, model: Any, samples: list[TrainingSample]) -> PrefixStore:
        """Keys and values of the prompt prefixes ``samples`` share, under ``model``'s current weights."""
        store = PrefixStore()
        self.extend_prefix_store(store, model, samples)
        return store

    def extend_prefix_store(self, store: PrefixStore, model: Any, samples: list[TrainingSample]) -> None:
        """Add the shared prompt prefixes of ``samples`` to ``store`` (no gradient, the forward's autocast)."""
        import torch

        from searchplay.rl.segments import first_untrained_end

        prompts = [sample.prompt_ids for sample in samples]
        limits = [first_untrained_end(sequence_mask(sample)) for sample in samples]
        prefixes = [p for p in shared_prefixes(prompts, limits) if p not in store.entries]
        if not prefixes:
            return
        decoder, _ = decoder_and_head(model)
        with torch.no_grad(), self.autocast():
            store.build(decoder, model.config, prefixes)


def sequence_mask(sample: TrainingSample) -> list[int]:
    """The loss mask over prompt + response: the prompt is never scored."""
    return [0] * len(sample.prompt_ids) + list(sample.loss_mask)


def response_slice(sample: TrainingSample, start: int) -> slice:
    """Where ``sample``'s response tokens sit in the window of a micro-batch whose logits start at ``start``."""
    first = len(sample.prompt_ids) - start - 1
    return slice(first, first + len(sample.response_ids))


def reshard(model: Any) -> None:
    """Shard again the FSDP2 units of a model that keep their parameters gathered after a forward (the root
    and the tail, ``reshard_after_forward=False``): after a forward without gradient no backward would, and its
    parameters would stay whole on every process."""
    from torch.distributed.fsdp import FSDPModule

    for module in model.modules():
        if isinstance(module, FSDPModule):
            module.reshard()


def decoder_and_head(model: Any) -> tuple[Any, Any] | None:
    """(decoder, LM head) for models whose logits are exactly ``head(decoder(x).last_hidden_state)``; None for
    any other class (some scale or soft-cap their logits), which then runs whole."""
    if type(model).__name__ not in _PLAIN_HEAD_MODELS:
        return None
    return model.get_decoder(), model.get_output_embeddings()


_PLAIN_HEAD_MODELS = {"LlamaForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM", "MistralForCausalLM"}


def accepts_logits_to_keep(model: Any) -> bool:
    import inspect

    return "logits_to_keep" in inspect.signature(model.forward).parameters
