#!/bin/bash
apt-get update
apt-get install -y python3-pytest
python3 -m pytest $TEST_DIR/test_outputs.py -rA
