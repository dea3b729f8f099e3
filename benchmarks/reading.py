"""The reading section of ``benchmarks/run`` (issue 30, item 6): every reading command, fresh
(a new process) and warm (a second call in one process), CPU seconds and peak memory, beside
DuckDB running the same SQL over the same files with no kidata in between.

The baseline is the script ``kidata views --sql`` prints (each table a ``read_parquet`` glob,
each view its ``sql/*.sql`` body), run by a plain ``duckdb`` connection
(``baselines.py plain``): the same plan without kidata's snapshot, session, caches or output
code. The ratio is kidata's CPU over the baseline's; the issue's target is 1.5x. The report and
``changes`` have no SQL equivalent, so their rows are held to the absolute targets only (the
report 15 s at 1M runs; both 500 MB); nor has ``regressions --since`` over the later half of
the runs' time span, whose session computes every step of its window (500 MB).
``benchmarks/run --query-memory SIZE`` runs every command under ``KIDATA_QUERY_MEMORY`` and the
baseline under the same DuckDB limit.
"""

from __future__ import annotations

import json
import shutil
import statistics
from pathlib import Path
from typing import Any

# (name, kidata's arguments, the same question as SQL for the baseline, what the baseline does
# with it: 'fetch' the rows, 'copy' them to a Parquet file, or 'database' (every table copied
# into a DuckDB database file, as `kidata export --duckdb`)). OUT is replaced by a file path.
COMMANDS: tuple[tuple[str, list[str], str | None, str], ...] = (
    ("regressions", ["regressions"], "SELECT * FROM regressions", "fetch"),
    ("trends", ["sql", "select count(*), sum(change) from trends", "-f", "csv"],
     "select count(*), sum(change) from trends", "fetch"),
    ("speedup_summary", ["sql", "select * from speedup_summary", "-f", "csv"],
     "select * from speedup_summary", "fetch"),
    ("sql -o (trends)", ["sql", "select * from trends", "-o", "OUT.parquet"],
     "select * from trends", "copy"),
    ("export speedups", ["export", "speedups", "-o", "OUT.parquet"],
     "select * from speedups", "copy"),
    ("export --duckdb", ["export", "--duckdb", "OUT.duckdb"], None, "database"),
    ("report", ["report", "-o", "OUT.html"], None, "none"),
    ("changes", ["changes", "-f", "csv"], None, "none"),
    # The later half of the runs' time span (SINCE): the session computes every step of the
    # window rather than reading the stored ones (docs/benchmarks.md, Run AU).
    ("regressions --since", ["regressions", "--since", "SINCE", "-f", "csv"], None, "none"),
)
# The middle of the runs' time span, for SINCE.
MIDDLE = ("select strftime(timezone('UTC', min(observed_at) + (max(observed_at) - "
          "min(observed_at)) / 2), '%Y-%m-%dT%H:%M:%SZ') as since from runs")
# The warm questions (one process, the library): the SQL of the commands above that have one.
WARM = ("regressions", "trends", "speedup_summary")


def _out(args: list[str], folder: Path, side: str, since: str = "") -> list[str]:
    return [since if a == "SINCE" else a.replace("OUT", str(folder / f"{side}-out"))
            for a in args]


def _clean(folder: Path) -> None:
    for f in folder.glob("*-out*"):
        if f.is_dir():
            shutil.rmtree(f, ignore_errors=True)
        else:
            f.unlink(missing_ok=True)


