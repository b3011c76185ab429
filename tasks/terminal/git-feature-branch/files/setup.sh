#!/bin/bash
# Creates the git repository /app/repo (main with three commits).
set -euo pipefail
cd "${APP_DIR:-/app}"
rm -rf repo && mkdir repo && cd repo
git init -q -b main
git config user.name "Dana Developer"
git config user.email "dana@example.invalid"
n=0
commit() {
  n=$((n + 1))
  export GIT_AUTHOR_DATE="2024-01-0${n}T10:00:00+0000" GIT_COMMITTER_DATE="2024-01-0${n}T10:00:00+0000"
  git add -A && git commit -q -m "$1"
}
cat > calc.py <<'PY'
def add(a, b):
    return a + b
PY
commit "Add calculator with add"
cat >> calc.py <<'PY'


def subtract(a, b):
    return a - b
PY
commit "Add subtract"
printf '# calc\n\nSmall arithmetic helpers.\n' > README.md
commit "Add README"
