#!/bin/bash
# shared by both steps: records a reward of 1 when the command given passes, else 0
mkdir -p /logs/verifier
if "$@"; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
