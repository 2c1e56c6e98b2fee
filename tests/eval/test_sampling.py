"""Sampling: deterministic for a seed, different across seeds, all of Bamboogle at the papers' n=500."""

from __future__ import annotations

from searchplay.config import Params
from searchplay.eval.benchmarks import QAItem, load_benchmark
from searchplay.eval.sampling import sample_items

ITEMS = [QAItem(id=str(i), question="q", golden_answers=["a"], benchmark="x") for i in range(1000)]


def test_same_seed_same_sample_in_file_order():
    first = sample_items(ITEMS, 500, seed=0)
    assert [i.id for i in first] == [i.id for i in sample_items(ITEMS, 500, seed=0)]
    assert len(first) == 500 and [int(i.id) for i in first] == sorted(int(i.id) for i in first)
    assert [i.id for i in first] != [i.id for i in sample_items(ITEMS, 500, seed=1)]


def test_bamboogle_is_used_whole_at_n_500(benchmarks_dir):
    params = Params.model_validate({"evaluate": {"data_dir": str(benchmarks_dir)}})
    bamboogle = load_benchmark("bamboogle", params).items
    assert sample_items(bamboogle, params.evaluate.n, params.evaluate.seed) == bamboogle
    assert len(bamboogle) == 125
