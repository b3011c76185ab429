from pathlib import Path


def test_mean():
    assert Path("/app/mean.txt").read_text().strip() == "2.0"
