from pathlib import Path


def test_status():
    assert Path("/app/status.txt").read_text().strip() == "done"
