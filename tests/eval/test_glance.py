from searchplay.eval.behaviour import BehaviourComparison
from searchplay.eval.glance import Counted, PairTests, glance_rows, glance_summary, pair_tests
from searchplay.eval.paired import PairedComparison
from searchplay.eval.waypoints import CoverageComparison


def _pair(correct: Counted, searches: Counted | None = None, coverage: Counted | None = None,
          found: Counted | None = None) -> PairTests:
    return PairTests("kg_wcr", "warmstart", 100,
                     {"correct": correct, "searches": searches, "found": found, "coverage": coverage})


def test_the_verdict_names_what_moved_and_always_correctness():
    assert _pair(Counted(12, 1, 0.003), Counted(0, 0, 1.0), Counted(1, 9, 0.02)).verdict() == (
        "more right answers; names less of the path")
    assert _pair(Counted(1, 12, 0.003)).verdict() == "fewer right answers"
    assert _pair(Counted(3, 5, 0.73), Counted(25, 1, 1e-6), Counted(10, 1, 0.012)).verdict() == (
        "searches more; names more of the path; correctness: no difference shown")
    assert _pair(Counted(3, 5, 0.73), Counted(3, 2, 1.0), Counted(1, 1, 1.0)).verdict() == (
        "no difference shown by any of the 3 tests")
    assert _pair(Counted(3, 5, 0.73), Counted(25, 1, 1e-6), Counted(10, 1, 0.012), Counted(7, 0, 0.016)).verdict() == (
        "searches more; its searches find the answer more often; names more of the path; "
        "correctness: no difference shown")
    assert _pair(Counted(0, 0, 1.0)).verdict() == "no difference shown"


def test_a_p_at_the_threshold_is_not_called_a_difference():
    assert Counted(6, 0, 0.03125).sign == 1 and Counted(0, 6, 0.03125).sign == -1
    assert Counted(5, 0, 0.0625).sign == 0
    assert Counted(0, 0, 0.01).sign == 0  # no discordant question: nothing to call


def test_pairs_keep_one_scope_and_join_each_pair_s_tests():
    comparisons = [PairedComparison("kg_wcr", "warmstart", "kg_heldout", 161, 11, 3, 5, 142, 0.73),
                   PairedComparison("kg_wcr", "warmstart", "pooled", 182, 12, 3, 5, 162, 0.73)]
    behaviours = [BehaviourComparison("kg_wcr", "warmstart", "kg_heldout", 161, 29, 25, 1, 1.16, 1.01, 7, 0, 44, 37)]
    coverages = [CoverageComparison("kg_wcr", "warmstart", 161, 10, 1, 0.301, 0.286)]
    pairs = pair_tests(comparisons, behaviours, coverages, "kg_heldout")
    assert glance_rows(pairs) == [["kg_wcr vs warmstart", 161, "3 / 5 (p = 0.73)", "25 / 1 (p < 0.001)",
                                   "7 / 0 (p = 0.016)", "10 / 1 (p = 0.012)",
                                   "searches more; its searches find the answer more often; names more of the "
                                   "path; correctness: no difference shown"]]
    assert glance_rows(pair_tests(comparisons, [], [], "pooled"))[0][2:6] == ["3 / 5 (p = 0.73)", "–", "–", "–"]


def test_the_summary_reads_the_written_glance_table_back():
    from searchplay.eval.report import Table, glance_table, to_markdown

    moved = _pair(Counted(3, 5, 0.73), Counted(25, 1, 1e-6), Counted(10, 1, 0.012))  # "found" not run
    still = PairTests("gdcr", "warmstart", 100, {"correct": Counted(1, 0, 1.0), "searches": Counted(0, 0, 1.0),
                                                "found": Counted(1, 0, 1.0), "coverage": Counted(2, 4, 0.69)})
    accuracy = Table("Judge accuracy (0-100)", ["model", "NQ"], [["kg_wcr", 1.5]])
    table = glance_table([moved, still], "kg_heldout", 40)
    assert table.notes[-1].startswith("No correction for multiple tests") and "holds 7 tests" in table.notes[-1]
    assert "below 40; were nothing different, about 1 in 20 would still fall below 0.05 (2.0 of the 40)" in \
        table.notes[-1]
    markdown = to_markdown([accuracy, table], "Models compared", ["models: x"])
    assert glance_summary(markdown) == [
        "At a glance: paired tests on KG held-out (counts: A / B, with the exact test's p)",
        "  kg_wcr vs warmstart, 100 questions: searches more; names more of the path; correctness: no difference shown",
        "    correct: only A / only B 3 / 5 (p = 0.73); searches: A more / A fewer 25 / 1 (p < 0.001); "
        "path coverage: A more / A less 10 / 1 (p = 0.012)",
        "  gdcr vs warmstart, 100 questions: no difference shown by any of the 4 tests",
        "    correct: only A / only B 1 / 0 (p = 1); searches: A more / A fewer 0 / 0 (p = 1); "
        "answer found by its searches: only A / only B 1 / 0 (p = 1); path coverage: A more / A less 2 / 4 (p = 0.69)"]
    assert glance_summary(to_markdown([accuracy], "Models compared", [])) == []  # no pair was compared
    assert glance_summary(markdown.replace("path coverage: A more", "waypoints: A more")) == []  # another layout
