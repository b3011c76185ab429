import os
import sys
from pathlib import Path


def test_total_as_python_313_prints_it():
    # 3.12+ sums floats with compensation: 0.6 here, where 3.11 printed 0.6000000000000001
    assert Path("/app/total.txt").read_text() == "0.6\n"


def test_tests_see_the_image_environment():
    assert os.environ["PRICE_FILE"] == "/app/prices.txt"
    assert "/opt/venv/bin" in os.environ["PATH"].split(":")
    assert sys.version_info[:2] >= (3, 13)
