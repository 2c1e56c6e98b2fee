"""Sentence-transformers embedder with the E5 ``query: `` / ``passage: `` convention.

E5 (Wang et al. 2022, "Text Embeddings by Weakly-Supervised Contrastive Pre-training", §4.1) is
trained with these prefixes and must be queried with them; MiniLM is not, so the switch is
``models.e5_prefixes``. Embeddings are L2-normalized so cosine and inner product agree. Inputs
longer than the encoder's ``max_seq_length`` are truncated by sentence-transformers' tokenizer.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from searchplay.precision import bf16_is_native

log = logging.getLogger(__name__)

QUERY_PREFIX = "query: "
PASSAGE_PREFIX = "passage: "


def pick_dtype(name: str, device: str) -> Any:
    """``models.embedder_dtype`` -> a torch dtype; 'auto': bf16 where the hardware computes it natively.

    Measured on a 2-core AMD EPYC with AVX512-BF16 (MiniLM, 1,536 passages): bf16 91.0 vs fp32 52.1 passages/s
    (1.75x), top-3 agreement 0.988 on 200 NQ queries (``benchmarks/embedder.py``); on an Intel Xeon with AVX512
    but no bf16 instructions, bf16 15.5 vs fp32 46.7 (0.33x), which is why ``auto`` is fp32 there.
    """
    import torch

    if name != "auto":
        return getattr(torch, name)
    return torch.bfloat16 if bf16_is_native(device) else torch.float32


class Embedder:
    """Embeds queries and passages as normalized float32 vectors.

    ``model`` is a bundled alias (``bundled:minilm``), a local folder or a hub id; ``encoder``
    injects an already-loaded object with sentence-transformers' ``encode`` (tests use a fake).
    """

    def __init__(self, model: str = "bundled:minilm", e5_prefixes: bool = False, device: str = "auto",
                 batch_size: int = 64, encoder: Any = None, dtype: str = "float32"):
        self.name = model
        self.e5_prefixes = e5_prefixes
        self.batch_size = batch_size
        self.dtype = "float32"
        if encoder is None:
            from sentence_transformers import SentenceTransformer

            from searchplay.assets import resolve
            from searchplay.llm.transformers_backend import pick_device
            from searchplay.llm.weights import check_model

            check_model(model, "models.embedder")  # one line where the folder or hub id cannot load
            device = pick_device(device)
            torch_dtype = pick_dtype(dtype, device)
            self.dtype = str(torch_dtype).removeprefix("torch.")
            encoder = SentenceTransformer(resolve(model), device=device, model_kwargs={"dtype": torch_dtype})
        self.encoder = encoder

    @classmethod
    def from_params(cls, params: Any) -> Embedder:
        return cls(params.models.embedder, params.models.e5_prefixes, params.models.device,
                   params.index.embed_batch_size, dtype=params.models.embedder_dtype)

    @property
    def dimension(self) -> int:
        get = getattr(self.encoder, "get_embedding_dimension", None) or self.encoder.get_sentence_embedding_dimension
        return int(get())

    @property
    def max_seq_length(self) -> int:
        return int(self.encoder.max_seq_length)

    def _encode(self, texts: Sequence[str], prefix: str, show_progress: bool = False):
        import numpy as np

        inputs = [prefix + text for text in texts] if self.e5_prefixes else list(texts)
        vectors = self.encoder.encode(inputs, batch_size=self.batch_size, show_progress_bar=show_progress,
                                      convert_to_numpy=True, normalize_embeddings=True)
        return np.asarray(vectors, dtype=np.float32).reshape(len(inputs), -1)  # bf16 outputs come back as fp32

    def encode_queries(self, queries: Sequence[str]):
        """One (n, d) array for all queries, embedded in one batched call."""
        return self._encode(queries, QUERY_PREFIX)

    def encode_passages(self, passages: Sequence[str], show_progress: bool = False):
        return self._encode(passages, PASSAGE_PREFIX, show_progress)
