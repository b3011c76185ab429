#!/bin/bash
# the step's setup ran before it, and the note keeps step 1's line
[ -f /app/.step-ready ] || { echo "the step's setup did not run"; echo 0 > /logs/verifier/reward.txt; exit 0; }
bash /tests/check.sh test "$(cat /app/notes.txt 2>/dev/null)" = "$(printf 'alpha\n3')"
