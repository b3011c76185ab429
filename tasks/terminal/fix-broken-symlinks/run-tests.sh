#!/bin/bash
# Offline test runner: pytest is provided by the runtime image (no downloads).
cd "${APP_DIR:-/app}" || exit 1
PYTHONDONTWRITEBYTECODE=1 python3 -m pytest -p no:cacheprovider "${TEST_DIR:-/tests}/test_outputs.py" -rA
