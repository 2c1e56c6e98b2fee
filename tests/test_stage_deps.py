"""scripts/stage_deps.py: every stage's code deps in dvc.yaml are the import closure of its command."""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


@functools.cache
def load_script():
    spec = importlib.util.spec_from_file_location("stage_deps", ROOT / "scripts/stage_deps.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_dvc_yaml_lists_the_import_closure_of_every_stage_command():
    stage_deps = load_script()
    found = stage_deps.differences(yaml.safe_load((ROOT / "dvc.yaml").read_text()))
    assert not found, ("dvc.yaml's code deps differ from the import closure of the stage commands; run "
                       f"`.venv/bin/python scripts/stage_deps.py --write`, then scripts/lock_code_hashes.py: {found}")


def test_the_closure_follows_imports_inside_functions_and_leaves_other_verbs_out():
    stage_deps = load_script()
    selfplay = {str(p) for p in stage_deps.command_files("searchplay selfplay --variant kg_wcr")}
    # the <information> text the Solver reads, and the template questions: both imported inside functions
    assert {"src/searchplay/retrieval/search.py", "src/searchplay/templates.py", "src/searchplay/config.py",
            "src/searchplay/recipes/__init__.py"} <= selfplay
    # a verb registered through a wrapper (the warm-start's recipe flags) is followed to its own code
    warmstart = {str(p) for p in stage_deps.command_files("searchplay warmstart")}
    assert {"src/searchplay/warmstart/stage.py", "src/searchplay/warmstart/sft.py",
            "src/searchplay/agent/rollout.py"} <= warmstart, sorted(warmstart)
    kg = {str(p) for p in stage_deps.command_files("searchplay kg extract")}
    assert "src/searchplay/kg/extract.py" in kg
    assert not any(p.startswith(("src/searchplay/rl/", "src/searchplay/recipes/", "src/searchplay/selfplay/step"))
                   for p in kg), sorted(kg)


def test_a_recipes_code_is_a_dep_of_the_stages_that_name_it_only():
    """The shared self-play stage runs the recipes' loader but no recipe's folder (its foreach item names that,
    ``${item.code}``); the recipe's own stages, whose commands name it, list its files."""
    stage_deps = load_script()
    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    eve_files = {"src/searchplay/recipes/eve/phases.py", "src/searchplay/recipes/eve/__init__.py"}
    for shared in ("selfplay", "warmstart", "evaluate", "report"):
        deps = [str(d) for d in stages[shared].get("do", stages[shared])["deps"]]
        assert not [d for d in deps if d.startswith("src/searchplay/recipes/eve")], shared
    for cmd in ("searchplay selfplay --variant eve --phase a", "searchplay warmstart --eve"):
        assert eve_files <= {str(p) for p in stage_deps.command_files(cmd)}, cmd
    assert not eve_files & {str(p) for p in stage_deps.command_files("searchplay selfplay --variant ${key}")}
    assert "${item.code}" in [str(d) for d in stages["selfplay"]["do"]["deps"]]


def test_compress_lists_a_folder_only_where_all_of_its_code_is_reached():
    stage_deps = load_script()
    rl = {p.relative_to(ROOT) for p in (ROOT / "src/searchplay/rl").rglob("*.py") if p.stat().st_size}
    some = set(sorted(rl)[:1])
    assert stage_deps.compress(rl) == ["src/searchplay/rl"]
    assert stage_deps.compress(some) == [str(p) for p in sorted(some)]


def test_write_puts_a_missing_dep_back_and_keeps_the_comments(tmp_path):
    stage_deps = load_script()
    copy = tmp_path / "dvc.yaml"
    text = (ROOT / "dvc.yaml").read_text()
    assert "      - src/searchplay/templates.py\n" in text
    copy.write_text(text.replace("      - src/searchplay/templates.py\n", "", 1))
    assert stage_deps.differences(yaml.safe_load(copy.read_text()))
    assert stage_deps.write(copy)
    assert copy.read_text() == text


def test_the_papers_results_are_a_dep_of_every_stage_that_runs_the_code_reading_them():
    """``paper_results.yaml`` is data beside the code that reads it (searchplay.eval.report): not Python, so the
    import closure does not find it, and dvc.yaml lists it by hand wherever that module runs."""
    stage_deps = load_script()
    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    readers = [name for name, stage in stages.items() if "src/searchplay/eval/report.py" in
               {str(p) for p in stage_deps.command_files(stage.get("do", stage)["cmd"])}]
    assert {"evaluate", "evaluate_reference", "report"} <= set(readers)
    for name in readers:
        assert "src/searchplay/eval/paper_results.yaml" in stages[name].get("do", stages[name])["deps"], name
