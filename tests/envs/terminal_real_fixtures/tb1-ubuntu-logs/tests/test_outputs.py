from pathlib import Path


def test_errors_counted():
    assert Path("/app/errors.txt").read_text().strip() == "2"


def test_log_untouched():
    assert Path("/app/logs/app.log").read_text().count("\n") == 5
