#!/bin/bash
bash /tests/check.sh test "$(cat /app/notes.txt 2>/dev/null)" = alpha
