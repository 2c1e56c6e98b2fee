import json

import pytest

from searchplay.quality import DataQualityError
from searchplay.retrieval.corpus import (
    CorpusError,
    CorpusReport,
    build_corpus,
    parse_contents,
    read_flashrag,
    read_plain_jsonl,
    read_wiki_summaries,
    split_passages,
)


def write_lines(path, lines):
    path.write_text("\n".join(json.dumps(x) if not isinstance(x, str) else x for x in lines) + "\n")
    return path


def test_flashrag_reader_splits_title_from_contents(tmp_path):
    path = write_lines(tmp_path / "wiki18.jsonl", [
        {"id": "1", "contents": '"Castle Drogo"\nCastle Drogo is a country house in Devon.'},
        {"id": 2, "contents": '"Bern"\nBern is the capital of Switzerland.'},
    ])
    report = CorpusReport("t")
    passages = list(read_flashrag(path, report))
    assert [(p.id, p.title) for p in passages] == [("1", "Castle Drogo"), ("2", "Bern")]
    assert passages[0].text == "Castle Drogo is a country house in Devon."
    assert report.lines == 2 and report.bad_lines == 0


def test_parse_contents_keeps_inner_quotes():
    assert parse_contents('"The "Great" Gatsby"\nA novel.') == ('The "Great" Gatsby', "A novel.")


def test_malformed_lines_are_counted_with_reasons(tmp_path):
    path = write_lines(tmp_path / "bad.jsonl", [
        {"id": "1", "title": "A", "text": "fine"},
        "{not json",
        "[1, 2]",
        {"id": "3", "title": "", "text": "no title"},
        {"id": "4", "text": "missing title"},
        {"id": "5", "title": "E", "text": "fine too"},
    ])
    report = CorpusReport("t")
    passages = list(read_plain_jsonl(path, report))
    assert [p.id for p in passages] == ["1", "5"]
    assert report.lines == 6 and report.bad_lines == 4
    assert "line 2: not valid JSON" in report.bad_examples[0]
    assert "missing or empty title" in report.bad_examples[2]


def test_flashrag_line_without_text_is_malformed(tmp_path):
    path = write_lines(tmp_path / "w.jsonl", [{"id": "1", "contents": '"Only a title"'}])
    report = CorpusReport("t")
    assert list(read_flashrag(path, report)) == [] and report.bad_lines == 1


def test_build_fails_above_bad_line_share_and_writes_nothing(tmp_path):
    path = write_lines(tmp_path / "c.jsonl", [{"id": "1", "title": "A", "text": "ok"}, "garbage"])
    out = tmp_path / "passages.jsonl"
    with pytest.raises(CorpusError, match=r"1 of 2 lines malformed .*max_bad_line_share"):
        build_corpus("jsonl", str(path), out, max_bad_line_share=0.1)
    assert not out.exists()
    report = build_corpus("jsonl", str(path), out, max_bad_line_share=0.5)
    assert report.bad_lines == 1 and len(out.read_text().splitlines()) == 1


def test_duplicate_ids_fail_validation(tmp_path):
    rows = [{"id": "1", "title": "A", "text": "x"}, {"id": "1", "title": "B", "text": "y"}]
    path = write_lines(tmp_path / "c.jsonl", rows)
    with pytest.raises(DataQualityError, match="unique"):
        build_corpus("jsonl", str(path), tmp_path / "out.jsonl")
    assert not (tmp_path / "out.jsonl").exists()


def test_empty_text_fails_validation():
    import pandas as pd

    from searchplay.quality.corpus import validate_passages

    df = pd.DataFrame([{"id": "1", "title": "A", "text": "x"}, {"id": "2", "title": "B", "text": "   "}])
    with pytest.raises(DataQualityError, match="text"):
        validate_passages(df)


def test_split_keeps_sentences_whole_and_balances_lengths():
    sentence = "One two three four five six seven eight nine ten."
    text = " ".join([sentence] * 25)  # 250 words, 25 sentences
    passages = split_passages(text, passage_words=100)
    assert len(passages) == 3
    assert all(p.endswith("ten.") for p in passages)
    assert [len(p.split()) for p in passages] == [90, 90, 70]


