#!/bin/bash
# Builds /app/incoming: four archives and a SHA256SUMS file. gamma.tar.gz is a
# valid archive that no longer matches its checksum; delta.tar.gz is not listed.
set -euo pipefail
cd "${APP_DIR:-/app}"
rm -rf incoming extracted
mkdir -p incoming
python3 - <<'PY'
import gzip
import hashlib
import io
import tarfile

def build(name, files):
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.USTAR_FORMAT) as tf:
        for path, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(path)
            info.size, info.mtime, info.mode = len(data), 1700000000, 0o644
            tf.addfile(info, io.BytesIO(data))
    blob = gzip.compress(raw.getvalue(), mtime=0)
    with open(f"incoming/{name}.tar.gz", "wb") as fh:
        fh.write(blob)
    return hashlib.sha256(blob).hexdigest()

sums = {}
sums["alpha"] = build("alpha", {"readme.txt": "alpha release\n", "data/values.csv": "a,1\nb,2\n"})
sums["beta"] = build("beta", {"readme.txt": "beta release\n", "bin/run.sh": "echo beta\n"})
sums["gamma"] = build("gamma", {"readme.txt": "gamma release\n"})
build("gamma", {"readme.txt": "gamma release (tampered)\n"})
build("delta", {"readme.txt": "delta release\n"})
with open("incoming/SHA256SUMS", "w") as fh:
    for name in ("alpha", "beta", "gamma"):
        fh.write(f"{sums[name]}  {name}.tar.gz\n")
PY
