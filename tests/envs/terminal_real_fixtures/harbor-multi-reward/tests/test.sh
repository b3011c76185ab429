#!/bin/bash

apt-get update
apt-get install -y curl

curl -LsSf https://astral.sh/uv/0.9.5/install.sh | sh

source $HOME/.local/bin/env

# one named reward per part of the task
if uvx -p 3.13 -w pytest==8.4.1 pytest /tests/test_outputs.py -rA -k sorted; then sorted=1; else sorted=0; fi
if uvx -p 3.13 -w pytest==8.4.1 pytest /tests/test_outputs.py -rA -k count; then count=1; else count=0; fi

mkdir -p /logs/verifier
echo "{\"sorted\": $sorted, \"count\": $count}" > /logs/verifier/reward.json
