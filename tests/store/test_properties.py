"""Properties, checked by Hypothesis on generated records:

- any split of a set of records into loads, committed in any order, gives the same tables;
- records → warehouse → export (kernelindex bundles) → records gives the records back, and
  loading the export gives the same tables.

Examples are small and few (each one builds warehouses on disk), in a fresh folder each.
"""

from __future__ import annotations

import copy
import hashlib
import json
import tempfile
from datetime import UTC, datetime
from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from runs_factory import bundle

from kidata import Warehouse
from kidata.store.schema import TABLES

SEEDS = Path(__file__).parents[1] / "data" / "seeds"
SEED1 = json.loads((SEEDS / "001_74c4a9a5654eeb33.txt").read_text("utf-8").split("\n", 2)[2])
PROVENANCE = {"source_file", "loaded_at", "load_id"}
# Tables a load writes, compared without their provenance columns (the file a row came from
# and the load that added it differ with the split, by design). `loads` and `rejects`
# describe the loads themselves, so they are left out, and so is `latest_runs` (a row per key
# per load, by design; the views that read it are the same).
COMPARED = ["runs", "measurements", "environments", "protocols", "workloads",
            "workload_parameters", "implementations", "published"]
# Each example loads real warehouses (seconds), so shrinking a failure could take many
# minutes: report the failing example as generated instead of shrinking it.
FAST = settings(max_examples=5, deadline=None, derandomize=True,
                phases=[Phase.explicit, Phase.reuse, Phase.generate],
                suppress_health_check=[HealthCheck.too_slow])


def seed1_variant(i: int) -> dict:
    """Seed 001 (another GPU, protocol and workload than seed 000) renamed."""
    b = copy.deepcopy(SEED1)
    b["run"]["metadata"]["name"] += f"-{i}"
    return b


# A pool of distinct records: seed 000 copies 0-4 (runs_factory.bundle) and seed 001 copies.
POOL = [bundle(i) for i in range(5)] + [seed1_variant(i) for i in range(3)]


def tables(wh: Warehouse) -> dict[str, list]:
    out = {}
    for table in COMPARED:
        cols = ", ".join(f'"{f.name}"' for f in TABLES[table] if f.name not in PROVENANCE)
        out[table] = sorted(wh.sql(f"select {cols} from {table}").fetchall(), key=repr)
    return out


def write(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records),
                    encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> dict[str, list]:
    """The tables of the whole pool loaded at once."""
    folder = tmp_path_factory.mktemp("reference")
    wh = Warehouse(folder / "wh")
    assert wh.load([str(write(folder / "pool.jsonl", POOL))]).runs_added == len(POOL)
    return tables(wh)


def restricted(reference: dict[str, list], chosen: list[dict]) -> dict[str, list]:
    """The reference tables cut down to the runs chosen and the documents they point at."""
    runs = {r["run"]["metadata"]["name"] for r in chosen}
    specs = [r["run"]["spec"] for r in chosen]
    ids = {s[k] for s in specs for k in ("environmentDigest", "protocolDigest",
                                         "workloadDigest")}
    return {table: [row for row in rows if row[0] in runs or row[0] in ids]
            for table, rows in reference.items()}


@pytest.mark.slow  # generated loads in any split and order (the slow lane's property tests)
@FAST
@given(picks=st.lists(st.integers(0, len(POOL) - 1), min_size=1, max_size=8),
       data=st.data())
def test_any_split_into_loads_in_any_order_gives_the_same_tables(reference, picks, data):
    # Records may repeat (the same record in two loads, or twice in one): still once each.
    buckets = data.draw(st.lists(st.integers(0, 2), min_size=len(picks), max_size=len(picks)),
                        label="load of each record")
    order = data.draw(st.permutations([0, 1, 2]), label="order of the loads")
    chosen = [POOL[i] for i in picks]
    with tempfile.TemporaryDirectory() as tmp:
        wh = Warehouse(Path(tmp) / "wh")
        for load in order:
            part = [r for r, b in zip(chosen, buckets, strict=True) if b == load]
            if part:
                assert wh.load([str(write(Path(tmp) / f"load{load}.jsonl", part))]).ok
        assert tables(wh) == restricted(reference, chosen)
        assert wh.check().problems == []


# -- duplicates of different richness ---------------------------------------------------------

def with_documents(i: int, implementation: bool, rows: int = 2048) -> dict:
    """Run i of the pool (seed 000, named ``…-i``) as a richer record of the same run, as
    Liger's CSV gives it: its Workload document (and, with ``implementation``, its
    Implementation document) in the bundle, the run pointing at their digests. Same numbers:
    a duplicate of ``bundle(i)``, not a conflict. ``rows`` changes the workload (another
    document, equally rich)."""
    from kidata.core.digest import digest

    b = bundle(i)
    workload = {"kind": "Workload", "apiVersion": "kernelindex.dev/v1alpha1",
                "spec": {"kernel": "rms_norm", "name": "hidden4096-rows2048-bf16",
                         "parameters": {"H": 4096, "M": rows, "dtype": "torch.bfloat16"}},
                "metadata": {"name": f"w-{rows}", "title": "RMSNorm workload"}}
    b["workload"] = workload
    b["run"]["spec"]["workloadDigest"] = digest(workload)
    if implementation:
        impl = {"kind": "Implementation", "apiVersion": "kernelindex.dev/v1alpha1",
                "spec": {"kernel": "rms_norm", "name": "liger"},
                "metadata": {"name": "liger-impl-rms-norm-liger", "title": "Liger · RMSNorm"}}
        b["implementation"] = impl
        b["run"]["spec"]["implementationDigest"] = digest(impl)
    return b


