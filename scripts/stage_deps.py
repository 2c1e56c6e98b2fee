"""Each DVC stage's code deps are the import closure of its command: check them, or write them into dvc.yaml.

A stage's command is ``searchplay <verb> ...``. What it can run:

* what importing the entry point runs: ``searchplay.cli``'s own imports, less the verbs' ``commands`` modules;
* the verb's own code: its function, the helpers of its module it calls, and that module's top level;
* the recipes' loader, where the stage reaches a registry they fill, and a recipe's folder where its command
  names the recipe (``recipe_modules``);
* every ``searchplay`` module those import, at module level or inside a function, followed to the end.

A package's ``__init__.py`` counts wherever one of its modules does (an empty one is left out: DVC warns of
empty deps). A folder stands for its files where every ``.py`` file under it is reached. Deps that are not
Python code (data, checkpoints, ``${item}``) are kept as they are. Run from the repository root:

    .venv/bin/python scripts/stage_deps.py            # exit 1 and list the differences, if any
    .venv/bin/python scripts/stage_deps.py --write    # rewrite dvc.yaml's code deps (then refresh dvc.lock)
"""

from __future__ import annotations

import argparse
import ast
import functools
import shlex
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "src"
PACKAGE = "searchplay"
ENTRY = f"{PACKAGE}.cli"
RECIPES = f"{PACKAGE}.recipes"
NAME_REGISTRIES = {f"{PACKAGE}.config", f"{PACKAGE}.model_paths"}


def module_file(name: str) -> Path | None:
    """The file of module ``name`` under src/, or None where it is not one of ours."""
    base = SOURCE.joinpath(*name.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def import_names(nodes: list[ast.AST], package: str) -> set[str]:
    """The ``searchplay`` modules that the import statements among ``nodes`` (and inside them) name."""
    found: set[str] = set()
    for node in (n for top in nodes for n in ast.walk(top)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{parent}.{base}" if base else parent
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)  # `from pkg import module`
    return {module for module in found if module.split(".")[0] == PACKAGE and module_file(module) is not None}


@functools.cache
def parse(name: str) -> tuple[ast.Module, str]:
    """Module ``name``'s syntax tree and the package its relative imports start from."""
    path = module_file(name)
    assert path is not None, name
    return ast.parse(path.read_text(encoding="utf-8")), name if path.name == "__init__.py" else name.rpartition(".")[0]


def imported_modules(name: str) -> set[str]:
    """The ``searchplay`` modules that module ``name`` imports anywhere in its file (functions included)."""
    tree, package = parse(name)
    return import_names([tree], package)


def top_level_imports(name: str) -> set[str]:
    """What importing module ``name`` runs: its imports outside functions and classes, and those inside the
    functions its own top level calls (``searchplay.cli``'s registration of the verbs)."""
    tree, package = parse(name)
    functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    called = {n.value.func.id for n in tree.body if isinstance(n, ast.Expr) and isinstance(n.value, ast.Call)
              and isinstance(n.value.func, ast.Name)}
    statements = [n for n in tree.body if not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
    return import_names(statements + [functions[f] for f in called if f in functions], package)


def verb_imports(module: str, function: str, line: int) -> set[str]:
    """What a verb defined in ``module`` as ``function`` (at ``line``) runs: the module's own top level, the
    function's imports, and those of the module-level functions it calls by name."""
    tree, package = parse(module)
    functions = {n.name: n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.col_offset == 0}
    verb = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == function
                and min([n.lineno, *(d.lineno for d in n.decorator_list)]) <= line <= (n.end_lineno or n.lineno))
    bodies, todo = [verb], [verb]
    while todo:
        for call in (n for n in ast.walk(todo.pop()) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)):
            helper = functions.get(call.func.id)
            if helper is not None and helper not in bodies:
                bodies.append(helper)
                todo.append(helper)
    return top_level_imports(module) | import_names(bodies, package)


def with_packages(name: str) -> set[str]:
    """``a.b.c`` and the packages that importing it runs: ``a``, ``a.b``."""
    parts = name.split(".")
    return {".".join(parts[:i]) for i in range(1, len(parts) + 1)}


def closure(roots: set[str]) -> set[str]:
    """Every module that importing ``roots`` can reach (every import in their files, functions included)."""
    return set(_closure(frozenset(roots)))


@functools.cache
def _closure(roots: frozenset[str]) -> frozenset[str]:
    seen: set[str] = set()
    todo = set().union(*(with_packages(root) for root in roots))
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for module in imported_modules(name):
            todo |= with_packages(module) - seen
    return frozenset(seen)


def verb_modules(words: list[str]) -> set[str]:
    """The modules the verb ``searchplay <words...>`` imports itself (``verb_imports``) and its own module."""
    import typer.main

    from searchplay.cli import app

    command = typer.main.get_command(app)
    for word in (w for w in words if not w.startswith("-")):
        sub = getattr(command, "commands", {}).get(word)
        if sub is None:
            break
        command = sub
    callback = command.callback
    while hasattr(callback, "__wrapped__"):
        callback = callback.__wrapped__
    code = callback.__code__
    return {callback.__module__} | verb_imports(callback.__module__, code.co_name, code.co_firstlineno)


def entry_roots() -> set[str]:
    """What importing ``searchplay.cli`` runs before a verb, less the verbs' ``commands`` modules (each verb's
    own imports are ``verb_imports``') and the recipes (``recipe_modules``)."""
    return {m for m in top_level_imports(ENTRY) if not m.endswith(".commands") and not m.startswith(RECIPES)}


