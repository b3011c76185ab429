#!/bin/bash
# Install curl and pytest
apt-get update
apt-get install -y curl python3-pytest

python3 -m pytest $TEST_DIR/test_outputs.py -rA
