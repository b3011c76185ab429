#!/bin/bash
# runs in the verifier's own container: of the agent's files only the artifacts are here
mkdir -p /logs/verifier
answer=0; isolated=0
[ "$(cat /app/answer.txt 2>/dev/null)" = 10 ] && answer=1
[ ! -e /app/numbers.txt ] && isolated=1
echo "{\"answer\": $answer, \"isolated\": $isolated}" > /logs/verifier/reward.json
