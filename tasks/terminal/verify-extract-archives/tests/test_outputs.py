import os
from pathlib import Path

APP = Path(os.environ.get("APP_DIR", "/app"))
EX = APP / "extracted"


def test_alpha_extracted():
    assert (EX / "alpha" / "readme.txt").read_text() == "alpha release\n"
    assert (EX / "alpha" / "data" / "values.csv").read_text() == "a,1\nb,2\n"


def test_beta_extracted():
    assert (EX / "beta" / "readme.txt").read_text() == "beta release\n"
    assert (EX / "beta" / "bin" / "run.sh").read_text() == "echo beta\n"


def test_rejected_not_extracted():
    assert EX.is_dir()
    assert sorted(p.name for p in EX.iterdir()) == ["alpha", "beta"]


def test_rejected_list():
    lines = [ln.strip() for ln in (APP / "rejected.txt").read_text().splitlines() if ln.strip()]
    assert lines == ["delta.tar.gz", "gamma.tar.gz"]


def test_incoming_unchanged():
    names = sorted(p.name for p in (APP / "incoming").iterdir())
    assert names == ["SHA256SUMS", "alpha.tar.gz", "beta.tar.gz", "delta.tar.gz", "gamma.tar.gz"]
