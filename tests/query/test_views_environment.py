"""Environment facts (issue 26, item 3): the software versions an environment records
(environment_facts), settable with ``--set torch=... cuda=... driver=... triton=...`` for the
field's formats, and a step over a changed fact named by it (series_steps.changed_facts) and
attributed to the environment when the code's version did not change.

Every expected value is worked out here from the inputs written below, not read back from
kidata.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from conftest import console

from kidata import Warehouse
from kidata.core.digest import digest

MAPPING = Path(__file__).parents[1] / "data" / "field" / "team_mapping.toml"
SEED0 = Path(__file__).parents[1] / "data" / "seeds" / "000_ef9e0295e36a82ef.txt"
HEADER = "op,impl,tokens,hidden,precision,device,when,p50_us,p20_us,p80_us,n\n"

# One series (rmsnorm, ours, 4096 x 8192, H100 SXM), one result per file, a week apart; p20
# and p80 are the median -/+ 1%, so each step is judged on within-run p20-p80 ranges:
#   1 -> 2: 10.0 -> 12.0 us (+20%), torch 2.4.0 -> 2.5.1, no versions: 'environment'
#   2 -> 3: 12.0 -> 14.4 us (+20%), nothing changed: 'alone', a regression
#   3 -> 4: 14.4 -> 17.28 us (+20%), cuda 12.4 -> 12.6 and version 1 -> 2: the code changed
#           too, so 'alone' (a regression), with the changed fact still named
RESULTS = [
    ("2025-01-31 12:00:00", 10.0, {"torch": "2.4.0", "cuda": "12.4"}),
    ("2025-02-07 12:00:00", 12.0, {"torch": "2.5.1", "cuda": "12.4"}),
    ("2025-02-14 12:00:00", 14.4, {"torch": "2.5.1", "cuda": "12.4", "version": "1"}),
    ("2025-02-21 12:00:00", 17.28, {"torch": "2.5.1", "cuda": "12.6", "version": "2"}),
]


def _csv(path: Path, when: str, p50: float) -> Path:
    path.write_text(HEADER + f"rmsnorm,ours,4096,8192,bf16,NVIDIA H100 80GB HBM3,{when},"
                    f"{p50},{p50 * 0.99:.4f},{p50 * 1.01:.4f},200\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def wh(tmp_path_factory) -> Warehouse:
    folder = tmp_path_factory.mktemp("facts")
    w = Warehouse(folder / "wh")
    for i, (when, p50, settings) in enumerate(RESULTS[:3]):
        report = w.load(_csv(folder / f"r{i}.csv", when, p50), mapping=MAPPING,
                        settings=settings)
        assert report.added["runs"] == 1, report
    # The last through the CLI, as a user types it.
    last = _csv(folder / "r3.csv", RESULTS[3][0], RESULTS[3][1])
    sets = [a for k, v in RESULTS[3][2].items() for a in ("--set", f"{k}={v}")]
    done = console("-w", w.path, "load", last, "--mapping", MAPPING, *sets)
    assert done.returncode == 0, done.stderr
    assert "1 runs added" in done.stdout, done.stdout
    return w


def test_the_facts_set_are_the_environments_fields(wh):
    rows = wh.sql("select torch, cuda, driver, triton from environment_facts "
                  "order by torch, cuda").fetchall()
    assert rows == [("2.4.0", "12.4", None, None), ("2.5.1", "12.4", None, None),
                    ("2.5.1", "12.6", None, None)]
    # They are the environment documents' spec.software, so the environments differ.
    software = {json.loads(doc)["spec"]["software"]["torch"] for (doc,) in
                wh.sql("select document from environments").fetchall()}
    assert software == {"2.4.0", "2.5.1"}


def test_a_changed_fact_is_named_and_blamed_when_the_code_did_not_change(wh):
    steps = wh.sql("select step, change, verdict, changed_facts, attribution from trends "
                   "order by step").fetchall()
    assert [s[0] for s in steps] == [1, 2, 3, 4]
    assert steps[0][1:] == (None, None, None, None)
    # Each step is +20% (12/10, 14.4/12, 17.28/14.4), ranges +-1% apart: 'slower'.
    for step in steps[1:]:
        assert step[1] == pytest.approx(0.2) and step[2] == "slower"
    assert steps[1][3:] == ("torch 2.4.0 -> 2.5.1", "environment")
    assert steps[2][3:] == (None, "alone")
    assert steps[3][3:] == ("cuda 12.4 -> 12.6", "alone")


def test_regressions_leave_the_environment_steps_to_shifts(wh):
    listed = wh.sql("select previous_center_us, center_us from regressions "
                    "order by observed_at").fetchall()
    assert listed == [(pytest.approx(12.0), pytest.approx(14.4)),
                      (pytest.approx(14.4), pytest.approx(17.28))]
    shifted = wh.sql("select t.previous_center_us, s.cause, s.changed_facts from shifts s "
                     "join trends t using (run_id)").fetchall()
    assert shifted == [(pytest.approx(10.0), "environment", "torch 2.4.0 -> 2.5.1")]
    # kidata regressions (the library's rule) agrees with the view.
    assert len(wh.regressions()) == 2


def test_documents_facts_are_read_whatever_their_spelling(tmp_path):
    """kernelindex environments carry their own spec.software: 'pytorch' is read as torch, a
    number as its text, a nested value as nothing."""
    base = json.loads(SEED0.read_text("utf-8").split("\n", 2)[2])
    lines = []
    for i, software in enumerate(({"pytorch": "2.3.1", "cuda": 12.1, "triton": {"v": "3"}},
                                  {"torch": "2.5.0+cu124", "driver": "550.54.15",
                                   "pytorch_triton": "3.1.0"})):
        b = copy.deepcopy(base)
        b["environment"]["spec"]["software"] = software
        b["run"]["spec"]["environmentDigest"] = digest(b["environment"])
        b["run"]["metadata"]["name"] += f"-sw{i}"
        lines.append(json.dumps(b))
    (tmp_path / "runs.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    w = Warehouse(tmp_path / "wh")
    assert w.load(tmp_path / "runs.jsonl").added["runs"] == 2
    assert w.sql("select torch, cuda, driver, triton from environment_facts "
                 "order by torch").fetchall() == [("2.3.1", "12.1", None, None),
                                                  ("2.5.0+cu124", None, "550.54.15", None)]


def test_set_on_a_format_that_names_its_own_context_is_said_to_be_unused(tmp_path):
    liger = Path(__file__).parents[1] / "data" / "liger" / "edge_cases.csv"
    w = Warehouse(tmp_path / "wh")
    report = w.load(liger, settings={"torch": "2.4.0"})
    assert any("--set torch not used: liger-csv files carry their own context" in m
               for m in report.warnings), report.warnings
    assert w.sql("select count(*) from environment_facts where torch is not null"
                 ).fetchall() == [(0,)]
