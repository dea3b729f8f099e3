"""Stored steps (kidata/store/contexts.py, sql/stored/series_context.sql): the series views give
the same rows whether the steps are read from ``step_context`` or computed
(sql/series_context.sql), whatever the order of the loads, after an unload, after a protocol
document that gives runs a family and after a load whose steps were not stored; and the
stored rows are what is read."""

from __future__ import annotations

import json
import random
import shutil
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from conftest import console

from kidata import Warehouse
from kidata.core.digest import digest
from kidata.store import contexts

API = "kernelindex.dev/v1alpha1"
GPUS = ("NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3")
KERNELS = ("rms_norm", "layer_norm")
IMPLEMENTATIONS = ("liger", "torch", "triton")
WIDTHS = (1024, 2048, 4096, 8192)
# Sessions: each times every implementation and workload within minutes; two of them straddle
# midnight, and two are less than an hour apart (one sweep split in two).
SESSIONS = (datetime(2024, 3, 1, 10, tzinfo=UTC), datetime(2024, 3, 1, 23, 40, tzinfo=UTC),
            datetime(2024, 3, 3, 9, tzinfo=UTC), datetime(2024, 3, 3, 9, 50, tzinfo=UTC),
            datetime(2024, 3, 5, 23, 55, tzinfo=UTC), datetime(2024, 3, 8, 14, tzinfo=UTC))
PROTOCOL = {"apiVersion": API, "kind": "BenchmarkProtocol", "metadata": {"name": "ctx"},
            "spec": {"comparability": {"family": "ctx-family"}}}
# The first GPU's protocol, its document loaded last.
LATE_PROTOCOL = {"apiVersion": API, "kind": "BenchmarkProtocol", "metadata": {"name": "ctx-b"},
                 "spec": {"comparability": {"family": "ctx-late"}}}


