# GPU worker image for searchplay: CUDA runtime, the package with the `gpu` extra (vLLM), non-root.
# Build: docker build -t searchplay:gpu .   (cannot be built on the CPU dev machines: no Docker engine)
# The image is the code; a flow runs in a checkout of the same commit on a volume (prefect.gpu.yaml).
FROM nvidia/cuda:12.8.1-cudnn-runtime-ubuntu24.04

ENV DEBIAN_FRONTEND=noninteractive \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    SEARCHPLAY_HOME=/cache/searchplay \
    HF_HOME=/cache/huggingface

RUN apt-get update \
    && apt-get install -y --no-install-recommends python3.12 python3.12-venv python3-pip git \
    && rm -rf /var/lib/apt/lists/*

RUN useradd --create-home --uid 1000 searchplay \
    && mkdir -p /app /cache \
    && chown -R searchplay:searchplay /app /cache

USER searchplay
WORKDIR /app
ENV VIRTUAL_ENV=/app/.venv PATH=/app/.venv/bin:$PATH

COPY --chown=searchplay:searchplay pyproject.toml README.md ./
COPY --chown=searchplay:searchplay src ./src
# torch comes from PyPI here (a CUDA build), unlike on the CPU dev machines.
RUN python3.12 -m venv /app/.venv \
    && pip install --no-cache-dir uv==0.13.8 \
    && uv pip install --no-cache ".[gpu]"

COPY --chown=searchplay:searchplay . .
RUN searchplay assets

# No ENTRYPOINT: a Prefect worker runs its own command in the container (`prefect flow-run execute`), which an
# entrypoint would turn into arguments of its program. Run a verb with `docker run searchplay:gpu searchplay ...`.
CMD ["searchplay", "--help"]
