"""The mutation fuzzer (tests/fuzzing.py) with a fixed seed and a small budget; longer runs:
``python benchmarks/fuzz.py --seconds 600``."""

from __future__ import annotations

from fuzzing import fuzz


def test_mutated_bundles_csv_rows_and_tables_never_crash_lose_or_change_records(tmp_path):
    # 6 rounds x (16 bundles, 10 CSV rows, 1 trainkernel table), one load each: about 3 s.
    assert fuzz(tmp_path, seed=17, rounds=6) == 6 * 16
