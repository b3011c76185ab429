import os
from pathlib import Path

APP = Path(os.environ.get("APP_DIR", "/app"))
EXPECTED = sorted([
    "alice.moreau@example.com",
    "alice@legacy.example",
    "bram.devries@example.org",
    "chen.wei+lists@example.net",
    "dana_k@acme-supplies.example",
    "eli@globex.example",
    "fay.oneil@umbrella.example",
    "gus@old-domain.example",
    "hana.sato@example.jp",
    "office@example.com",
    "support@globex.example",
])


def emails():
    return [ln for ln in (APP / "emails.txt").read_text().splitlines() if ln.strip()]


def test_file_exists():
    assert (APP / "emails.txt").is_file()


def test_all_addresses_found():
    missing = set(EXPECTED) - set(emails())
    assert not missing, f"missing: {sorted(missing)}"


def test_no_false_positives():
    extra = set(emails()) - set(EXPECTED)
    assert not extra, f"unexpected: {sorted(extra)}"


def test_lowercase_and_unique():
    got = emails()
    assert all(e == e.lower() for e in got)
    assert len(got) == len(set(got))


def test_sorted():
    assert emails() == EXPECTED
