"""The embedded defaults that docs/decisions quote are the ones params.yaml sets.

Read from the decisions: every bold bullet that opens with a quoted setting (``- **`selfplay.lr: 1e-5`**``)
and every setting quoted in the "Embedded-default scale (params.yaml)" section of docs/decisions/selfplay.md.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from searchplay.config import load_params

ROOT = Path(__file__).resolve().parents[1]
DECISIONS = ROOT / "docs" / "decisions"
SELFPLAY = ROOT / "docs/decisions/selfplay.md"  # its scale section quotes the defaults too
SETTING = re.compile(r"`([a-z_]+)\.([a-z_0-9]+): ([^`]+)`")


def quoted_defaults() -> list[tuple[str, str, str, str]]:
    """(file, section, key, value) of every quoted default."""
    found = []
    for path in sorted(DECISIONS.glob("*.md")):
        text = path.read_text(encoding="utf-8")
        lines = [line for line in text.splitlines() if line.startswith("- **`")]
        if path == SELFPLAY:
            scale = text.split("## Embedded-default scale (params.yaml)", 1)[1].split("\n## ", 1)[0]
            lines.append(scale.split("\n- ", 2)[1])
        for line in lines:
            found += [(path.name, *match) for match in SETTING.findall(line.split("**", 2)[1] if "**" in line
                                                                          else line)]
    return found


def parse(value: str):
    """YAML, with '1e-5' read as the float it means (YAML 1.1 wants '1.0e-5')."""
    parsed = yaml.safe_load(value)
    try:
        return float(parsed) if isinstance(parsed, str) else parsed
    except ValueError:
        return parsed


def test_the_decisions_quote_defaults_at_all():
    assert len(quoted_defaults()) >= 5


def test_every_quoted_default_is_the_embedded_default():
    params = load_params(ROOT / "params.yaml")
    wrong = [f"{name}: {section}.{key}: {value} but params.yaml has {getattr(getattr(params, section), key)!r}"
             for name, section, key, value in quoted_defaults()
             if getattr(getattr(params, section), key) != parse(value)]
    assert not wrong, wrong
