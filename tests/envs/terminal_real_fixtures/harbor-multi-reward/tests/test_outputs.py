import os
from pathlib import Path

REPORT = Path(os.environ["REPORT_DIR"])  # the image's ENV


def test_sorted():
    assert (REPORT / "sorted.txt").read_text() == "apple\nfig\npear\n"


def test_count():
    assert (REPORT / "count.txt").read_text().strip() == "3"
