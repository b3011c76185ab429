import os
from pathlib import Path

out = Path(os.environ["REPORT_DIR"])
out.mkdir(parents=True, exist_ok=True)
words = Path("/app/words.txt").read_text().split()
(out / "sorted.txt").write_text("".join(w + "\n" for w in sorted(words)))
(out / "count.txt").write_text(f"{len(words)}\n")
