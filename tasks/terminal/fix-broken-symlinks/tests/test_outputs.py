import os
from pathlib import Path

APP = Path(os.environ.get("APP_DIR", "/app"))
LINKS = APP / "links"
BROKEN = ["loop-a", "loop-b", "missing doc.md", "notes.md", "removed.conf", "report.txt"]


def test_broken_list():
    lines = [ln for ln in (APP / "broken_links.txt").read_text().splitlines() if ln.strip()]
    assert lines == BROKEN


def test_relinked_to_archive():
    for name, target, text in (
        ("report.txt", "../targets/archive/report-2023.txt", "old report\n"),
        ("notes.md", "../targets/archive/notes.md", "old notes\n"),
    ):
        assert (LINKS / name).is_symlink()
        assert os.readlink(LINKS / name) == target
        assert (LINKS / name).read_text() == text


def test_unfixable_links_removed():
    for name in ("removed.conf", "missing doc.md", "loop-a", "loop-b"):
        assert not os.path.lexists(LINKS / name), name


def test_good_links_and_files_untouched():
    assert os.readlink(LINKS / "app.conf") == "../targets/app.conf"
    assert os.readlink(LINKS / "db.conf") == f"{APP}/targets/db.conf"
    assert os.readlink(LINKS / "docs") == "../targets/docs"
    assert not (LINKS / "plain.txt").is_symlink()
    assert (LINKS / "plain.txt").read_text() == "a plain file\n"


def test_no_broken_links_left():
    names = sorted(p.name for p in LINKS.iterdir())
    assert names == ["app.conf", "db.conf", "docs", "notes.md", "plain.txt", "report.txt"]
    assert all(p.exists() for p in LINKS.iterdir())
