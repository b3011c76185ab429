import importlib.util
import os
from pathlib import Path

import pytest

APP = Path(os.environ.get("APP_DIR", "/app"))


def parse(text):
    spec = importlib.util.spec_from_file_location("confparse_under_test", APP / "confparse.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.parse(text)


def test_basic_and_whitespace():
    assert parse("name = demo\n  port=8080  \n") == {"name": "demo", "port": "8080"}


def test_comments_and_blank_lines():
    text = "# comment\n\n; another\n   # indented comment\nmode = fast\n\n"
    assert parse(text) == {"mode": "fast"}


def test_values_may_contain_equals():
    assert parse("url = http://x.example/?a=1&b=2\n") == {"url": "http://x.example/?a=1&b=2"}


def test_inline_comments():
    assert parse("level = debug # verbose for now\ncolor=#ff0000\n") == {
        "level": "debug",
        "color": "#ff0000",
    }


def test_quoted_values():
    text = 'title = "  Hello # world  "  # greeting\nempty = ""\n'
    assert parse(text) == {"title": "  Hello # world  ", "empty": ""}


def test_keys_lowercase_and_last_wins():
    assert parse("Name = a\nNAME = b\nother = c\n") == {"name": "b", "other": "c"}


def test_error_mentions_line_number():
    with pytest.raises(ValueError, match=r"line 3\b"):
        parse("a = 1\n# ok\nthis line is broken\n")
