import pytest

from searchplay.eval.glance import Counted, PairTests
from searchplay.eval.glance_chart import glance_chart


@pytest.fixture
def drawn(monkeypatch):
    """The figures glance_chart saves, kept for a look at what they hold."""
    from matplotlib.figure import Figure

    figures, save = [], Figure.savefig

    def keeping(figure, *args, **kwargs):
        figures.append(figure)
        return save(figure, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", keeping)
    return figures


def test_the_chart_draws_every_pair_and_says_where_a_test_was_not_run(tmp_path, drawn):
    pairs = [PairTests("kg_wcr", "warmstart", 161, {"correct": Counted(3, 5, 0.73), "searches": Counted(25, 1, 1e-6),
                                                    "found": Counted(7, 0, 0.016), "coverage": None}),
             PairTests("ssp", "warmstart", 161, {"correct": Counted(0, 0, 1.0), "searches": Counted(0, 0, 1.0),
                                                 "found": None, "coverage": Counted(0, 0, 1.0)})]
    path = glance_chart(tmp_path / "glance.png", pairs, "KG held-out")
    assert path.read_bytes().startswith(b"\x89PNG")
    correct, searches, found, coverage = drawn[0].axes
    assert [label.get_text() for label in correct.get_yticklabels()] == ["ssp vs warmstart", "kg_wcr vs warmstart"]
    assert sorted(bar.get_width() for bar in correct.patches) == [-5, 0, 0, 3]  # kg_wcr: 3 more, 5 less (left)
    assert sorted(bar.get_width() for bar in searches.patches) == [-1, 0, 0, 25]
    texts = [[text.get_text() for text in ax.texts] for ax in (correct, searches, found, coverage)]
    assert [panel.count("not measured") for panel in texts] == [0, 0, 1, 1]  # ssp's found, kg_wcr's coverage
    assert any(text.startswith("less 1, more 25") for text in texts[1])
    assert glance_chart(tmp_path / "empty.png", [], "KG held-out").read_bytes().startswith(b"\x89PNG")
    assert any("no two models" in text.get_text() for text in drawn[1].axes[1].texts)
