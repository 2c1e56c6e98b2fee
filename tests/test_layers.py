"""The package floors: data stages import no other stage, model stages import no other model stage, the
quality gates import no model stage, and the recipes sit above the model stages: only the CLI imports them (and
they never import the CLI). Read from the source with ``ast``; nothing is imported."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "searchplay"
DATA_STAGES = {"kg", "retrieval"}
MODEL_STAGES = {"warmstart", "selfplay", "eval"}
RECIPES = "recipes"  # one folder per method, registering into the stages' registries (searchplay.recipes)
ENTRY_POINTS = {"cli", "__main__"}  # what may import the recipes



def package_of(path: Path) -> str:
    parts = path.relative_to(PACKAGE).parts
    return parts[0] if len(parts) > 1 else parts[0].removesuffix(".py")


def imported_packages(path: Path) -> set[str]:
    """The searchplay sub-packages (or top-level modules) that ``path`` imports, itself excluded."""
    names = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
        elif isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
    own = package_of(path)
    return {name.split(".")[1] for name in names
            if name.startswith("searchplay.") and name.split(".")[1] != own}


def import_edges() -> dict[tuple[str, str], list[str]]:
    edges: dict[tuple[str, str], list[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        for target in imported_packages(path):
            edges.setdefault((package_of(path), target), []).append(str(path.relative_to(PACKAGE)))
    return edges


def backward(source: str, target: str) -> bool:
    if target == RECIPES:
        return source not in ENTRY_POINTS
    if source == RECIPES:
        return target in ENTRY_POINTS
    if source in DATA_STAGES:
        return target in DATA_STAGES | MODEL_STAGES
    if source in MODEL_STAGES:
        return target in MODEL_STAGES
    return source == "quality" and target in MODEL_STAGES


def test_no_stage_imports_across_its_floor():
    found = {edge: files for edge, files in import_edges().items() if backward(*edge)}
    named = {f"{a} -> {b}": files for (a, b), files in found.items()}
    assert not named, f"imports against the package floors (docs/architecture.md): {named}"


def test_package_imports_have_no_cycle():
    from graphlib import CycleError, TopologicalSorter
    from itertools import pairwise

    graph: dict[str, set[str]] = {}
    for source, target in import_edges():
        graph.setdefault(source, set()).add(target)
    try:
        tuple(TopologicalSorter(graph).static_order())
    except CycleError as error:
        cycle = error.args[1][::-1]  # graphlib lists each node before its importer
        files = [import_edges().get(edge) for edge in pairwise(cycle)]
        raise AssertionError(f"package import cycle {' -> '.join(cycle)} (files: {files})") from None


def test_the_rule_sees_a_backward_import():
    assert backward("kg", "selfplay") and backward("selfplay", "eval") and backward("quality", "warmstart")
    assert not backward("selfplay", "rl") and not backward("eval", "agent") and not backward("quality", "split")
    assert backward("selfplay", "recipes") and backward("warmstart", "recipes") and backward("recipes", "cli")
    assert not backward("cli", "recipes") and not backward("recipes", "selfplay") and not backward("recipes", "eval")


def module_of(path: Path) -> str:
    """``searchplay.retrieval.search`` for src/searchplay/retrieval/search.py (a package's __init__: the package)."""
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def module_edges() -> dict[str, set[str]]:
    """Module -> the searchplay modules it imports, at the top or inside a function (a deferred import is still
    a dependency), its own package's ``__init__`` left out (importing a sibling loads it first anyway)."""
    modules = {module_of(path): path for path in PACKAGE.rglob("*.py")}
    edges: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                candidates = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
            elif isinstance(node, ast.Import):
                candidates = [alias.name for alias in node.names]
            else:
                continue
            targets |= {c for c in candidates if c in modules and c != name and not name.startswith(c + ".")}
        edges[name] = targets
    return edges


def test_no_module_import_cycle_inside_a_package_either():
    from graphlib import CycleError, TopologicalSorter

    try:
        tuple(TopologicalSorter(module_edges()).static_order())
    except CycleError as error:
        raise AssertionError(f"module import cycle {' -> '.join(error.args[1][::-1])}") from None


def test_the_module_rule_sees_a_deferred_import_cycle(tmp_path, monkeypatch):
    package = tmp_path / "searchplay"
    (package / "pkg").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "pkg" / "__init__.py").write_text("")
    (package / "pkg" / "a.py").write_text("from searchplay.pkg.b import f\n")
    (package / "pkg" / "b.py").write_text("def f():\n    from searchplay.pkg.a import g\n")
    monkeypatch.setattr(__import__(__name__, fromlist=["PACKAGE"]), "PACKAGE", package)
    with pytest.raises(AssertionError, match="module import cycle"):
        test_no_module_import_cycle_inside_a_package_either()


MAX_FUNCTION_LINES = 60  # a function a reader takes in at once; longer ones hand their parts to named helpers


def long_functions(package: Path, limit: int = MAX_FUNCTION_LINES) -> list[str]:
    """``module:function (N lines)`` for every function or method of ``package`` longer than ``limit`` lines."""
    found = []
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = node.end_lineno - node.lineno + 1
                if lines > limit:
                    found.append(f"{path.relative_to(package.parent)}:{node.name} ({lines} lines)")
    return found


def test_no_function_runs_over_sixty_lines():
    assert long_functions(PACKAGE) == []


def test_the_length_rule_sees_a_long_function(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    (package / "m.py").write_text(f"def short():\n    return 1\n\n\ndef long():\n{body}\n")
    assert long_functions(package) == [f"pkg/m.py:long ({MAX_FUNCTION_LINES + 1} lines)"]