def reading(bench: Any, label: str, wh: Path, res: dict, row: Any, yes: Any) -> None:
    """Add the reading rows for the warehouse ``wh`` (``label`` runs) to ``bench.rows``."""
    folder = bench.out / "reading"
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "views.sql"
    made = bench.kidata("-w", str(wh), "views", "--sql", stdout_path=script)
    if made.returncode:
        raise SystemExit(f"kidata views --sql failed: {made.stderr}")
    tables = [line.split()[4] for line in script.read_text("utf-8").splitlines()
              if line.startswith("CREATE OR REPLACE VIEW") and "read_parquet(" in line]
    bench.kidata("-w", str(wh), "sql", MIDDLE, "-f", "csv",
                 stdout_path=folder / "since.csv")
    since = (folder / "since.csv").read_text("utf-8").splitlines()[1].strip()
    repeat = max(1, bench.args.repeat)
    for name, argv, sql, mode in COMMANDS:
        kidata: list = []
        plain: list = []
        for _ in range(repeat):
            _clean(folder)
            # `kidata regressions` exits 1 when it lists some: that is an answer.
            k = bench.kidata("-w", str(wh), *_out(argv, folder, "kidata", since),
                             stdout_path=folder / "kidata.txt",
                             exit_codes=(0, 1) if name.startswith("regressions") else (0,))
            kidata.append(k)
            if mode != "none":
                target = str(folder / ("plain-out.duckdb" if mode == "database"
                                       else "plain-out.parquet"))
                p = bench.python(bench.baselines, "plain", str(script), mode,
                                 sql or ",".join(tables), target,
                                 stdout_path=folder / "plain.txt")
                if not p.ok:
                    raise SystemExit(f"plain DuckDB {name} failed: {p.stderr}")
                plain.append(p)
        _clean(folder)
        k_cpu = statistics.median(m.cpu_seconds for m in kidata)
        k_wall = statistics.median(m.seconds for m in kidata)
        k_mb = max(m.peak_mb for m in kidata)
        bench.record(f"{label}/read_{name}", {"kidata_cpu_s": [m.cpu_seconds for m in kidata],
                                               "kidata_s": [m.seconds for m in kidata],
                                               "kidata_peak_mb": [m.peak_mb for m in kidata],
                                               "plain_cpu_s": [m.cpu_seconds for m in plain],
                                               "plain_s": [m.seconds for m in plain],
                                               "plain_peak_mb": [m.peak_mb for m in plain]})
        res[f"read_{name}_cpu_s"] = k_cpu
        res[f"read_{name}_peak_mb"] = k_mb
        kid = f"{k_wall:.2f} s wall, {k_cpu:.2f} CPU s, {k_mb:,.0f} MB"
        if plain:
            p_cpu = statistics.median(m.cpu_seconds for m in plain)
            p_mb = max(m.peak_mb for m in plain)
            ratio = k_cpu / p_cpu if p_cpu else float("inf")
            bench.rows.append(row(
                f"read, fresh: `kidata {' '.join(argv)}` vs plain DuckDB over the same files "
                "(CPU; peak)", label, kid, f"{p_cpu:.2f} CPU s, {p_mb:,.0f} MB",
                f"{ratio:.2f}×", "≤ 1.5×, ≤ 500 MB", yes(ratio <= 1.5 and k_mb <= 500)))
        else:
            timed = name == "report"  # the 15 s is the report's
            bench.rows.append(row(f"read, fresh: `kidata {' '.join(argv)}`", label, kid, "-",
                                  "-", "≤ 15 s, ≤ 500 MB" if timed else "≤ 500 MB",
                                  yes((k_wall <= 15 or not timed) and k_mb <= 500)))
    # Warm: the second and later calls in one process (the library, as in a notebook).
    warm = bench.python(bench.baselines, "warm-plain", str(script), str(wh),
                        json.dumps({n: s for n, _, s, _ in COMMANDS if n in WARM}),
                        str(max(3, repeat)))
    if not warm.ok:
        raise SystemExit(f"warm reading failed: {warm.stderr}")
    got = json.loads(warm.stdout)
    bench.record(f"{label}/read_warm", got)
    for name in WARM:
        k_w = statistics.median(got[name]["kidata_s"])
        p_w = statistics.median(got[name]["plain_s"])
        if got[name]["kidata_rows"] != got[name]["plain_rows"]:
            raise SystemExit(f"warm {name}: kidata gives {got[name]['kidata_rows']} rows, "
                             f"plain DuckDB {got[name]['plain_rows']}")
        res[f"read_warm_{name}_s"] = k_w
        ratio = k_w / p_w if p_w else float("inf")
        bench.rows.append(row(f"read, warm: `{name}` (Warehouse.sql vs the plain connection, "
                              "second call)", label, f"{k_w:.3f} s", f"{p_w:.3f} s",
                              f"{ratio:.2f}×", "≤ 1.5×", yes(ratio <= 1.5)))
