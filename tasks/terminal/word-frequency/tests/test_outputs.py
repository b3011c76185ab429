import os
from pathlib import Path

APP = Path(os.environ.get("APP_DIR", "/app"))
TOP = [
    ("the", 39), ("and", 11), ("a", 7), ("he", 7), ("keeper", 7),
    ("ships", 6), ("light", 5), ("lamp", 4), ("of", 4), ("one", 4),
]


def top_rows():
    rows = []
    for ln in (APP / "top_words.txt").read_text().splitlines():
        if ln.strip():
            word, count = ln.split()
            rows.append((word, int(count)))
    return rows


def test_top_words_file_has_ten_lines():
    assert len(top_rows()) == 10


def test_most_frequent_word():
    assert top_rows()[0] == ("the", 39)


def test_counts_are_correct():
    assert set(top_rows()) == set(TOP)


def test_ties_are_alphabetical():
    assert top_rows() == TOP


def test_word_stats():
    lines = [ln.split() for ln in (APP / "word_stats.txt").read_text().splitlines() if ln.strip()]
    assert lines == [["total", "255"], ["unique", "125"]]
