"""--since/--until on every reading command (issue 28, item 4): a window over when results were
measured, on tests/data/ci/ (main.csv measured 2026-11-01 10:00, pr.csv 2026-11-02 10:00 UTC:
the same four keys of liger on the H100, versions 0.6.0 and 0.6.1.dev0)."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from kidata import Warehouse
from kidata.core.window import Window, moment
from kidata.errors import UsageError

CI = Path(__file__).parents[1] / "data" / "ci"
KIDATA = Path(sys.executable).parent / "kidata"


@pytest.fixture(scope="module")
def both(tmp_path_factory) -> Path:
    """Both files in ONE load: its stored latest_runs row of each key is the PR's run."""
    path = tmp_path_factory.mktemp("window") / "wh"
    assert Warehouse(path).load([CI / "main.csv", CI / "pr.csv"]).ok
    return path


def versions(wh: Warehouse, table: str) -> list[tuple]:
    return wh.sql(f"select version, count(*) from {table} group by all order by all").fetchall()


def test_a_window_keeps_the_runs_measured_in_it(both: Path):
    assert versions(Warehouse(both), "runs") == [("0.6.0", 4), ("0.6.1.dev0", 4)]
    late = Warehouse(both, since="2026-11-02")
    assert versions(late, "runs") == [("0.6.1.dev0", 4)]
    assert late.sql("select count(*) from measurements").fetchall() == [(12,)]  # 3 each
    early = Warehouse(both, until="2026-11-02")
    assert versions(early, "runs") == [("0.6.0", 4)]
    # The latest run of each key within the window: main's, though the load's stored latest
    # is the PR's (measured after the window's end).
    assert versions(early, "latest_latencies") == [("0.6.0", 4)]
    assert versions(Warehouse(both), "latest_latencies") == [("0.6.1.dev0", 4)]
    # Series steps need two runs in the window: the +20% step of the PR is a regression over
    # both days (its +6% step is under the 10% minimum effect), none within either.
    assert len(Warehouse(both).regressions().fetchall()) == 1
    assert len(Warehouse(both).regressions(0.05).fetchall()) == 2
    assert late.regressions().fetchall() == [] and early.regressions().fetchall() == []
    # compare of the two versions finds nothing comparable in one day.
    assert Warehouse(both).compare("liger,version=0.6.0", "liger,version=0.6.1.dev0").shared \
        == 4
    assert late.compare("liger,version=0.6.0", "liger,version=0.6.1.dev0").shared == 0
    # A window holding both days is the whole warehouse.
    whole = Warehouse(both, since="2026-11-01", until="2026-11-03")
    assert versions(whole, "runs") == versions(Warehouse(both), "runs")
    assert whole.info()["tables"]["runs"]["rows"] == 8


def test_bounds_as_dates_times_and_spans():
    now = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
    assert moment("30d", "--since", now) == datetime(2026, 11, 2, 12, 0, tzinfo=UTC)
    assert moment("12h", "--since", now) == datetime(2026, 12, 2, 0, 0, tzinfo=UTC)
    assert moment("2w", "--since", now) == datetime(2026, 11, 18, 12, 0, tzinfo=UTC)
    assert moment("2026-11-02", "--since") == datetime(2026, 11, 2, tzinfo=UTC)
    assert moment("2026-11-02T12:00+02:00", "--since") == datetime(2026, 11, 2, 10,
                                                                   tzinfo=UTC)
    with pytest.raises(UsageError, match="--until: expected a date or time"):
        moment("yesterday", "--until")
    with pytest.raises(UsageError, match=r"--since \(2026-11-03 00:00:00 UTC\) must come "
                                         r"before --until \(2026-11-02 00:00:00 UTC\)"):
        Window.of("2026-11-03", "2026-11-02")
    assert Window.of(None, None) is None


@pytest.mark.parametrize(("command", "code", "said"), [
    (["sql", "select count(*) as n from runs", "--format", "csv"], 0, "n\n0\n"),
    (["info", "--format", "json"], 0, '"rows": 0'),
    (["audit"], 0, ""),
    (["regressions"], 0, ""),
    (["compare", "liger,version=0.6.0", "liger,version=0.6.1.dev0"], 3, ""),
    (["gate", "liger,version=0.6.0", "liger,version=0.6.1.dev0"], 3, ""),
    (["rejects", "--format", "csv"], 0, "loaded_at,load_id,source_file"),
    (["export", "runs", "-o", "{tmp}/runs.csv"], 0, "wrote 0 rows of runs"),
])
def test_every_reading_command_takes_the_window(both: Path, tmp_path: Path, cli, command,
                                                code, said):
    args = [a.replace("{tmp}", str(tmp_path)) for a in command]
    # Before anything was measured: an empty window.
    result = cli("-w", both, *args, "--until", "2020-01-01")
    assert result.code == code, result.err
    assert said in result.out + result.err
    assert cli("-w", both, *args, "--since", "tomorrow").code == 2


@pytest.mark.slow
def test_the_window_through_the_console_script(both: Path):
    done = subprocess.run([str(KIDATA), "-w", str(both), "sql",
                           "select version, count(*) as n from runs group by all",
                           "--format", "csv", "--since", "2026-11-02T00:00Z"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["version,n", "0.6.1.dev0,4"]


def test_a_run_without_a_time_is_in_no_window(tmp_path: Path):
    """The seeds: trainkernel's 24 runs carry no time (seed 003), the 2 Liger runs do
    (2024-09-03 and 2026-03-27). Any window leaves the untimed runs out."""
    seeds = Path(__file__).parents[1] / "data" / "seeds"
    wh = Warehouse(tmp_path / "wh")
    assert wh.load(seeds).ok
    assert wh.sql("select count(*) from runs where observed_at is null").fetchall() == [(24,)]
    windowed = Warehouse(wh.path, since="2000-01-01")
    assert windowed.sql("select count(*), count(observed_at) from runs").fetchall() == [
        (2, 2)]
    assert windowed.sql("select count(*) from speedups where candidate = 'trainkernel'"
                        ).fetchall() == [(0,)]
