"""The sliding window of inverted-list accesses: expiry, hot lists, persistence."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from sits_inference.cache.vector.window import AccessWindow


class Clock:
    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def window(clock: Clock, nlist: int = 8, window_s: float = 60.0) -> AccessWindow:
    return AccessWindow(nlist, window_s, buckets=6, clock=clock)


def test_counts_accumulate_and_skip_invalid_list_numbers() -> None:
    w = window(Clock())
    w.record([[0, 1, 1], [1, -1, 3]])
    w.record(np.array([7, 8, 100]))  # 8 and 100 do not exist
    assert w.counts().tolist() == [1, 3, 0, 1, 0, 0, 0, 1]


@pytest.mark.parametrize(
    ("advance", "expected"),
    [
        (0.0, 2),  # both inside the window
        (40.0, 2),  # the first access is 55 s old
        (49.0, 1),  # the first access is 64 s old: gone
        (70.0, 0),  # both gone
    ],
)
def test_accesses_expire_after_the_window(advance: float, expected: int) -> None:
    clock = Clock(600.0)
    w = window(clock)
    w.record([2])
    clock.now += 15.0
    w.record([2])
    clock.now += advance
    assert w.counts()[2] == expected


def test_hot_lists_are_those_over_the_threshold_most_accessed_first() -> None:
    w = window(Clock())
    w.record([1] * 3 + [4] * 7 + [6] * 5 + [2] * 4)
    assert w.hot(5).tolist() == [4, 6]
    assert w.hot(1).tolist() == [4, 6, 2, 1]
    assert w.hot(8).tolist() == []


def test_saved_counts_come_back_in_a_new_process(tmp_path: Path) -> None:
    clock = Clock(10_000.0)
    w = window(clock)
    w.record([0, 0, 5])
    clock.now += 20.0
    w.record([5, 5])
    path = tmp_path / "state" / "stats.json"
    w.save(path, "sha256:a")

    clock.now += 10.0  # restarted 10 s later: everything still inside the window
    fresh = window(clock)
    assert fresh.load(path, "sha256:a") == 5
    assert fresh.counts().tolist() == w.counts().tolist()


def test_saved_counts_older_than_the_window_are_dropped(tmp_path: Path) -> None:
    clock = Clock(10_000.0)
    w = window(clock)
    w.record([3])
    clock.now += 40.0
    w.record([4])
    path = tmp_path / "stats.json"
    w.save(path, "sha256:a")
    clock.now += 30.0  # the access to list 3 is now 70 s old
    fresh = window(clock)
    assert fresh.load(path, "sha256:a") == 1
    assert fresh.counts()[3] == 0
    assert fresh.counts()[4] == 1


@pytest.mark.parametrize(
    ("content", "digest"),
    [
        (None, "sha256:other"),  # another index: its list numbers mean other lists
        ("not json", "sha256:a"),
        ('{"format": 1, "digest": "sha256:a", "nlist": 9, "buckets": []}', "sha256:a"),
        ('{"format": 1, "digest": "sha256:a", "nlist": 8, "buckets": [{}]}', "sha256:a"),
        ("[1, 2]", "sha256:a"),
    ],
)
def test_foreign_or_broken_statistics_are_ignored(
    tmp_path: Path, content: str | None, digest: str
) -> None:
    clock = Clock()
    path = tmp_path / "stats.json"
    if content is None:
        w = window(clock)
        w.record([1, 2])
        w.save(path, "sha256:a")
    else:
        path.write_text(content)
    fresh = window(clock)
    assert fresh.load(path, digest) == 0
    assert fresh.counts().sum() == 0


def test_missing_statistics_file_is_a_cold_start(tmp_path: Path) -> None:
    assert window(Clock()).load(tmp_path / "absent.json", "sha256:a") == 0


def test_a_changed_window_length_keeps_bucket_times(tmp_path: Path) -> None:
    """Buckets are saved with their start time, so a sidecar restarted with another window
    setting still places them correctly."""
    clock = Clock(36_000.0)
    w = AccessWindow(4, 3600.0, clock=clock)
    w.record([1])
    path = tmp_path / "stats.json"
    w.save(path, "d")
    saved = json.loads(path.read_text())
    assert saved["buckets"][0]["start"] == pytest.approx(36_000.0)
    clock.now += 1800.0
    assert AccessWindow(4, 3600.0, buckets=7, clock=clock).load(path, "d") == 1
    assert AccessWindow(4, 600.0, clock=clock).load(path, "d") == 0