def recipe_packages() -> list[str]:
    """The recipes in this repository: every sub-package of ``searchplay.recipes`` (``load_recipes`` imports each)."""
    folder = SOURCE.joinpath(*RECIPES.split("."))
    return sorted(f"{RECIPES}.{p.parent.name}" for p in folder.glob("*/__init__.py"))


def recipe_modules(reached: set[str], words: list[str]) -> set[str]:
    """The recipes' code a stage runs. Where the stage reaches a registry a recipe fills (the CLI imports every
    recipe, and a recipe's ``__init__`` registers its parts into shared modules: variants, rewards, phases,
    warm-start formats), the recipes' loader; and a recipe's own folder only where the command names the recipe
    (``--variant eve``, ``warmstart --eve``): a shared stage runs no recipe's code, and a foreach stage over
    ``pipeline.variants`` names each variant's recipe folder itself (``${item.code}``). The registries every
    stage reads by name only (the params sections, the checkpoint names) do not count."""
    packages = recipe_packages()
    hooks = {m for name in packages for m in top_level_imports(name) if not m.startswith(RECIPES)} - NAME_REGISTRIES
    if not reached & hooks:
        return set()
    named = {name for name in packages if {name.rpartition(".")[2], f"--{name.rpartition('.')[2]}"} & set(words)}
    return closure({RECIPES} | named)


@functools.cache
def command_files(cmd: str) -> frozenset[Path]:
    """The source files (relative to the repository root) that stage command ``cmd`` can run."""
    words = shlex.split(cmd)
    assert words[0] == PACKAGE, f"a stage command starts with `{PACKAGE}`: {cmd}"
    verb = verb_modules(words[1:])
    modules = closure(entry_roots() | {m for m in verb if not m.endswith(".commands")})
    modules |= {m for m in verb if m.endswith(".commands")}  # its own module, not the other verbs' imports
    modules |= recipe_modules(modules, words)
    files = {module_file(m) for m in modules}
    return frozenset(f.relative_to(ROOT) for f in files if f.stat().st_size)  # an empty __init__.py runs nothing


def compress(files: set[Path] | frozenset[Path]) -> list[str]:
    """The files as dvc.yaml lists them: a folder where all of its ``.py`` files are in ``files``."""
    top = Path("src") / PACKAGE
    folders = sorted({p for f in files for p in f.parents if p.is_relative_to(top) and p != top},
                     key=lambda p: len(p.parts))  # shallowest first: a listed folder covers its subfolders
    listed_folders: list[Path] = []
    for folder in folders:
        if any(folder.is_relative_to(q) for q in listed_folders):
            continue
        if {p.relative_to(ROOT) for p in (ROOT / folder).rglob("*.py") if p.stat().st_size} <= files:
            listed_folders.append(folder)
    loose = {f for f in files if not any(f.is_relative_to(q) for q in listed_folders)}
    return sorted(str(p) for p in [*listed_folders, *loose])


def is_code(dep: str) -> bool:
    """Whether a dvc.yaml dep is Python source this script owns (a file or a folder holding .py files)."""
    path = ROOT / dep
    if not dep.startswith(f"src/{PACKAGE}") or "${" in dep:
        return False
    return path.suffix == ".py" or (path.is_dir() and any(path.rglob("*.py")))


def expected_deps(stage: dict) -> tuple[list[str], list[str]]:
    """(the deps dvc.yaml should list for ``stage``, in order: its other deps first, then its code)."""
    body = stage.get("do", stage)
    deps = [str(d) for d in body.get("deps", [])]
    others = [d for d in deps if not is_code(d)]
    return deps, others + compress(command_files(body["cmd"]))


def differences(dvc_yaml: dict) -> dict[str, tuple[list[str], list[str]]]:
    """Stage name: (missing code deps, extra code deps), for every stage whose code deps differ."""
    found = {}
    for name, stage in dvc_yaml["stages"].items():
        current, expected = expected_deps(stage)
        if current != expected:
            found[name] = (sorted(set(expected) - set(current)), sorted(set(current) - set(expected)))
    return found


def write(path: Path) -> list[str]:
    """Rewrite the code deps of every stage in dvc.yaml; returns the names of the stages changed."""
    from ruamel.yaml import YAML

    yaml = YAML()  # round trip: comments and the file's indentation stay
    yaml.indent(mapping=2, sequence=4, offset=2)
    yaml.width, yaml.preserve_quotes = 4096, True
    tree = yaml.load(path)
    changed = []
    for name, stage in tree["stages"].items():
        body = stage.get("do", stage)
        current, expected = expected_deps(stage)
        if current != expected:
            deps = body["deps"]  # edited in place, so the comments beside the other deps stay
            for index in reversed([i for i, dep in enumerate(deps) if is_code(str(dep))]):
                del deps[index]
            deps.extend(expected[len(deps):])
            changed.append(name)
    yaml.dump(tree, path)
    return changed


def main() -> int:
    import yaml

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--write", action="store_true", help="rewrite dvc.yaml's code deps")
    args = parser.parse_args()
    path = ROOT / "dvc.yaml"
    if args.write:
        for name in write(path):
            print("rewrote the code deps of", name)
        print("now refresh dvc.lock's code hashes: .venv/bin/python scripts/lock_code_hashes.py")
        return 0
    found = differences(yaml.safe_load(path.read_text()))
    for name, (missing, extra) in found.items():
        print(f"{name}: missing {missing or '-'}; not imported {extra or '-'}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.path.insert(0, str(SOURCE))
    sys.exit(main())