def test_overlong_sentence_is_cut_at_the_word_limit():
    passages = split_passages(" ".join(["w"] * 250) + ".", passage_words=100)
    assert [len(p.split()) for p in passages] == [100, 100, 50]


def test_short_article_is_one_passage():
    assert split_passages("Bern is a city. It is in Switzerland.", 100) == ["Bern is a city. It is in Switzerland."]


def test_wiki_summaries_reader(tmp_path):
    long_text = " ".join(f"Sentence number {i} is here." for i in range(60))  # 300 words
    path = tmp_path / "summaries.json"
    path.write_text(json.dumps({
        "Bern": {"title": "Bern", "extract": "Bern is the capital of Switzerland.", "description": "", "topic": "Geo"},
        "Empty": {"title": "Empty", "extract": "", "description": "", "topic": "Geo"},
        "Long": {"title": "Long", "extract": long_text, "description": "", "topic": "Geo"},
    }))
    report = CorpusReport("t")
    passages = list(read_wiki_summaries(path, report, passage_words=100))
    assert passages[0].title == "Bern" and passages[0].id == "0"
    assert [p.title for p in passages[1:]] == ["Long"] * 3
    assert [p.id for p in passages] == ["0", "1", "2", "3"]
    assert report.bad_lines == 1 and report.lines == 3


def test_bundled_summaries_split_into_about_100_word_passages(wiki_summaries_path):
    report = CorpusReport("bundled")
    passages = list(read_wiki_summaries(wiki_summaries_path, report))
    assert report.lines == 10_033 and report.bad_lines == 0
    assert len(passages) > report.lines
    assert max(len(p.text.split()) for p in passages) <= 100
    assert any(p.title == "Switzerland" for p in passages)


def test_max_articles_keeps_kg_sample_articles_first():
    from searchplay.retrieval.corpus import keep_articles, kg_sample_titles

    articles = {name: {"title": name, "extract": "x"} for name in ["Aa", "Bern", "Cc", "Switzerland", "Dd"]}
    kept = keep_articles(articles, 3, {"Switzerland", "Bern"})
    assert list(kept) == ["Aa", "Bern", "Switzerland"]  # file order kept, preferred ones always in
    assert {"Switzerland", "Bern"} <= kg_sample_titles()


def _cut(tmp_path, suffix):
    """A 40-line plain JSONL corpus, compressed by ``suffix`` and cut in the middle (or its last line cut)."""
    import bz2
    import gzip

    text = "".join(json.dumps({"id": str(i), "title": f"T{i}", "text": "Some words here. " * 10}) + "\n"
                   for i in range(40)).encode()
    path = tmp_path / f"c.jsonl{suffix}"
    if suffix == "":
        path.write_bytes(text[:-30])  # the last line loses its end and its newline
        return path
    whole = gzip.compress(text) if suffix == ".gz" else bz2.compress(text)
    path.write_bytes(whole)
    assert len(list(read_plain_jsonl(path, CorpusReport("whole")))) == 40  # a whole compressed file reads
    path.write_bytes(whole[: len(whole) // 2])
    return path


@pytest.mark.parametrize(("suffix", "message"), [(".gz", "the compressed stream ends before its end-of-stream marker"),
                                                 (".bz2", "the compressed stream ends before its end-of-stream marker"),
                                                 ("", r"its last line \(40\) has no newline")])
def test_truncated_corpus_fails_and_writes_nothing(tmp_path, suffix, message):
    """a cut file is not a few malformed lines; it fails whatever corpus.max_bad_line_share says."""
    from searchplay.io import TruncatedInputError
    from searchplay.retrieval.corpus import TruncatedCorpusError

    out = tmp_path / "passages.jsonl"
    with pytest.raises(TruncatedCorpusError, match=rf"c\.jsonl{suffix} is truncated: {message}") as raised:
        build_corpus("jsonl", str(_cut(tmp_path, suffix)), out, max_bad_line_share=1.0)
    assert isinstance(raised.value, TruncatedInputError) and not out.exists()
