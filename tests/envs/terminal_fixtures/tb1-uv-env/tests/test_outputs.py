import os
from pathlib import Path


def test_greeting():
    assert Path("/app/greeting.txt").read_text() == "Good day.\n"


def test_tests_see_the_image_environment():
    assert os.environ["GREETING_STYLE"] == "formal"
    path = os.environ["PATH"].split(":")
    assert "/opt/tools/bin" in path and "/usr/bin" in path
