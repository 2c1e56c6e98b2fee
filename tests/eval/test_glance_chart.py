from searchplay.eval.glance import Counted, PairTests
from searchplay.eval.glance_chart import glance_chart


def test_the_chart_draws_every_pair_and_says_where_a_test_was_not_run(tmp_path):
    pairs = [PairTests("kg_wcr", "warmstart", 161, {"correct": Counted(3, 5, 0.73), "searches": Counted(25, 1, 1e-6),
                                                    "found": Counted(7, 0, 0.016), "coverage": None}),
             PairTests("ssp", "warmstart", 161, {"correct": Counted(0, 0, 1.0), "searches": Counted(0, 0, 1.0),
                                                 "found": None, "coverage": Counted(0, 0, 1.0)})]
    path = glance_chart(tmp_path / "glance.png", pairs, "KG held-out")
    assert path.read_bytes().startswith(b"\x89PNG")
    assert glance_chart(tmp_path / "empty.png", [], "KG held-out").read_bytes().startswith(b"\x89PNG")
