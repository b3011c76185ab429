#!/bin/bash
cd "${APP_DIR:-/app}" || exit 1
python3 -m pytest -p no:cacheprovider "${TEST_DIR:-/tests}/test_outputs.py" -rA
