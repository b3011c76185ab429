"""Code checking side by side: rLLM's code checker (the DeepCoder release's) vs
DeepCoder-MT's fast path and its ``rules="official"`` mode.

rLLM is not published as a package that pip can install here (``pip install rllm``:
"No matching distribution found"), and its checker ships only inside its source tree,
which this project does not vendor. So this script reports the peer as missing; our two
modes are measured side by side on the same problems and programs by
``benchmarks/bench_deepcoder_official.py``.
"""

from __future__ import annotations

import importlib.util


def main() -> None:
    if importlib.util.find_spec("rllm") is None:
        print(
            "rLLM code checker: skipped (no 'rllm' package: pip finds no distribution named "
            "rllm here, and its checker ships only in its source tree); our fast path vs "
            "rules='official': benchmarks/bench_deepcoder_official.py"
        )
        return
    print("rLLM is installed, but no side-by-side run is written for it yet")


if __name__ == "__main__":
    main()
