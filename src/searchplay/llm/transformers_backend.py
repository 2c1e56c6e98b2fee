"""Policy backend on Hugging Face transformers: batched, left-padded ``model.generate`` with KV cache.

All active rollouts go through one ``generate`` call per turn. Each sequence stops on its own at a
stop string, EOS or ``max_new_tokens``; a finished row is padded by ``generate`` while the others
continue, and its ids are cut back to what was sampled. Runs on CPU and CUDA.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from searchplay.llm.backend import Completion, SamplingParams

log = logging.getLogger(__name__)

_STOP_TAIL_TOKENS = 16  # decoded tail checked for stop strings each step (longer than any stop string)


def pick_device(device: str) -> str:
    """'auto' -> 'cuda' when available, else 'cpu'."""
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return device


class PerSequenceStops:
    """A transformers ``StoppingCriteria``: a row is done once its generated text contains a stop string.

    Records, per row, the generated length at which it stopped and which string stopped it, so the
    backend can cut the padding ``generate`` appends after a finished row.
    """

    def __init__(self, tokenizer: Any, stops: Sequence[str], prompt_length: int, batch_size: int):
        self.tokenizer = tokenizer
        self.stops = tuple(stops)
        self.prompt_length = prompt_length
        self.stopped_at: list[int | None] = [None] * batch_size
        self.stop: list[str | None] = [None] * batch_size

    def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
        import torch

        generated = input_ids.shape[1] - self.prompt_length
        done = torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)
        if not self.stops:
            return done
        tail = input_ids[:, max(self.prompt_length, input_ids.shape[1] - _STOP_TAIL_TOKENS):].tolist()
        for row, ids in enumerate(tail):
            if self.stopped_at[row] is not None:
                done[row] = True
                continue
            text = self.tokenizer.decode(ids, skip_special_tokens=False)
            hit = next((stop for stop in self.stops if stop in text), None)
            if hit is not None:
                self.stopped_at[row], self.stop[row] = generated, hit
                done[row] = True
        return done


class TransformersBackend:
    """``PolicyBackend`` over a transformers causal LM (the trainer's module can be shared in-process)."""

    def __init__(self, model: str | Any, tokenizer: Any = None, dtype: str = "float32", device: str = "auto"):
        import torch
        from transformers import AutoModelForCausalLM

        from searchplay.assets import resolve
        from searchplay.llm.tokenizer import load_tokenizer

        if isinstance(model, str):
            self.tokenizer = tokenizer or load_tokenizer(model)
            torch_dtype = "auto" if dtype == "auto" else getattr(torch, dtype)
            self.device = pick_device(device)
            self.model = AutoModelForCausalLM.from_pretrained(str(resolve(model)), dtype=torch_dtype).to(self.device)
        else:
            if tokenizer is None:
                raise ValueError("TransformersBackend(model=<nn.Module>) also needs its tokenizer")
            self.tokenizer, self.model = tokenizer, model
            self.device = str(next(model.parameters()).device)
        self.model.eval()
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token

    def update_weights(self, model: Any) -> None:
        """Generate with ``model`` from now on: in-process the trainer's module is shared, not copied."""
        self.model = model
        self.device = str(next(model.parameters()).device)

    def generate(self, prompts: Sequence[Sequence[int]], sampling: SamplingParams) -> list[Completion]:
        """One batched, left-padded generate; each row cut at its own stop string, EOS or length."""
        import torch
        from transformers import StoppingCriteriaList

        if not prompts:
            return []
        pad = self.tokenizer.pad_token_id
        width = max(len(p) for p in prompts)
        input_ids = torch.tensor([[pad] * (width - len(p)) + list(p) for p in prompts], device=self.device)
        attention = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts], device=self.device)
        stops = PerSequenceStops(self.tokenizer, sampling.stop, width, len(prompts))
        if sampling.seed is not None:
            torch.manual_seed(sampling.seed)
        options: dict[str, Any] = {"do_sample": False, "temperature": None, "top_p": None, "top_k": None}
        if sampling.temperature > 0:
            options = {"do_sample": True, "temperature": sampling.temperature, "top_p": sampling.top_p, "top_k": 0}
        with torch.inference_mode():
            output = self.model.generate(
                input_ids=input_ids, attention_mask=attention, max_new_tokens=sampling.max_new_tokens,
                stopping_criteria=StoppingCriteriaList([stops]), pad_token_id=pad,
                eos_token_id=self.tokenizer.eos_token_id, use_cache=True, **options,
            )
        rows = output[:, width:].tolist()
        return [self._completion(ids, stops.stopped_at[i], stops.stop[i], sampling.max_new_tokens)
                for i, ids in enumerate(rows)]

    def _completion(self, ids: list[int], stopped_at: int | None, stop: str | None, limit: int) -> Completion:
        eos = self.tokenizer.eos_token_id
        eos_at = ids.index(eos) + 1 if eos in ids else None
        if stopped_at is not None and (eos_at is None or stopped_at <= eos_at):
            ids, reason = ids[:stopped_at], "stop"
        elif eos_at is not None:
            ids, reason, stop = ids[:eos_at], "eos", None
        else:
            ids, reason, stop = ids[:limit], "length", None
        text = self.tokenizer.decode(ids, skip_special_tokens=True)
        return Completion(token_ids=ids, text=text, finish_reason=reason, stop=stop)
