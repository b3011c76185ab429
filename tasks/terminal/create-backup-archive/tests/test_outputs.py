import gzip
import hashlib
import os
import tarfile
from pathlib import Path

APP = Path(os.environ.get("APP_DIR", "/app"))
ARCHIVE = APP / "backup" / "project.tar.gz"
FILES = {
    "project/src/app.py": b'print("hello")\n',
    "project/src/config.py": b"x = 1\n",
    "project/docs/index.md": b"# Docs\n",
    "project/LICENSE": b"MIT\n",
}


def members():
    with tarfile.open(ARCHIVE, "r:gz") as tf:
        return {m.name.rstrip("/"): (tf.extractfile(m).read() if m.isfile() else None) for m in tf.getmembers()}


def test_archive_is_gzip_tar():
    with open(ARCHIVE, "rb") as fh:
        assert fh.read(2) == b"\x1f\x8b"
    gzip.open(ARCHIVE).read()


def test_entries_start_with_project():
    names = [n.lstrip("./") for n in members()]
    assert names and all(n == "project" or n.startswith("project/") for n in names)


def test_expected_files_with_content():
    files = {n.lstrip("./"): data for n, data in members().items() if data is not None}
    assert files == FILES


def test_cache_and_tmp_excluded():
    names = [n.lstrip("./") for n in members()]
    assert not [n for n in names if n.startswith("project/cache") or n.endswith(".tmp")]


def test_checksum_file():
    line = (APP / "backup" / "project.tar.gz.sha256").read_text().strip()
    digest, name = line.split("  ")
    assert name == "project.tar.gz"
    assert digest == hashlib.sha256(ARCHIVE.read_bytes()).hexdigest()


def test_project_untouched():
    assert (APP / "project" / "cache" / "index").read_text() == "cache index\n"
    assert (APP / "project" / "upload.tmp").exists()
