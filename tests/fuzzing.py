"""A mutation fuzzer for kidata's loads: bundles, trainkernel tables and Liger CSV rows
(:func:`fuzz`), and the field's harness files (:func:`fuzz_field`, further down).

Each round writes three files into a folder and loads them in one :meth:`Warehouse.load`:

- JSON Lines: ``good`` bundles (the seeds renamed, unchanged), then ``bad`` mutated bundles
  (a value anywhere replaced by a hostile one, or the line's bytes cut, flipped or padded);
- a Liger CSV: good rows (seed 000's row for other hidden sizes), then mutated rows (a field
  replaced by a hostile text);
- a trainkernel table (seed 003) with one value replaced.

What must hold (:func:`check_round`): the load raises nothing (a traceback is a failure);
every good record is in the warehouse exactly as written; every mutated record is rejected
or, if loaded, stored exactly as written (its run document, and its protocol and environment
documents up to metadata); every reject names a file and a position. Used by
``tests/ingest/test_fuzz.py`` (fixed seed, small budget) and ``benchmarks/fuzz.py`` (longer runs).
"""

from __future__ import annotations

import copy
import csv
import io
import json
import random
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kidata import Warehouse

DATA = Path(__file__).parent / "data"
SEEDS = DATA / "seeds"
CSV_HEADER = ("kernel_name,kernel_provider,kernel_operation_mode,metric_name,metric_unit,"
              "x_name,x_label,x_value,y_value_50,y_value_20,y_value_80,"
              "extra_benchmark_config_str,gpu_name,timestamp,liger_version")
CSV_ROW0 = ['rms_norm', 'liger', 'forward', 'speed', 'ms', 'H', 'hidden size', '4096',
            '0.031072000041604042', '0.030047999694943428', '0.031968001276254654',
            '{"M": 2048, "dtype": "torch.bfloat16", "eps": 1e-06}', 'NVIDIA A100-SXM4-80GB',
            '2024-09-03 15:39:30', '0.2.1']


