"""What ``agentenvs data info`` shows before a fetch, and docs/data.md against the registry."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from agentenvs.cli import main as cli_main
from agentenvs.data.registry import DATASETS

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", sorted(DATASETS))
def test_info_shows_splits_download_and_target_before_fetching(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dataset = DATASETS[name]
    cache = tmp_path / "cache"
    assert cli_main(["data", "--cache-dir", str(cache), "info", name]) == 0
    out = capsys.readouterr().out
    target = cache / name / dataset.source.revision
    assert "cached:   no" in out and str(target) in out
    download = next(line for line in out.splitlines() if line.startswith("download:"))
    assert (dataset.download_size or "size not recorded") in download
    for split, inside in dataset.splits.items():
        shown = f"{split}: gym.make({dataset.env_id!r}, tasks_path={str(target / inside)!r})"
        assert shown in out, out
    assert not cache.exists()  # nothing fetched, nothing made


def _registered_table() -> dict[str, list[str]]:
    text = (ROOT / "docs" / "data.md").read_text()
    section = text.split("## Registered datasets", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and (m := re.fullmatch(r"`([^`]+)`", cells[0])):
            rows[m[1]] = cells[1:]
    return rows


def test_the_docs_list_every_registered_dataset() -> None:
    rows = _registered_table()
    assert set(rows) == set(DATASETS)
    for name, (source, env_id, splits) in rows.items():
        dataset = DATASETS[name]
        assert dataset.source.revision in source, name
        assert f"`{dataset.env_id}`" == env_id, name
        assert set(re.findall(r"`([^`]+)`", splits)) >= set(dataset.splits), name