def bundles(seed: int = 7) -> list[dict]:
    """One bundle per (session, GPU, kernel, implementation, width): latency series with
    session-wide shifts, one implementation's code change, spreads on most runs, memory on
    some. Runs of the first GPU name their protocol by digest only (its document comes in a
    load of its own), the others carry it."""
    rng = random.Random(seed)
    out = []
    for s, start in enumerate(SESSIONS):
        shift = 1 + rng.choice((0.0, 0.0, 0.25, -0.2))  # the session's effect on everything
        for g, gpu in enumerate(GPUS):
            for kernel in KERNELS:
                for i, impl in enumerate(IMPLEMENTATIONS):
                    code = 1.3 if impl == "triton" and s >= 4 else 1.0
                    for w, width in enumerate(WIDTHS):
                        at = start + timedelta(minutes=3 * i + w, seconds=g)
                        median = (1000 * (w + 1) * (i + 2) * shift * code
                                  * (1 + rng.uniform(-0.03, 0.03)))
                        timing = {"median": round(median, 1)}
                        if rng.random() < 0.8:
                            timing.update(p20=round(median * 0.97, 1),
                                          p80=round(median * 1.03, 1))
                        spec = {"measurements": [], "observedAt": at.isoformat(),
                                "sourceNative": {"benchmark": f"{kernel}/forward",
                                                 "source": "ctx-fixture"},
                                "status": "passed", "timing": {"latencyNs": timing}}
                        if rng.random() < 0.3:
                            spec["measurements"] = [
                                {"metric": "memory", "statistic": "median", "unit": "MB",
                                 "value": 100.0 * (w + 1) * shift}]
                        labels = {"gpu_name": gpu, "implementation": impl,
                                  "version": str(1 + s // 3)}
                        run = {"apiVersion": API, "kind": "BenchmarkRun",
                               "metadata": {"labels": labels,
                                            "name": f"ctx-{s}-{g}-{kernel}-{impl}-{width}"},
                               "spec": spec}
                        workload = {"apiVersion": API, "kind": "Workload",
                                    "metadata": {"name": f"{kernel}-H{width}"},
                                    "spec": {"kernel": kernel, "name": f"{kernel}-H{width}",
                                             "parameters": {"H": width}}}
                        bundle = {"run": run, "workload": workload}
                        if g == 0:
                            spec["protocolDigest"] = digest(LATE_PROTOCOL)
                        else:
                            bundle["protocol"] = PROTOCOL
                        out.append(bundle)
    return out


def kidata(*args: object) -> subprocess.CompletedProcess:
    return console(*args)


def write(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def series(path: Path, **window: str) -> list[tuple]:
    """Every row of series_context, series_steps and rerun_changes (of the results in
    ``window``: since, until), sorted, floats to 12 digits (DuckDB's parallel sums may differ
    in the last bits)."""
    wh = Warehouse(path, **window)
    out = []
    for view in ("series_context", "series_steps", "rerun_changes"):
        out += sorted((view, *(float(f"{v:.12g}") if isinstance(v, float) else v
                               for v in row))
                      for row in wh.sql(f"select * from {view}").fetchall())
    return out


def computed(path: Path, tmp: Path, **window: str) -> list[tuple]:
    """:func:`series` of a copy of the warehouse without stored steps."""
    copy = tmp / "computed"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(path, copy)
    shutil.rmtree(copy / "step_context", ignore_errors=True)
    shutil.rmtree(copy / "step_edits", ignore_errors=True)
    assert not reads_stored(copy)
    return series(copy, **window)


def reads_stored(path: Path) -> bool:
    """Whether a session reads series_context from step_context (every load covered)."""
    [(ok,)] = Warehouse(path).sql(contexts.READABLE_SQL).fetchall()
    return ok


def stored(path: Path) -> dict[str, int]:
    """step_context's rows ('step'), and step_edits' by kind ('void', 'count', 'covered')."""
    rows = Warehouse(path).sql("select 'step', count(*) from step_context "
                               "union all select kind, count(*) from step_edits "
                               "group by all").fetchall()
    return dict(rows)


def steps(path: Path) -> int:
    return Warehouse(path).sql("select count(*) from series_context").fetchall()[0][0]


def writers(path: Path) -> int:
    return Warehouse(path).sql("select count(distinct load_id) from step_context").fetchall()[0][0]


def series_count(path: Path) -> int:
    return Warehouse(path).sql(
        "select count(*) from (select distinct kernel, pass, implementation, variant, "
        "workload, gpu, family, metric from series_context)").fetchall()[0][0]


@pytest.fixture(scope="module")
def records() -> list[dict]:
    return bundles()


@pytest.fixture(autouse=True)
def store_contexts(monkeypatch):
    """Loads store contexts at any size (KIDATA_CONTEXTS_AT: 20,000 runs by default)."""
    monkeypatch.setenv("KIDATA_CONTEXTS_AT", "0")


# The slow lane (~45 s: hundreds of loads at the smallest chunk); CI runs both lanes.
@pytest.mark.slow
@pytest.mark.parametrize("chunk", [50_000, 100, 1])
def test_stored_and_computed_steps_agree_in_any_order(records, tmp_path, monkeypatch, chunk):
    # Stored, checked and rebuilt a few kernels, passes and GPUs at a time (contexts.chunks):
    # one pass, two triples of 72 runs per pass, one triple per pass.
    monkeypatch.setattr(contexts, "CHUNK_RUNS", chunk)
    monkeypatch.setattr(contexts, "REBUILD_RUNS", chunk)  # kidata compact's batches too
    rng = random.Random(3)
    wh_path = tmp_path / "wh"
    wh = Warehouse(wh_path)
    # The later sessions first, then the earlier ones (every step between them changes), then
    # a random half of what remains twice over (duplicates), then the protocol's document.
    late = [r for r in records if r["run"]["spec"]["observedAt"] >= "2024-03-03T09:50"]
    early = [r for r in records if r not in late]
    rng.shuffle(early)
    files = [write(tmp_path / "late.jsonl", late),
             write(tmp_path / "early-1.jsonl", early[: len(early) // 2]),
             write(tmp_path / "early-2.jsonl", early),
             write(tmp_path / "protocol.jsonl", [LATE_PROTOCOL])]
    reports, counts = [], []
    for n, file in enumerate(files, 1):
        reports.append(wh.load(file))
        assert wh.check().ok
        # After each load every load is covered, and sessions read the stored steps.
        assert reads_stored(wh_path)
        assert stored(wh_path)["covered"] == n
        got = series(wh_path)
        assert got == computed(wh_path, tmp_path)
        # Steps with a previous result, joined with others: the contexts are not all empty.
        assert any(row[0] == "series_context" and row[14] is not None for row in got)
        counts.append(steps(wh_path))
    # The first load stored every step; the earlier sessions, loaded after, voided the steps
    # they came before (their previous result changed) and stored them anew; the protocol's
    # document only the first GPU's steps, whose family it gave.
    added = [r.added.get("step_context", 0) for r in reports]
    assert added[0] == counts[0]
    assert stored(wh_path)["void"] > 0
    assert 0 < added[3] < counts[3]
    # An unload is the one way results leave a group: it empties the table in its commit,
    # then stores every step again; the same rows as computed.
    before = sorted((wh_path / "step_context").glob("*.parquet"))
    wh.unload([reports[1].load_id])
    assert not any(f.exists() for f in before)
    assert wh.check().ok
    assert reads_stored(wh_path)
    assert series(wh_path) == computed(wh_path, tmp_path)
    left = steps(wh_path)
    assert left < counts[-1]
    # (An unloaded load keeps its row in loads: covered too.)
    assert stored(wh_path) == {"step": left, "covered": 4, "count": series_count(wh_path),
                               "wrote": 1}
    # A load after it adds its changes; kidata compact keeps the rows in use in one file.
    wh.load(files[1])
    assert len(list((wh_path / "step_context").glob("*.parquet"))) == 2
    wh.compact()
    assert len(list((wh_path / "step_context").glob("*.parquet"))) == 1
    assert stored(wh_path) == {"step": counts[-1], "covered": 5,
                               "count": series_count(wh_path), "wrote": writers(wh_path) + 1}
    assert wh.check().ok
    assert series(wh_path) == computed(wh_path, tmp_path)
    # A query over a time window computes its steps (the stored ones are the whole
    # warehouse's); the same rows as a copy without stored steps.
    for window in ({"since": "2024-03-01T23:00:00Z"}, {"until": "2024-03-03T09:30:00Z"}):
        assert series(wh_path, **window) == computed(wh_path, tmp_path, **window)


@pytest.mark.parametrize("rule", ["share", "most"])
def test_a_load_that_voids_many_steps_rebuilds_them_in_one_file(records, tmp_path,
                                                                 monkeypatch, rule):
    """Every reading query joins the voids: a load whose edits reach a tenth of the stored
    steps (contexts.EDITS_SHARE), or EDITS_MOST rows, and EDITS_AT rows (all made small here)
    rebuilds them in one file with no voids in its compaction, as `kidata compact` would,
    long before KIDATA_COMPACT_AT files; the answers stay those computed afresh. Below both,
    nothing is rebuilt."""
    late = [r for r in records if r["run"]["spec"]["observedAt"] >= "2024-03-03T09:50"]
    early = [r for r in records if r not in late]
    wh_path = tmp_path / "wh"
    wh = Warehouse(wh_path)
    wh.load(write(tmp_path / "late.jsonl", late))
    monkeypatch.setattr(contexts, "EDITS_AT", 1)
    monkeypatch.setattr(contexts, "EDITS_SHARE", 10.0)  # edits never 10x the steps: no rebuild
    wh.load(write(tmp_path / "early-1.jsonl", early[: len(early) // 2]))
    assert len(list((wh_path / "step_context").glob("*.parquet"))) == 2
    voids = stored(wh_path)["void"]
    assert voids > 0  # the earlier results came before the stored steps: those changed
    if rule == "share":
        monkeypatch.setattr(contexts, "EDITS_SHARE", 0.1)
        assert voids + stored(wh_path)["count"] >= 0.1 * stored(wh_path)["step"]  # due now
    else:
        monkeypatch.setattr(contexts, "EDITS_MOST", voids)
    report = wh.load(write(tmp_path / "early-2.jsonl", early))
    assert report.compacted.get("step_context") == (3, 1)
    # The rule, as `kidata load` prints it, with the thresholds in force.
    share, most = contexts.EDITS_SHARE, contexts.EDITS_MOST
    assert report.compacted_why.endswith(f"edits reach {share:.0%} of them or {most:,} rows")
    assert len(list((wh_path / "step_context").glob("*.parquet"))) == 1
    after = stored(wh_path)
    assert "void" not in after and after["step"] == steps(wh_path)
    assert reads_stored(wh_path) and wh.check().ok
    assert series(wh_path) == computed(wh_path, tmp_path)


def test_a_load_rewrites_no_step_whose_sums_differ_only_in_their_last_bits(records, tmp_path):
    """A load stores the steps that changed. together_log_change is an AVG, whose last bits
    follow the order DuckDB's threads add in: compared exactly, a step worked out again that
    differed only there was voided and rewritten, every step of each session the load touched
    (at 1.8M runs in 90 loads ~12 times the load's own steps, and the edits then rebuilt all
    steps after every load: docs/benchmarks.md, Run BJ). Steps are the same as check() judges
    them (contexts.agree): stored sums made to differ in their last bits void nothing more."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    late = [r for r in records if r["run"]["spec"]["observedAt"] >= "2024-03-03T09:50"]
    early = [r for r in records if r not in late]
    voids = {}
    for noisy in (False, True):
        path = tmp_path / f"wh-{noisy}"
        wh = Warehouse(path)
        assert wh.load(write(tmp_path / "early.jsonl", early)).ok
        if noisy:  # each stored sum one unit in its last place off, as a sum can come out
            [file] = (path / "step_context").glob("*.parquet")
            table = pq.read_table(file)
            i = table.schema.get_field_index("together_log_change")
            column = table["together_log_change"]
            values = column.to_numpy(zero_copy_only=False)
            off = pa.array(np.nextafter(values, np.inf), mask=np.isnan(values))
            assert pc.sum(pc.not_equal(off, column)).as_py() > 10
            pq.write_table(table.set_column(i, table.schema.field(i), off), file)
        # The later sessions: steps after the stored ones, which stay as they were.
        assert wh.load(write(tmp_path / "late.jsonl", late)).ok
        voids[noisy] = stored(path).get("void", 0)
        assert wh.check().ok
        assert series(path) == computed(path, tmp_path)
    assert voids[True] == voids[False] < 10

# The environment of tail_bundles' GPU.
ENVIRONMENT = {"apiVersion": API, "kind": "ExecutionEnvironment", "metadata": {"name": "tail-host"},
               "spec": {"hardware": {"vendor": "nvidia", "product": GPUS[0]}, "software": {}}}


def tail_bundles(days: range, implementations: tuple[str, ...] = IMPLEMENTATIONS,
                 protocol: bool = False) -> list[dict]:
    """Bundles of one kernel and GPU, two workloads: each day the implementations an hour
    apart (the first at 08:00, the next at 09:00, ...), so that one's steps are measured
    together with the next one's at exactly an hour (the contexts' bound, inclusive). Every
    run names LATE_PROTOCOL by digest; ``protocol``: its document comes with them."""
    out = []
    for day in days:
        start = datetime(2024, 4, 1, 8, tzinfo=UTC) + timedelta(days=day)
        for i, impl in enumerate(implementations):
            i = IMPLEMENTATIONS.index(impl)
            for w, width in enumerate(WIDTHS[:2]):
                at = start + timedelta(hours=i, seconds=w)
                median = 1000.0 * (i + 1) * (1 + 0.05 * ((day * 7 + i) % 5)) * (1 + 0.01 * w)
                spec = {"measurements": [], "observedAt": at.isoformat(),
                        "protocolDigest": digest(LATE_PROTOCOL),
                        "sourceNative": {"benchmark": "rms_norm/forward", "source": "tail"},
                        "status": "passed", "timing": {"latencyNs": {"median": median}}}
                run = {"apiVersion": API, "kind": "BenchmarkRun",
                       "metadata": {"labels": {"gpu_name": GPUS[0], "implementation": impl,
                                               "version": str(day)},
                                    "name": f"tail-{day}-{impl}-{width}"},
                       "spec": spec}
                workload = {"apiVersion": API, "kind": "Workload",
                            "metadata": {"name": f"rms_norm-H{width}"},
                            "spec": {"kernel": "rms_norm", "name": f"rms_norm-H{width}",
                                     "parameters": {"H": width}}}
                out.append({"run": run, "workload": workload})
    if protocol:
        out.append(LATE_PROTOCOL)
    return out


def test_a_load_works_out_only_the_tails_of_the_series_it_extends(tmp_path, monkeypatch):
    """A load that only adds runs works out the steps of its groups from an hour before its
    first run there (contexts.TAIL_KEPT), reading the results from two hours before
    (TAIL_READ) and each series' last result before those, whose stored step numbers the
    others on: the same rows as computed afresh, though most runs are not read. A load that
    gives a family to the protocol of stored runs, or adds runs before the stored ones, works
    out its groups whole."""
    read: list[int] = []
    changes = contexts._changes

    def counting(con, *args):
        read.append(con.execute("SELECT count(*) FROM runs").fetchall()[0][0])
        return changes(con, *args)

    monkeypatch.setattr(contexts, "_changes", counting)
    wh_path = tmp_path / "wh"
    wh = Warehouse(wh_path)
    triton = ("triton",)
    richer = tail_bundles(range(2, 3), ("torch",))[0]
    richer["run"]["spec"]["environmentDigest"] = digest(ENVIRONMENT)
    richer["environment"] = ENVIRONMENT
    loads = [
        # Six days (the first load stores every step, not through _changes), then the
        # seventh's first two implementations: its 08:00 and 09:00 runs, and the sixth day's
        # of each of the six series.
        (tail_bundles(range(6)), 0),
        (tail_bundles(range(6, 7), IMPLEMENTATIONS[:2]), 6 + 4),
        # Then its 10:00 runs: the 09:00 steps (an hour before) change, and their contexts
        # read the 08:00 runs (two hours before); each series' result of the sixth day gives
        # the previous result and the step number.
        (tail_bundles(range(6, 7), triton), 6 + 6),
        # The eighth day with the protocol's document: every stored run changes family.
        (tail_bundles(range(7, 8), protocol=True), 48),
        # A day before all others: every step after it is numbered anew.
        (tail_bundles(range(-1, 0), triton), 50),
        # A ninth day's run with a richer record of a third day's (its environment's
        # document): the stored run takes the record's environment, its step and the next
        # one change.
        ([*tail_bundles(range(8, 9), triton), richer], 52),
    ]
    for n, (records, runs_read) in enumerate(loads):
        read.clear()
        assert wh.load(write(tmp_path / f"load-{n}.jsonl", records)).ok
        assert sum(read) == runs_read, n
        assert wh.check().ok
        assert reads_stored(wh_path)
        assert series(wh_path) == computed(wh_path, tmp_path)
        if n == 5:
            assert Warehouse(wh_path).sql(
                "SELECT count(*) FROM series_context WHERE environment_id = $e "
                "OR previous_environment_id = $e", {"e": digest(ENVIRONMENT)}
            ).fetchall() == [(2,)]
        if n in (1, 2):  # the 09:00 steps, measured with the 08:00 ones, then the 10:00 ones
            assert Warehouse(wh_path).sql(
                "SELECT step, together_implementations FROM series_context "
                "WHERE implementation = 'torch' AND observed_at >= '2024-04-07 09:00:00Z' "
                "AND observed_at < '2024-04-07 10:00:00Z'").fetchall() == [(7, n)] * 2


def test_a_load_whose_steps_were_not_stored(records, tmp_path, monkeypatch):
    # A load committed, but storing its steps failed (a crash, a full disk): it has no
    # 'covered' row, so sessions compute every step (the stored rows of its groups are
    # stale); the next load stores every step again, in one file.
    wh_path = tmp_path / "wh"
    wh = Warehouse(wh_path)
    late = [r for r in records if r["run"]["spec"]["observedAt"] >= "2024-03-03T09:50"]
    early = [r for r in records if r not in late]
    wh.load(write(tmp_path / "late.jsonl", late))
    assert reads_stored(wh_path)

    def fail(*args, **kwargs):
        raise OSError("no space left on device")

    with monkeypatch.context() as m:
        m.setattr(contexts, "derive", fail)
        report = wh.load(write(tmp_path / "early.jsonl", early))
    assert report.committed
    assert any("storing its steps failed" in w for w in report.warnings)
    assert not reads_stored(wh_path)
    assert wh.check().ok  # the rows are not read: nothing to report
    assert series(wh_path) == computed(wh_path, tmp_path)
    # The stored rows alone would be wrong: the early steps are missing.
    assert stored(wh_path)["step"] < steps(wh_path)
    wh.load(write(tmp_path / "protocol.jsonl", [LATE_PROTOCOL]))
    assert reads_stored(wh_path)
    assert len(list((wh_path / "step_context").glob("*.parquet"))) == 1
    assert stored(wh_path) == {"step": steps(wh_path), "covered": 3,
                               "count": series_count(wh_path), "wrote": 1}
    assert series(wh_path) == computed(wh_path, tmp_path)


def test_a_second_compact_leaves_the_steps_it_rebuilt_in_place(records, tmp_path):
    """`kidata compact` rebuilds the stored steps in one file (and step_edits in one), stamped
    for the loads committed then; a second `kidata compact` finds them so and rewrites nothing
    (it rewrote every step each time: 1M rows at 1M runs). A load, an unload, or `kidata check
    --repair` since makes the next one rebuild them; the answers stay those computed."""
    wh_path = tmp_path / "wh"
    late = [r for r in records if r["run"]["spec"]["observedAt"] >= "2024-03-03T09:50"]
    early = [r for r in records if r not in late]

    def files() -> list[str]:
        return sorted(f.name for t in (contexts.TABLE, contexts.EDITS)
                      for f in (wh_path / t).glob("*.parquet"))

    def compact() -> str:
        done = kidata("-w", wh_path, "compact")
        assert done.returncode == 0, done.stderr
        return done.stdout + done.stderr

    for part, name in ((late, "late"), (early, "early")):
        assert kidata("-w", wh_path, "load", "-q", write(tmp_path / f"{name}.jsonl", part)
                      ).returncode == 0
    assert len(files()) == 4
    first = compact()
    rebuilt = files()
    assert len(rebuilt) == 2 and "step_context" in first
    assert compact() != first and files() == rebuilt  # nothing rewritten
    assert "step_context" not in compact()
    assert Warehouse(wh_path).check().ok and reads_stored(wh_path)
    assert series(wh_path) == computed(wh_path, tmp_path)
    # A load since: its files, then one rebuilt pair again.
    report = Warehouse(wh_path).load(write(tmp_path / "protocol.jsonl", [LATE_PROTOCOL]))
    assert len(files()) > 2
    assert "step_context" in compact() and len(files()) == 2
    again = files()
    assert not set(again) & set(rebuilt) and files() == again
    # An unload stores every step afresh for the loads left, as one stamped pair: nothing
    # for a compaction to do.
    Warehouse(wh_path).unload([report.load_id])
    unloaded = files()
    assert unloaded != again and len(unloaded) == 2
    compact()
    assert files() == unloaded and reads_stored(wh_path)
    # A load committed whose steps were not stored (a crash, a full disk) leaves the one
    # pair as it was, but no longer covering every load: the compaction stores them again.
    with pytest.MonkeyPatch.context() as m:
        m.setattr(contexts, "derive", lambda *a, **k: (_ for _ in ()).throw(OSError("full")))
        newer = json.loads(json.dumps(late[-1]))
        newer["run"]["metadata"]["name"] += "-rerun"
        newer["run"]["spec"]["observedAt"] = "2024-03-09T10:00:00+00:00"
        added = Warehouse(wh_path).load(write(tmp_path / "newer.jsonl", [newer]))
    assert added.committed and added.added.get("runs")
    assert files() == unloaded and not reads_stored(wh_path)
    assert "step_context" in compact()
    assert files() != unloaded and len(files()) == 2 and reads_stored(wh_path)
    assert Warehouse(wh_path).check().ok
    assert series(wh_path) == computed(wh_path, tmp_path)


def test_a_query_racing_a_load_that_stores_its_steps_sees_them_before_it(records, tmp_path):
    # A load writes its steps' file, then its edits' file; a query listing the two tables'
    # files between the two renames may see its edits (its voids and counts, its 'covered'
    # row) without its steps. Each writer's rows count only while all the steps it wrote are
    # there: such a query reads the steps as they were before the load, not half of them.
    wh_path = tmp_path / "wh"
    wh = Warehouse(wh_path)
    late = [r for r in records if r["run"]["spec"]["observedAt"] >= "2024-03-03T09:50"]
    early = [r for r in records if r not in late]
    wh.load(write(tmp_path / "late.jsonl", late))
    before = series(wh_path)
    report = wh.load(write(tmp_path / "early.jsonl", early))
    assert stored(wh_path)["void"] > 0  # the load changed steps stored before it
    racing = tmp_path / "racing"
    shutil.copytree(wh_path, racing)
    (racing / "step_context" / f"part-{report.load_id}.parquet").unlink()
    assert reads_stored(racing)
    got = [row for row in series(racing) if row[0] == "series_context"]
    assert got == [row for row in before if row[0] == "series_context"]
    # With all of them there, the load's changes apply.
    assert series(wh_path) == computed(wh_path, tmp_path) != before


def test_a_warehouse_stores_steps_from_a_size_on(records, tmp_path, monkeypatch):
    # Below KIDATA_CONTEXTS_AT runs nothing is stored (queries compute the steps); the
    # load that reaches it stores every step, not only those of its groups.
    monkeypatch.setenv("KIDATA_CONTEXTS_AT", "200")
    wh_path = tmp_path / "wh"
    wh = Warehouse(wh_path)
    first = [r for r in records if r["run"]["metadata"]["labels"]["gpu_name"] == GPUS[0]]
    second = [r for r in records if r not in first]
    assert len(first) == len(second) == 144
    report = wh.load(write(tmp_path / "first.jsonl", first))
    assert "step_context" not in report.added
    assert not list((wh_path / "step_context").glob("*.parquet"))
    assert not reads_stored(wh_path)
    report = wh.load(write(tmp_path / "second.jsonl", second))
    assert report.added["step_context"] == steps(wh_path)
    assert reads_stored(wh_path)
    assert series(wh_path) == computed(wh_path, tmp_path)


def test_the_stored_rows_are_what_is_read(records, tmp_path):
    # Through the CLI, as a user runs it (KIDATA_CONTEXTS_AT=0 from the fixture).
    wh_path = tmp_path / "wh"
    done = kidata("-w", wh_path, "load", write(tmp_path / "all.jsonl", records))
    assert done.returncode == 0, done.stderr
    [file] = sorted((wh_path / "step_context").glob("*.parquet"))
    assert len(pq.read_table(file)) == steps(wh_path)
    before = series(wh_path)
    assert before == computed(wh_path, tmp_path)
    # Tamper with every stored context: the views now differ (they read the rows)...
    table = pq.read_table(file)
    changed = table.set_column(table.schema.get_field_index("together_log_change"),
                               "together_log_change",
                               table.column("together_log_change").fill_null(0.5))
    pq.write_table(changed, file)
    assert series(wh_path) != before
    # ... and kidata check finds the rows that do not hold what is computed.
    report = Warehouse(wh_path).check()
    assert not report.ok
    assert any("step_context" in problem for problem in report.problems)
    checked = kidata("-w", wh_path, "check")
    assert checked.returncode != 0
    assert "step_context: " in checked.stdout + checked.stderr
    # kidata check --repair stores them again, computed afresh: clean, the views as before.
    repaired = kidata("-w", wh_path, "check", "--repair")
    assert repaired.returncode == 0, repaired.stdout + repaired.stderr
    assert "repaired: stored every series step again" in repaired.stdout
    assert kidata("-w", wh_path, "check").returncode == 0
    assert series(wh_path) == before


@pytest.mark.parametrize(("column", "stored", "fresh", "same"), [
    # A mean of log changes that nearly cancel: its last bits follow the order AVG added in
    # (relative to its inputs, not to itself), so it is compared within 1e-12.
    ("together_log_change", 2e-10, 2e-10 + 3e-17, True),
    ("together_log_change", 0.0, 1e-13, True),
    ("together_log_change", 0.01, 0.0100001, False),
    ("together_log_change", None, 0.0, False),
    # Other floats are worked out row by row, the same in any order: within 1e-9 of the
    # larger only.
    ("log_change", 2e-10, 2e-10 + 3e-17, False),
    ("log_change", 0.25, 0.25 * (1 + 1e-12), True),
    ("median", None, None, True),
    ("run_id", "a", "a", True),
    ("run_id", "a", None, False),
])
def test_check_compares_each_column_of_a_step_as_its_computation_allows(column, stored, fresh,
                                                                        same):
    """kidata check compares stored steps with steps computed afresh (contexts.agree): a 10M
    run check reported a stored step different once, and not when run again, as a mean near
    zero took its last bits from the order of its additions."""
    import duckdb

    rows = duckdb.sql(f"SELECT {contexts.agree(column, 'c', 'f')} FROM "
                      f"(SELECT $1 AS {column}) c, (SELECT $2 AS {column}) f",
                      params=[stored, fresh]).fetchall()
    assert rows == [(same,)]


def test_a_restricted_query_builds_no_semi_join_from_the_steps(records, tmp_path):
    """A filter on the series views (the report's --kernel, a user's WHERE) shrinks DuckDB's
    estimate of the stored steps, and the stored body's rule that only complete writers count
    was a semi-join on their load ids, which DuckDB then built from the steps, every column,
    instead of from the few load ids: `kidata report -k rms_norm` ran out of the default 300MB
    at 5M generated runs while the whole report did not (docs/benchmarks.md, Run AT). It is a
    filter now. The plans of the report's history query (data.trend_series, one kernel) and of
    trends on one kernel and GPU hold no semi-join whose hash table is built from step_context."""
    from kidata.query.present import data

    wh = Warehouse(tmp_path / "wh")
    assert wh.load(write(tmp_path / "all.jsonl", records)).ok
    assert reads_stored(tmp_path / "wh")
    plans: list = []

    class Explained:
        """A session of its own for each query, explained instead of run (its plan as JSON;
        a session that read trends twice keeps it as a table)."""

        def sql(self, query, params=None):
            session = Warehouse(tmp_path / "wh").session
            plans.append(json.loads(session.sql("EXPLAIN (FORMAT json) " + query, params)
                                    .fetchall()[0][1]))
            return session.sql("SELECT NULL AS kernel, 0 AS total WHERE false")

        def rows(self, query, params=None):
            return self.sql(query, params).fetchall()

    data.trend_series(Explained(), data.Filters(kernels=["rms_norm"]), 12, [])
    Explained().sql("SELECT * FROM trends WHERE kernel = 'rms_norm' AND gpu = 'a100-sxm4-80gb'")

    def reads_steps(node) -> bool:
        """Whether a plan reads step_context: a Parquet scan of kernels and runs (step_edits'
        scans give one or the other: its counts per series, its voids per run)."""
        scanned = str(node.get("extra_info", {}).get("Projections"))
        return (node.get("name") == "READ_PARQUET" and "'kernel'" in scanned
                and "'run_id'" in scanned
                or any(reads_steps(child) for child in node.get("children", [])))

    def semi_built_from_steps(node) -> list[str]:
        found = []
        kind = str(node.get("extra_info", {}).get("Join Type", ""))
        children = node.get("children", [])
        if "SEMI" in kind and len(children) == 2 and reads_steps(children[1]):
            found.append(kind)
        return found + [f for child in children for f in semi_built_from_steps(child)]

    assert len(plans) == 2 and all(any(reads_steps(node) for node in plan) for plan in plans)
    assert [f for plan in plans for node in plan for f in semi_built_from_steps(node)] == []


def windowed(path: Path, **window: str) -> list[tuple]:
    """:func:`series`, with latest_runs and latest_latencies (latest_runs is computed from the
    window's runs), sorted, floats to 12 digits."""
    wh = Warehouse(path, **window)
    out = series(path, **window)
    for view in ("latest_runs", "latest_latencies"):
        out += sorted((view, *(float(f"{v:.12g}") if isinstance(v, float) else v
                               for v in row))
                      for row in wh.sql(f"select * from {view}").fetchall())
    return out


def view_sql(wh: Warehouse, name: str) -> str:
    [(sql,)] = wh.session.cached.sql("select sql from duckdb_views() where view_name = $n",
                                     params={"n": name}).fetchall()
    return sql


def test_a_window_keeps_what_it_computes_and_its_steps_a_few_kernels_at_a_time(
        records, tmp_path, monkeypatch):
    # A windowed session computes series_context, rerun_changes and latest_runs (the stored
    # ones are the whole history's). Past CHUNK_RUNS passed runs it keeps their rows in files
    # (kidata.query.kept), series_context worked out a few kernels, passes and GPUs at a time
    # (contexts.compute), batches bounded by runs and by pairs of steps: all at once, a window
    # of 500k runs needed ~1.8 GB. The rows are the same as the views worked out as queried,
    # batch by batch, one group per batch or all at once (KIDATA_QUERY_MEMORY=none).
    wh_path = tmp_path / "wh"
    Warehouse(wh_path).load(write(tmp_path / "all.jsonl", records))
    window = {"since": "2024-03-01T23:00:00Z"}  # 240 of the 288 runs, 60 per kernel and GPU
    monkeypatch.setattr(contexts, "CHUNK_RUNS", 10**9)
    whole = windowed(wh_path, **window)
    assert any(row[0] == "series_context" and row[14] is not None for row in whole)
    assert any(row[0] == "rerun_changes" for row in whole)
    made: list[list[Path]] = []
    compute = contexts.compute

    def spy(con, folder, counts):
        files = compute(con, folder, counts)
        made.append(files)
        return files

    monkeypatch.setattr(contexts, "compute", spy)
    # At most 200 runs a batch: the first three kernel-and-GPU groups, then the fourth; at
    # most 300 pairs: one group a batch (each has 5 sessions x 3 implementations x 4 widths
    # measured within minutes: ~5 x 3 x 16 = 240 pairs); no limit: one batch.
    monkeypatch.setattr(contexts, "CHUNK_RUNS", 200)
    for memory, pairs, batches in ((None, 10**9, 2), (None, 300, 4), ("none", 300, 1)):
        if memory:
            monkeypatch.setenv("KIDATA_QUERY_MEMORY", memory)
        monkeypatch.setattr(contexts, "CHUNK_PAIRS", pairs)
        made.clear()
        assert windowed(wh_path, **window) == whole
        assert [len(files) for files in made] == [batches]
    monkeypatch.delenv("KIDATA_QUERY_MEMORY")
    # Below CHUNK_RUNS runs the views are worked out as queried.
    monkeypatch.setattr(contexts, "CHUNK_RUNS", 240)
    made.clear()
    wh = Warehouse(wh_path, **window)
    wh.sql("select count(*) from latest_latencies, series_context, rerun_changes").fetchall()
    assert made == []
    for name in ("series_context", "rerun_changes", "latest_runs"):
        assert "read_parquet" not in view_sql(wh, name), name


def test_kept_rows_outlive_a_connection_and_go_with_the_snapshot_or_the_session(
        records, tmp_path, monkeypatch):
    # The report closes its connection after each query: the next one reads the same files.
    # A load (a new snapshot) works them out again and removes the old ones; the session's
    # end removes its folder.
    wh_path = tmp_path / "wh"
    Warehouse(wh_path).load(write(tmp_path / "all.jsonl", records))
    monkeypatch.setattr(contexts, "CHUNK_RUNS", 200)
    made: list[list[Path]] = []
    compute = contexts.compute
    monkeypatch.setattr(contexts, "compute",
                        lambda *a: made.append(compute(*a)) or made[-1])
    wh = Warehouse(wh_path, since="2024-03-01T23:00:00Z")
    query = ("select (select count(*) from series_context), "
             "(select count(together_log_change) from series_context), "
             "(select count(*) from rerun_changes), (select count(*) from latest_latencies)")
    first = wh.sql(query).fetchall()
    for name in ("series_context", "rerun_changes", "latest_runs"):
        assert "read_parquet" in view_sql(wh, name), name
    [files] = made
    folder = files[0].parent.parent
    kept = sorted(p.name for p in folder.rglob("*.parquet"))
    assert len(kept) == len(files) + 2  # the steps' batches, rerun_changes, latest_runs
    wh.session.close()
    assert wh.sql(query).fetchall() == first
    assert len(made) == 1  # the same files, read by the next connection
    assert sorted(p.name for p in folder.rglob("*.parquet")) == kept
    renamed = [dict(r, run=dict(r["run"], metadata=dict(
        r["run"]["metadata"], name=r["run"]["metadata"]["name"] + "-x"))) for r in records[:4]]
    wh.load(write(tmp_path / "more.jsonl", renamed))
    wh.sql(query).fetchall()
    assert len(made) == 2 and not any(f.exists() for f in files)
    assert all(f.exists() for f in made[1])
    del wh
    import gc

    gc.collect()
    assert not folder.exists()
    # A connection handed out (Warehouse.connect) keeps its files while it lives, though the
    # warehouse object that made it is gone.
    steps = Warehouse(wh_path, since="2024-03-01T23:00:00Z").sql(
        "select count(*) from series_context").fetchall()
    gc.collect()
    con = Warehouse(wh_path, since="2024-03-01T23:00:00Z").connect()
    gc.collect()
    assert "read_parquet" in con.sql("select sql from duckdb_views() "
                                     "where view_name = 'series_context'").fetchall()[0][0]
    assert con.sql("select count(*) from series_context").fetchall() == steps
    handed = made[-1]
    del con
    gc.collect()
    assert not handed[0].parent.parent.exists()


def test_a_query_that_does_not_parse_fails_before_the_window_computes(records, tmp_path,
                                                                      monkeypatch):
    # Defining the views of a windowed session computes what they read (kept rows); a typo
    # or a statement read-only refuses is told before, not after, that work.
    wh_path = tmp_path / "wh"
    Warehouse(wh_path).load(write(tmp_path / "all.jsonl", records))
    monkeypatch.setattr(contexts, "CHUNK_RUNS", 200)
    made = []
    compute = contexts.compute
    monkeypatch.setattr(contexts, "compute", lambda *a: made.append(compute(*a)) or made[-1])
    wh = Warehouse(wh_path, since="2024-03-01T23:00:00Z")
    from kidata.errors import KidataError, QueryError

    with pytest.raises(QueryError, match="syntax error"):
        wh.sql("selec * from trends")
    with pytest.raises(KidataError, match="read-only"):
        wh.sql("create table t as select * from trends", read_only=True)
    assert made == []
    assert wh.sql("select count(*) from trends").fetchall()[0][0] > 0
    assert len(made) == 1