def _deep(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


HOSTILE: list[Any] = [
    2**64, 2**64 - 1, -(2**63) - 1, 123456789012345678901234567890, 1e308, -1e308, 5e-324,
    0, -1, 1.5, True, False, None, "", " ", "\n{\"run\": 1}\n", "x" * 5000, "\u2028", "\x00",
    "9999-12-31T23:59:59-01:00", "0001-01-01T00:00:00+01:00", "2024-09-03T15:39:30",
    [], {}, [1, 2, 3], {"a": None}, "NaN", "sha256:" + "0" * 64, _deep(300), _deep(253),
    {"kind": "BenchmarkRun"}, "\ud7ff\uffff",
]
HOSTILE_TEXT = ["", " ", "nan", "inf", "-1", "0", "1e400", "18446744073709551616", "abc",
                "9999-12-31 23:59:59-01:00", '{"M": 1e400}', '{"M": 18446744073709551616}',
                "[" * 300 + "]" * 300, '{"a": ' * 300 + "1" + "}" * 300, "x" * 300,
                "\u00e9\u2028", '"', "a,b", "{}", "[]", "null"]


def seed_bundle(prefix: str) -> dict:
    text = next(SEEDS.glob(f"{prefix}_*.txt")).read_text("utf-8")
    return json.loads(text.split("\n", 2)[2])


def _paths(value: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix]
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _paths(v, (*prefix, i))
    return out


def mutate_value(doc: dict, rng: random.Random) -> dict:
    """``doc`` with one value (anywhere but the top) replaced by a hostile one."""
    doc = copy.deepcopy(doc)
    path = rng.choice(_paths(doc)[1:])
    cur = doc
    for step in path[:-1]:
        cur = cur[step]
    cur[path[-1]] = copy.deepcopy(rng.choice(HOSTILE))
    return doc


def mutate_bytes(data: bytes, rng: random.Random) -> bytes:
    """``data`` cut, with a byte replaced, or with bytes inserted (never a newline: one line
    stays one line)."""
    pos = rng.randrange(len(data))
    how = rng.randrange(3)
    if how == 0:
        return data[:pos]
    if how == 1:
        return data[:pos] + bytes([rng.choice([b for b in range(256) if b != 10])]) \
            + data[pos + 1:]
    return data[:pos] + rng.choice([b"\x00", b"\xff\xfe", b"{", b"]", b'"', b"\\u0000",
                                    b"1e999", b" " * 10]) + data[pos:]


@dataclass
class Round:
    folder: Path
    good_runs: dict[str, dict] = field(default_factory=dict)  # run id -> run document
    bad_lines: list[bytes] = field(default_factory=list)
    good_csv_runs: set[str] = field(default_factory=set)


def make_round(folder: Path, rng: random.Random, good: int = 4, bad: int = 12,
               csv_bad: int = 6) -> Round:
    folder.mkdir(parents=True)
    r = Round(folder)
    seeds = [seed_bundle("000"), seed_bundle("001")]
    lines = []
    for i in range(good):
        b = copy.deepcopy(seeds[i % 2])
        b["run"]["metadata"]["name"] += f"-good{i}"
        r.good_runs[b["run"]["metadata"]["name"]] = b["run"]
        lines.append(json.dumps(b).encode())
    for i in range(bad):
        b = copy.deepcopy(seeds[i % 2])
        b["run"]["metadata"]["name"] += f"-bad{i}"
        if rng.random() < 0.7:
            line = json.dumps(mutate_value(b, rng)).encode()
        else:
            line = mutate_bytes(json.dumps(b).encode(), rng)
        r.bad_lines.append(line)
        lines.append(line)
    (folder / "bundles.jsonl").write_bytes(b"\n".join(lines) + b"\n")

    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    out.write(CSV_HEADER + "\n")
    for i in range(good):
        row = list(CSV_ROW0)
        row[7] = str(100 + i)
        writer.writerow(row)
        r.good_csv_runs.add("liger-rms-norm-forward-liger-nvidia-a100-sxm4-80gb-"
                            f"hidden{100 + i}-rows2048-bf16-2024-09-03-15-39-30")
    for i in range(csv_bad):
        row = list(CSV_ROW0)
        row[7] = str(5000 + i)
        row[rng.randrange(len(row))] = rng.choice(HOSTILE_TEXT)
        writer.writerow(row)
    (folder / "liger.csv").write_text(out.getvalue(), encoding="utf-8")

    table = json.loads(next(SEEDS.glob("003_*.txt")).read_text("utf-8"))
    (folder / "trainkernel.json").write_text(json.dumps(mutate_value(table, rng)))
    return r


def check_round(r: Round, wh_path: Path) -> None:
    """Load the round's folder and assert what must hold (see the module docstring)."""
    wh = Warehouse(wh_path)
    report = wh.load([str(r.folder)])  # any exception is a failure of the fuzz run
    docs = dict(wh.sql("select run_id, document from run_documents").fetchall())
    where = f"(round in {r.folder})"
    for run_id, run in r.good_runs.items():
        assert run_id in docs, f"good run {run_id} lost {where}"
        assert json.loads(docs[run_id]) == run, f"good run {run_id} changed {where}"
    missing = r.good_csv_runs - set(docs)
    assert not missing, f"good CSV rows lost: {sorted(missing)} {where}"
    protocols = {k: json.loads(v) for k, v in
                 wh.sql("select protocol_id, document from protocols").fetchall()}
    environments = {k: json.loads(v) for k, v in
                    wh.sql("select environment_id, document from environments").fetchall()}
    ids = dict(wh.sql("select run_id, protocol_id from runs").fetchall())
    envs = dict(wh.sql("select run_id, environment_id from runs").fetchall())
    named: dict[str, int] = {}  # run names among the bad records (mutations may repeat one)
    for line in r.bad_lines:
        try:
            run = json.loads(line).get("run")
            named[run["metadata"]["name"]] = named.get(run["metadata"]["name"], 0) + 1
        except (ValueError, RecursionError, AttributeError, TypeError, KeyError):
            continue
    for line in r.bad_lines:
        try:
            written = json.loads(line)  # as written: exact integers
        except (ValueError, RecursionError):
            continue  # not JSON: cannot be loaded at all (checked by the good runs' count)
        run = written.get("run") if isinstance(written, dict) else None
        name = run.get("metadata", {}).get("name") if isinstance(run, dict) and isinstance(
            run.get("metadata"), dict) else None
        if not isinstance(name, str) or name not in docs or name in r.good_runs:
            continue
        if named.get(name, 0) > 1:
            continue  # two mutations gave two records one name: one is kept, one a conflict
        assert json.loads(docs[name]) == run, f"bad record {name} stored changed {where}"
        for role, table, of in (("protocol", protocols, ids), ("environment", environments,
                                                              envs)):
            doc = written.get(role)
            if isinstance(doc, dict) and of.get(name) in table:
                stored = {k: v for k, v in table[of[name]].items() if k != "metadata"}
                assert stored == {k: v for k, v in doc.items() if k != "metadata"}, \
                    f"{role} of bad record {name} stored changed {where}"
    kept = wh.sql("select source_file, position from rejects where load_id = $l",
                  {"l": report.load_id}).fetchall()
    assert len(kept) <= report.rejected
    assert all(f and p for f, p in kept), f"a reject without file or position {where}"
    assert report.rejected >= 1, f"no mutation was rejected {where}"
    _no_bug(report, where)


def _no_bug(report: Any, where: str) -> None:
    """No reject stands for kidata's own failure (kidata.ingest.readers.base.internal_error:
    the load went on, but a reject naming the field was due)."""
    from kidata.ingest.readers.base import BUG

    bugs = [f"{r.file}, {r.position}: {r.reason}" for r in report.rejects if BUG in r.reason]
    assert not bugs, f"kidata failed on input {where}: {bugs[:3]}"


# -- the field's formats (JSON files of other harnesses, read where they are) ----------------

EXTERNAL = Path(__file__).resolve().parents[2] / "shared" / "data" / "external"
# Hostile values put in place of a value of a harness's JSON file: nesting kidata reads but
# cannot store (300) or Python cannot show with repr() (1,000), numbers out of any range,
# the wrong types, text a name or a time cannot be.
FIELD_HOSTILE: list[Any] = [
    "DEEP1000", "DEEP300", 10**30, -1, 0, None, True, "", "x" * 100_000,
    {"a": {"b": [1, {"c": None}]}}, [], {}, "NaN", 1e308, -1e-320, "\u0000",
    "2024-13-45T99:99:99Z", [1, 2, "x"], 2**64, "../../etc/passwd", "1e999",
    12345678901234567890123, {"kind": "BenchmarkRun"}, 1.5,
]


def _value_paths(value: Any, path: tuple = ()) -> list[tuple]:
    out = [path]
    if isinstance(value, dict):
        for key, item in value.items():
            out += _value_paths(item, path + (key,))
    elif isinstance(value, list):
        for index, item in enumerate(value[:20]):
            out += _value_paths(item, path + (index,))
    return out


# Hostile texts put in a cell of a harness's CSV file (a header cell too).
CSV_HOSTILE: list[str] = [
    "", " ", "nan", "inf", "-inf", "-1", "0", "-0", "1e999", "1e-400", "x" * 100_000, "[[[[",
    "\x00", '"', "12345678901234567890123", "NaN ms", "\uff11\uff12\uff13", "1,5", "None",
    "2024-13-45 99:99:99", "{}", "\u202e", "0x1F",
]


def _mutated_json(doc: Any, rng: random.Random) -> str:
    doc = copy.deepcopy(doc)
    for _ in range(rng.randint(1, 3)):
        paths = [p for p in _value_paths(doc) if p]
        if not paths:
            break
        *parents, last = rng.choice(paths)
        target = doc
        for key in parents:
            target = target[key]
        target[last] = copy.deepcopy(rng.choice(FIELD_HOSTILE))
    return (json.dumps(doc).replace('"DEEP1000"', "[" * 1000 + "]" * 1000)
            .replace('"DEEP300"', "[" * 300 + "]" * 300))


def _mutated_csv(text: str, rng: random.Random) -> str:
    rows = list(csv.reader(io.StringIO(text)))
    for _ in range(rng.randint(1, 3)):
        row = rng.randrange(len(rows))
        if rows[row]:
            rows[row][rng.randrange(len(rows[row]))] = rng.choice(CSV_HOSTILE)
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)
    return out.getvalue()


