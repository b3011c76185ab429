import os
import subprocess
import tarfile
from pathlib import Path

APP = Path(os.environ.get("APP_DIR", "/app"))
SCRIPT = APP / "backup.sh"


def make_source(root: Path) -> Path:
    src = root / "my projects" / "site files"
    (src / "sub dir" / "deeper").mkdir(parents=True)
    (src / "index.html").write_text("<h1>hi</h1>\n")
    (src / "notes draft.txt").write_text("draft\n")
    (src / "cache.tmp").write_text("tmp\n")
    (src / "sub dir" / "a b.css").write_text("body{}\n")
    (src / "sub dir" / "old.tmp").write_text("tmp\n")
    (src / "sub dir" / "deeper" / "data.json").write_text("{}\n")
    return src


def run(*args, cwd=None):
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=20, cwd=cwd)


def test_still_executable():
    assert os.access(SCRIPT, os.X_OK)


def test_archive_with_spaces_and_missing_dest(tmp_path):
    src = make_source(tmp_path)
    dest = tmp_path / "backup area" / "nested dest"
    res = run(str(src), str(dest))
    assert res.returncode == 0, res.stderr
    assert (dest / "site files.tar.gz").is_file()


def test_archive_contents_exclude_tmp(tmp_path):
    src = make_source(tmp_path)
    dest = tmp_path / "out"
    assert run(str(src), str(dest)).returncode == 0
    with tarfile.open(dest / "site files.tar.gz") as tf:
        files = sorted(m.name for m in tf.getmembers() if m.isfile())
    assert files == [
        "site files/index.html",
        "site files/notes draft.txt",
        "site files/sub dir/a b.css",
        "site files/sub dir/deeper/data.json",
    ]


def test_message_counts_files_recursively(tmp_path):
    src = make_source(tmp_path)
    dest = tmp_path / "out"
    dest.mkdir()
    res = run(str(src), str(dest))
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == f"backed up 4 files to {dest}/site files.tar.gz"


def test_usage_error(tmp_path):
    res = run()
    assert res.returncode == 1
    assert "usage" in res.stderr.lower()
    assert run(str(tmp_path)).returncode == 1


def test_not_a_directory(tmp_path):
    missing = tmp_path / "no such dir"
    res = run(str(missing), str(tmp_path / "out"))
    assert res.returncode == 2
    assert "not a directory" in res.stderr
