import os
import subprocess
import time
from pathlib import Path

APP = Path(os.environ.get("APP_DIR", "/app"))
SCRIPT = APP / "cleanup.sh"
DAY = 86400


def make_tree(root: Path) -> Path:
    d = root / "work dir"
    now = time.time()
    files = {
        "fresh.txt": 1,
        "old.txt": 30,
        "sub/old one.log": 12,
        "sub/new.log": 2,
        "sub/deeper/ancient.bin": 400,
        "only-old/a.tmp": 20,
        "only-old/b.tmp": 9,
        "only-old/.keep": 100,
        "gone/x.tmp": 50,
        "nest/a/b/old.tmp": 10,
        "edge.txt": 6,
    }
    for rel, age_days in files.items():
        p = d / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(rel)
        t = now - age_days * DAY
        os.utime(p, (t, t))
    (d / "already-empty").mkdir()
    return d


def run(*args):
    return subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, timeout=20)


def test_executable():
    assert os.access(SCRIPT, os.X_OK)


def test_deletes_old_files(tmp_path):
    d = make_tree(tmp_path)
    res = run(str(d), "7")
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "removed 7 files"
    left = sorted(str(p.relative_to(d)) for p in d.rglob("*") if p.is_file())
    assert left == ["edge.txt", "fresh.txt", "only-old/.keep", "sub/new.log"]


def test_removes_emptied_dirs_only(tmp_path):
    d = make_tree(tmp_path)
    assert run(str(d), "7").returncode == 0
    assert not (d / "gone").exists()
    assert not (d / "nest").exists()
    assert not (d / "sub" / "deeper").exists()
    assert (d / "sub").is_dir() and (d / "only-old").is_dir()
    assert (d / "already-empty").is_dir()
    assert d.is_dir()


def test_dry_run(tmp_path):
    d = make_tree(tmp_path)
    res = run("--dry-run", str(d), "7")
    assert res.returncode == 0, res.stderr
    expected = sorted(f"{d}/{rel}" for rel in [
        "old.txt", "sub/old one.log", "sub/deeper/ancient.bin", "only-old/a.tmp", "only-old/b.tmp", "gone/x.tmp",
        "nest/a/b/old.tmp",
    ])
    assert res.stdout.splitlines() == expected + ["would remove 7 files"]
    assert (d / "old.txt").exists() and (d / "gone" / "x.tmp").exists()


def test_other_threshold(tmp_path):
    d = make_tree(tmp_path)
    res = run(str(d), "100")
    assert res.stdout.strip() == "removed 1 files"
    assert (d / "only-old" / ".keep").exists()


def test_usage_errors(tmp_path):
    assert run().returncode == 2
    assert run(str(tmp_path)).returncode == 2
    assert run(str(tmp_path / "missing"), "3").returncode == 2
    res = run(str(tmp_path), "soon")
    assert res.returncode == 2 and res.stderr.strip()
