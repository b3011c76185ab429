#!/bin/bash
set -euo pipefail
cd "${APP_DIR:-/app}"
python3 - <<'PY'
from pathlib import Path

p = Path("confparse.py")
s = p.read_text()
doc_end = s.index('"""', 3) + 3
p.write_text(s[:doc_end] + '''


def parse(text):
    result = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if "=" not in line:
            raise ValueError(f"line {number}: expected key = value")
        key, value = line.split("=", 1)
        key = key.strip().lower()
        value = value.strip()
        if value.startswith('"') and '"' in value[1:]:
            value = value[1 : value.index('"', 1)]
        elif " #" in value:
            value = value[: value.index(" #")].strip()
        result[key] = value
    return result
''')
PY
