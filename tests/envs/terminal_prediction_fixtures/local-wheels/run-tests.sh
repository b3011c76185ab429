#!/bin/bash
pip install pytest 2>/dev/null >/dev/null
python3 -m pytest -p no:cacheprovider "$TEST_DIR/test_outputs.py" -rA
