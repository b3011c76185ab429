import os
import stat
from pathlib import Path

APP = Path(os.environ.get("APP_DIR", "/app"))
D = APP / "deploy"


def mode(rel):
    return stat.S_IMODE((D / rel).stat().st_mode)


def test_scripts_executable():
    assert mode("bin/start.sh") == 0o755
    assert mode("bin/stop.sh") == 0o755
    assert mode("bin/README.txt") == 0o644


def test_secrets_restricted():
    assert mode("secrets") == 0o700
    assert mode("secrets/db.key") == 0o600
    assert mode("secrets/api.token") == 0o600


def test_config_mode():
    assert mode("config/app.conf") == 0o644
    assert mode("config/logging.conf") == 0o644


def test_shared_setgid_dir():
    assert mode("shared") == 0o2775


def test_nothing_world_writable():
    bad = [str(p.relative_to(D)) for p in D.rglob("*") if p.is_file() and p.stat().st_mode & stat.S_IWOTH]
    assert not bad, f"world-writable: {bad}"
    assert mode("docs/guide.md") == 0o664
    assert mode("shared/notes.txt") == 0o644


def test_contents_unchanged():
    assert (D / "secrets" / "db.key").read_text() == "super-secret-key\n"
    assert (D / "bin" / "start.sh").read_text() == "#!/bin/bash\necho starting\n"