# Runs 0 and 1 in up to four variants each: the bare seed shape (documents by digest only),
# with its Workload document, with Workload and Implementation documents (two of those for
# run 0, with different workloads: equally rich).
VARIANTS = [bundle(0), with_documents(0, False), with_documents(0, True),
            with_documents(0, True, rows=1024), bundle(1), with_documents(1, True)]
RICHNESS = [2, 3, 4, 4, 2, 4]  # environment, protocol, + workload, + implementation


@pytest.mark.slow  # generated loads in any split and order (the slow lane's property tests)
@FAST
@given(picks=st.lists(st.integers(0, len(VARIANTS) - 1), min_size=2, max_size=7),
       data=st.data())
def test_richer_duplicates_give_the_same_tables_in_any_split_and_order(picks, data):
    """Records of one run that carry more or fewer of its documents: any split into loads, in
    any order, gives the tables of one load of them all, and each run keeps its richest
    record (ties: the smallest run document), with every document any record carried."""
    buckets = data.draw(st.lists(st.integers(0, 2), min_size=len(picks), max_size=len(picks)),
                        label="load of each record")
    order = data.draw(st.permutations([0, 1, 2]), label="order of the loads")
    chosen = [VARIANTS[i] for i in picks]
    with tempfile.TemporaryDirectory() as tmp:
        one = Warehouse(Path(tmp) / "one")
        assert one.load([str(write(Path(tmp) / "all.jsonl", chosen))]).ok
        wh = Warehouse(Path(tmp) / "wh")
        for load in order:
            part = [r for r, b in zip(chosen, buckets, strict=True) if b == load]
            if part:
                assert wh.load([str(write(Path(tmp) / f"load{load}.jsonl", part))]).ok
        assert tables(wh) == tables(one)
        assert wh.check().problems == []
        stored = dict(wh.sql("SELECT run_id, workload_id FROM runs").fetchall())
        for name in stored:
            mine = [(RICHNESS[i], VARIANTS[i]) for i in set(picks)
                    if VARIANTS[i]["run"]["metadata"]["name"] == name]
            best = max(r for r, _ in mine)
            # Ties: the smallest MD5 of the run document as stored (orjson's bytes).
            richest = min((v for r, v in mine if r == best),
                          key=lambda v: hashlib.md5(orjson.dumps(v["run"])).hexdigest())
            assert stored[name] == richest["run"]["spec"]["workloadDigest"], name
        # Every Workload document any chosen record carried is there, with its parameters.
        carried = {json.dumps(v["workload"]["spec"]["parameters"]) for v in chosen
                   if "workload" in v}
        assert wh.sql("SELECT count(*) FROM workloads WHERE document IS NOT NULL"
                      ).fetchall() == [(len(carried),)]


# -- round trip ------------------------------------------------------------------------------

text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
stamp = st.datetimes(min_value=datetime(1990, 1, 1), max_value=datetime(2100, 1, 1),
                     timezones=st.just(UTC))


@st.composite
def records(draw) -> list[dict]:
    """Distinct runs of seed 000 or 001 with generated numbers, labels, titles and times."""
    out = []
    for i in range(draw(st.integers(1, 4))):
        b = copy.deepcopy(POOL[0] if draw(st.booleans()) else POOL[-1])
        run = b["run"]
        run["metadata"]["name"] = f"run-{i}-" + draw(st.from_regex(r"[a-z0-9]{1,8}",
                                                                   fullmatch=True))
        run["metadata"]["title"] = draw(text)
        run["metadata"]["labels"] = draw(st.dictionaries(text, text, max_size=3))
        median = draw(st.one_of(st.integers(1, 2**53),
                                st.floats(1e-9, 1e15, allow_nan=False, allow_infinity=False)))
        low = draw(st.floats(1e-12, 1.0)) * median
        high = median / draw(st.floats(1e-12, 1.0))
        run["spec"]["timing"]["latencyNs"]["median"] = median
        run["spec"]["measurements"] = [
            {"unit": "ns", "value": low, "metric": "latency", "statistic": "p20"},
            {"unit": "ns", "value": high, "metric": "latency", "statistic": "p80"}]
        run["spec"]["observedAt"] = draw(stamp).isoformat().replace("+00:00", "Z")
        out.append(b)
    return out


@settings(FAST, suppress_health_check=[HealthCheck.too_slow,
                                       HealthCheck.function_scoped_fixture])
@given(batch=records())
def test_records_round_trip_through_the_warehouse(batch, cli):
    with tempfile.TemporaryDirectory() as tmp:
        first = Warehouse(Path(tmp) / "first")
        assert first.load([str(write(Path(tmp) / "in.jsonl", batch))]).ok
        out = Path(tmp) / "out.jsonl"
        assert cli("-w", first.path, "export", "runs", "--format", "kernelindex",
                   "-o", out).code == 0
        # One bundle per "\n" (JSON escapes it inside strings; str.splitlines would also split
        # at U+0085 or U+2028, which JSON writes as they are).
        exported = [json.loads(line) for line in out.read_text("utf-8").split("\n")[:-1]]
        by_name = sorted(batch, key=lambda r: r["run"]["metadata"]["name"])
        assert exported == by_name
        second = Warehouse(Path(tmp) / "second")
        assert second.load([str(out)]).ok
        assert tables(second) == tables(first)