def _field_samples() -> list[tuple[Path, str, Any]]:
    """The harness files fuzz_field mutates: (path, kind, what is mutated) with kind "json"
    (one document), "js" (github-action-benchmark's data.js: a prefix, then one document),
    "jsonl" (pytorch-v3's json-each-row: its documents) or "csv" (FlashInfer's with the .txt
    of the same name beside it)."""
    out: list[tuple[Path, str, Any]] = []
    for path in sorted(p for p in EXTERNAL.rglob("*") if p.is_file()):
        text = path.read_text("utf-8")
        if path.suffix == ".csv":  # FlashInfer's with its stdout .txt beside it (a sidecar)
            out.append((path, "csv", text))
        elif path.suffix in (".json", ".js"):
            head, brace, rest = text.partition("{") if path.suffix == ".js" else ("", "", text)
            try:
                out.append((path, "js", (head, json.loads(brace + rest))) if head else
                           (path, "json", json.loads(text)))
            except ValueError:  # JSON Lines (pytorch-v3's json-each-row): one line mutated
                out.append((path, "jsonl", [json.loads(line) for line in text.splitlines()
                                            if line.strip()]))
    return out


def fuzz_field(root: Path, seed: int, rounds: int) -> int:
    """Rounds of the field's formats: each loads one harness sample file
    (``../shared/data/external``: google-benchmark, nvbench JSON and CSV, pytorch-v3 JSON and
    JSON Lines, KernelBench, github-action-benchmark's data.js, Triton perf reports, the dynamo
    CSV, FlashInfer's CSV with its stdout) with one to three values (or CSV cells, or values
    of one JSON line) replaced by hostile ones, a GPU supplied by ``--set`` for
    the files that do not name one. What must hold: the load raises nothing, no reject is
    kidata's own failure, and ``check`` is clean. Returns the files loaded."""
    rng = random.Random(seed)
    samples = _field_samples()
    if not samples:
        raise FileNotFoundError(f"no harness sample files in {EXTERNAL} (../shared/data)")
    for i in range(rounds):
        source, kind, original = rng.choice(samples)
        if kind == "csv":
            text = _mutated_csv(original, rng)
        elif kind == "js":
            text = original[0] + _mutated_json(original[1], rng)
        elif kind == "jsonl":
            line = rng.randrange(len(original))
            text = "\n".join(_mutated_json(doc, rng) if n == line else json.dumps(doc)
                              for n, doc in enumerate(original)) + "\n"
        else:
            text = _mutated_json(original, rng)
        folder = root / f"field{i}"
        folder.mkdir(parents=True)
        (folder / source.name).write_text(text, "utf-8", errors="surrogatepass")
        sidecar = source.with_suffix(".txt")
        if kind == "csv" and sidecar.is_file():  # FlashInfer's stdout, read beside its CSV
            shutil.copy(sidecar, folder / sidecar.name)
        wh = Warehouse(root / f"fieldwh{i}")
        # Any exception is a failure of the fuzz run.
        report = wh.load([str(folder)], settings={"gpu": "NVIDIA H100 80GB HBM3"})
        where = f"(mutated {source.name} in {folder})"
        _no_bug(report, where)
        problems = wh.check().problems
        assert not problems, f"check after the load: {problems[:3]} {where}"
    return rounds


def fuzz(root: Path, seed: int, rounds: int) -> int:
    """Run ``rounds`` rounds under ``root`` from ``seed``; returns the records loaded."""
    rng = random.Random(seed)
    total = 0
    for i in range(rounds):
        r = make_round(root / f"round{i}", rng)
        check_round(r, root / f"wh{i}")
        total += len(r.good_runs) + len(r.bad_lines)
    return total
