"""Write the kernelindex fixtures of the analysis-view tests (tests/test_views_*.py).

Each file is JSON Lines: one bundle {"run", "protocol", "workload"} per line. The numbers are
chosen so every expected value in the tests can be worked out by hand; the tests say how.
Run ``python tests/make_view_fixtures.py`` after changing a table below.
"""

from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).parent / "data" / "views"
API = "kernelindex.dev/v1alpha1"
A100 = "NVIDIA A100-SXM4-80GB"
H100 = "NVIDIA H100 80GB HBM3"


def protocol(family: str) -> dict:
    return {"apiVersion": API, "kind": "BenchmarkProtocol", "metadata": {"name": family},
            "spec": {"comparability": {"family": family}}}


def workload(name: str, kernel: str, parameters: dict | None = None) -> dict:
    spec: dict = {"name": name, "kernel": kernel}
    if parameters is not None:
        spec["parameters"] = parameters
    return {"apiVersion": API, "kind": "Workload", "metadata": {"name": name}, "spec": spec}


def bundle(run_id: str, benchmark: str, implementation: str, gpu: str, median_ns: float,
           work: dict, family: str, p20: float | None = None, p80: float | None = None,
           at: str | None = None, version: str | None = None, variant: str | None = None,
           status: str = "passed", resolution_ns: float | None = None,
           published: list | None = None, extra: dict | None = None,
           samples: tuple[str, list] | None = None) -> dict:
    labels = {"implementation": implementation, "gpu_name": gpu}
    if version:
        labels["version"] = version
    if variant:
        labels["variant"] = variant
    timing: dict = {"latencyNs": {"median": median_ns}}
    if resolution_ns is not None:
        timing["resolutionNs"] = resolution_ns
    native: dict = {"source": "views-fixture", "benchmark": benchmark}
    if published:
        native["published"] = published
    if samples:  # (unit as the source writes it, raw samples), as kidata's readers keep them
        native["unit"], native["samples"] = samples
    spec: dict = {"status": status, "timing": timing, "sourceNative": native}
    if at:
        spec["observedAt"] = at
    spec["measurements"] = [{"metric": "latency", "statistic": s, "unit": "ns", "value": v}
                            for s, v in (("p20", p20), ("p80", p80), *(extra or {}).items())
                            if v is not None]
    run = {"apiVersion": API, "kind": "BenchmarkRun",
           "metadata": {"name": run_id, "labels": labels}, "spec": spec}
    return {"run": run, "protocol": protocol(family), "workload": work}


def jsd_sessions(tmp_path: Path, moves: list[tuple[float, float, float]],
                 clock: tuple[int, int] = (10, 0), liger_later: int = 0):
    """jsd forward on the H100 PCIe in two sessions a month apart (releases v1 and v2, as
    Liger labels every provider), one workload w1, w2, ... per ``(torch µs, liger's move,
    torch's move)``, w<i> i minutes after ``clock`` (hour, minute) on the 1st of the month:
    liger at half torch's latency, timed a second before it (``liger_later`` seconds later
    than that); p20/p80 at +-1%. Loaded into a fresh warehouse."""
    from datetime import datetime, timedelta

    from kidata import Warehouse

    rows = []
    for day, version in ((1, "v1"), (2, "v2")):
        for i, (base, liger_move, torch_move) in enumerate(moves, start=1):
            work = workload(f"w{i}", "jsd")
            for impl, us, minute in (("liger", base / 2 * (liger_move if day == 2 else 1),
                                      liger_later),
                                     ("torch", base * (torch_move if day == 2 else 1), 1)):
                ns = us * 1000
                rows.append(bundle(f"{impl}-w{i}-{version}", "jsd/forward", impl,
                                   "NVIDIA H100 PCIe", round(ns, 3), work, "f",
                                   p20=round(ns * 0.99, 3), p80=round(ns * 1.01, 3),
                                   version=version,
                                   at=(datetime(2024, day, 1, *clock)
                                       + timedelta(minutes=i, seconds=minute)
                                       ).strftime("%Y-%m-%dT%H:%M:%SZ")))
    path = tmp_path / "sessions.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    wh = Warehouse(tmp_path / "wh")
    assert wh.load([str(path)]).ok
    return wh



def write(name: str, bundles: list[dict]) -> None:
    with open(HERE / name, "w", encoding="utf-8") as fh:
        for b in bundles:
            fh.write(json.dumps(b, sort_keys=True) + "\n")


def speedups() -> list[dict]:
    f = "views_bench"
    w = {n: workload(n, "rms_norm") for n in ("w1", "w2", "w3", "w4", "w5")}
    rows = [
        # run id, workload, implementation, gpu, median, p20, p80 (ns)
        ("sp-w1-liger", "w1", "liger", A100, 10000, 9000, 11000),
        ("sp-w1-torch", "w1", "torch", A100, 20000, 19000, 21000),
        ("sp-w2-liger", "w2", "liger", A100, 10000, 9000, 12000),
        ("sp-w2-torch", "w2", "torch", A100, 12000, 12000, 13000),
        ("sp-w3-liger", "w3", "liger", A100, 10000, None, None),
        ("sp-w3-torch", "w3", "torch", A100, 15000, 14000, 16000),
        ("sp-w4-liger-a100", "w4", "liger", A100, 10000, 9000, 11000),
        ("sp-w4-torch-h100", "w4", "torch", H100, 5000, 4000, 6000),
        ("sp-w5-liger", "w5", "liger", A100, 10000, 9000, 11000),
        ("sp-w5-torch", "w5", "torch", A100, 10000, 9500, 10500),
        ("sp-w1-triton-h100", "w1", "triton", H100, 8000, 7000, 9000),
    ]
    return [bundle(r, "rms_norm/forward", impl, gpu, med, w[wl], f, p20, p80)
            for r, wl, impl, gpu, med, p20, p80 in rows]


def trends() -> list[dict]:
    f = "views_bench"
    w1, tie, one = (workload(n, "rms_norm") for n in ("w1", "w-tie", "w-one"))
    rows = [
        # run id, workload, gpu, observedAt, version, median, p20, p80 (ns), status
        ("tr-1", w1, A100, "2024-01-01T00:00:00Z", "0.1", 100000, 95000, 105000, "passed"),
        ("tr-2", w1, A100, "2024-02-01T00:00:00Z", "0.2", 112000, 108000, 116000, "passed"),
        ("tr-failed", w1, A100, "2024-02-15T00:00:00Z", "0.2", 500000, 490000, 510000, "failed"),
        ("tr-3", w1, A100, "2024-03-01T00:00:00Z", "0.3", 113000, 110000, 116000, "passed"),
        ("tr-4", w1, A100, "2024-04-01T00:00:00Z", "0.4", 100000, 98000, 102000, "passed"),
        ("tr-5", w1, A100, "2024-05-01T00:00:00Z", "0.5", 104000, 103000, 105000, "passed"),
        ("tr-6", w1, A100, "2024-06-01T00:00:00Z", "0.6", 120000, None, None, "passed"),
        ("tr-7", w1, A100, "2024-07-01T00:00:00Z", "0.7", 130000, 128000, 132000, "passed"),
        ("tr-undated", w1, A100, None, "0.8", 900000, 890000, 910000, "passed"),
        ("tr-h100", w1, H100, "2024-02-15T00:00:00Z", "0.2", 50000, 49000, 51000, "passed"),
        ("tr-tie-b", tie, A100, "2024-01-01T00:00:00Z", "1.1", 60000, 58000, 62000, "passed"),
        ("tr-tie-a", tie, A100, "2024-01-01T00:00:00Z", "1.0", 50000, 49000, 51000, "passed"),
        ("tr-one", one, A100, "2024-01-01T00:00:00Z", "2.0", 70000, 69000, 71000, "passed"),
    ]
    return [bundle(r, "rms_norm/forward", "liger", gpu, med, wl, f, p20, p80, at, ver,
                   status=st)
            for r, wl, gpu, at, ver, med, p20, p80, st in rows]


def calibration() -> list[dict]:
    small, medium, tiny = (workload(n, "train_step") for n in ("small", "medium", "tiny"))
    cal, held = "tables_calibration", "tables_held_out"
    rows = [
        # run id, workload, gpu, variant, median (ns), family
        ("cal-small-selected", small, H100, "selected A", 50000, cal),
        ("cal-small-b", small, H100, "B", 60000, cal),
        ("cal-small-c", small, H100, "C", 60000, cal),
        ("cal-small-d", small, H100, "D", 45000, cal),
        ("cal-small-e", small, H100, "E", 70000, cal),
        ("cal-medium-x", medium, H100, "X", 10000, cal),
        ("cal-medium-y", medium, H100, "Y", 20000, cal),
        ("cal-tiny-only", tiny, H100, "selected A", 5000, cal),
        ("held-small-h100", small, H100, None, 48000, held),
        ("held-small-a100", small, A100, None, 70000, held),
    ]
    return [bundle(r, "train_step/step", "kern", gpu, med, wl, fam, variant=var)
            for r, wl, gpu, var, med, fam in rows]


def audit() -> list[dict]:
    f = "views_published"
    w = workload("pair", "train_step")

    def claim(quantity: str, value: float, baseline: str, resolution: float | None) -> list:
        c = {"quantity": quantity, "value": value, "baselineRun": baseline,
             "definition": f"fixture {quantity}"}
        if resolution is not None:
            c["resolution"] = resolution
        return [c]

    return [
        bundle("au-a-base", "train_step/step", "base", A100, 56780, w, f, resolution_ns=10),
        bundle("au-a", "train_step/step", "cand-a", A100, 12340, w, f, resolution_ns=10,
               published=claim("latency_ratio", 0.217, "au-a-base", 0.001)),
        bundle("au-b-base", "train_step/step", "base", H100, 30000, w, f, resolution_ns=10),
        bundle("au-b", "train_step/step", "cand-b", H100, 20000, w, f, resolution_ns=10,
               published=claim("speedup", 1.52, "au-b-base", 0.01)),
        bundle("au-c", "train_step/step", "cand-c", A100, 20000, w, f, resolution_ns=10,
               published=claim("latency_ratio", 0.5, "au-c-never-loaded", 0.001)),
        bundle("au-d", "train_step/step", "cand-d", A100, 20000, w, f,
               published=claim("throughput", 3.0, "au-a-base", None)),
        bundle("au-e-base", "train_step/step", "base", B200, 40000, w, f),
        bundle("au-e", "train_step/step", "cand-e", B200, 10000, w, f,
               published=claim("latency_ratio", 0.25, "au-e-base", None)),
    ]


B200 = "NVIDIA B200"


def efficiency() -> list[dict]:
    f = "views_bench"
    rows = [
        # run id, benchmark, gpu, workload (name, parameters), median, p20, p80 (ns)
        ("ef-rms", "rms_norm/forward", A100,
         ("rms-M2048-H4096", {"M": 2048, "H": 4096, "dtype": "torch.bfloat16", "eps": 1e-06}),
         31072, 30048, 31968),
        ("ef-ln-bwd", "layer_norm/backward", H100,
         ("ln-M4-N8", {"M": 4, "N": 8, "dtype": "torch.float32", "eps": 1e-06}),
         480, None, None),
        ("ef-mswiglu", "megatron_swiglu/forward", H100,
         ("msw-S2-B3-F5", {"S": 2, "B": 3, "ffn_local": 5}), 90, 80, 100),
        ("ef-unknown-gpu", "softmax/forward", "Example GPU 9000",
         ("sm-M2-N4", {"M": 2, "N": 4, "dtype": "torch.float32"}), 64, 50, 80),
        ("ef-above-peak", "relu_squared/forward", A100,
         ("relu-M1000-N1000", {"M": 1000, "N": 1000, "dtype": "torch.bfloat16"}), 1000, 900, 1100),
        ("ef-no-model", "cross_entropy/forward", A100,
         ("ce-B8-T2048-V4096", {"B": 8, "T": 2048, "V": 4096, "sizes": [8, 2048]}),
         1000, 900, 1100),
        ("ef-swiglu", "swiglu/forward", A100,
         ("swiglu-T1024", {"B": 4, "T": 1024, "hidden_size": 4096, "intermediate_size": 11008,
                           "dtype": "torch.bfloat16", "bias": False}), 1000, 900, 1100),
        ("ef-missing-param", "rms_norm/forward", A100,
         ("rms-no-H", {"M": 2048, "hidden": 4096, "dtype": "torch.bfloat16"}), 1000, 900, 1100),
        ("ef-text-param", "rms_norm/forward", A100,
         ("rms-H-text", {"M": 2048, "H": "4096", "dtype": "torch.bfloat16"}), 1000, 900, 1100),
        ("ef-unknown-dtype", "rms_norm/forward", A100,
         ("rms-int3", {"M": 2048, "H": 4096, "dtype": "torch.int3"}), 1000, 900, 1100),
        ("ef-no-params", "rms_norm/forward", A100, ("rms-bare", None), 1000, 900, 1100),
    ]
    return [bundle(r, bench, bench.split("/")[0], gpu, med,
                   workload(wname, bench.split("/")[0], params), f, p20, p80)
            for r, bench, gpu, (wname, params), med, p20, p80 in rows]


def single() -> list[dict]:
    w = workload("rms-M2048-H4096", "rms_norm",
                 {"M": 2048, "H": 4096, "dtype": "torch.bfloat16", "eps": 1e-06})
    return [bundle("single-rms", "rms_norm/forward", "liger", A100, 31072, w, "views_bench",
                   30048, 31968, "2024-09-03T15:39:30Z", "0.2.1", variant="selected default")]


def statistics() -> list[dict]:
    """Evidence, fair summaries, roles, run-to-run noise and harness shifts
    (tests/query/test_views_statistics.py says what each row is for)."""
    out = []
    # Evidence per side, softmax forward on the A100, family views_stats (ns).
    f = "views_stats"
    w = {n: workload(n, "softmax") for n in ("zero", "res", "single", "quart", "quart2")}
    rows = [
        # run id, workload, implementation, median, p20, p80, resolution, extra statistics
        ("ev-zero-liger", "zero", "liger", 10000, 10000, 10000, None, None),
        ("ev-zero-torch", "zero", "torch", 20000, 19000, 21000, None, None),
        ("ev-res-liger", "res", "liger", 10000, 9990, 10005, 1024, None),
        ("ev-res-torch", "res", "torch", 20000, 19000, 21000, 1024, None),
        ("ev-single-liger", "single", "liger", 10000, 9000, 11000, None, None),
        ("ev-single-torch", "single", "torch", 20000, 19000, 21000, None, None),
        ("ev-quart-liger", "quart", "liger", 10000, None, None, None, {"p25": 9500, "p75": 10500}),
        ("ev-quart-torch", "quart", "torch", 20000, 19000, 21000, None, None),
        ("ev-quart2-liger", "quart2", "liger", 10000, None, None, None,
         {"p25": 9500, "p75": 10500}),
        ("ev-quart2-torch", "quart2", "torch", 20000, None, None, None,
         {"p25": 19000, "p75": 21000}),
    ]
    out += [bundle(r, "softmax/forward", impl, A100, med, w[wl], f, p20, p80,
                   resolution_ns=res, extra=extra)
            for r, wl, impl, med, p20, p80, res, extra in rows]
    # Kernel-weighted summary on the H100, family views_sum: rms_norm sweeps 3 workloads at
    # speedup 8 (torch is its reference), geglu and swiglu one each at 2 and 0.5 (huggingface is
    # theirs); geglu full is another pass.
    f = "views_sum"
    rows = [
        # run id, benchmark, workload, implementation, median, p20, p80 (ns)
        ("su-rms-a-liger", "rms_norm/forward", "a", "liger", 1000, 900, 1100),
        ("su-rms-a-torch", "rms_norm/forward", "a", "torch", 8000, 7000, 9000),
        ("su-rms-b-liger", "rms_norm/forward", "b", "liger", 1000, 900, 1100),
        ("su-rms-b-torch", "rms_norm/forward", "b", "torch", 8000, 7000, 9000),
        ("su-rms-c-liger", "rms_norm/forward", "c", "liger", 1000, 900, 1100),
        ("su-rms-c-torch", "rms_norm/forward", "c", "torch", 8000, 7000, 9000),
        ("su-geglu-liger", "geglu/forward", "a", "liger", 1000, 900, 1100),
        ("su-geglu-hf", "geglu/forward", "a", "huggingface", 2000, 1900, 2100),
        ("su-swiglu-liger", "swiglu/forward", "a", "liger", 2000, 1900, 2100),
        ("su-swiglu-hf", "swiglu/forward", "a", "huggingface", 1000, 900, 1100),
        ("su-geglu-full-liger", "geglu/full", "a", "liger", 1000, 900, 1100),
        ("su-geglu-full-hf", "geglu/full", "a", "huggingface", 3000, 2900, 3100),
    ]
    out += [bundle(r, bench, impl, H100, med, workload(wl, bench.split("/")[0]), f, p20, p80)
            for r, bench, wl, impl, med, p20, p80 in rows]
    # Run-to-run noise and harness shifts, kl_div forward on the A100, family views_noise.
    # liger n1: a re-run of v1 (+3%), then v2 (+6.8%, nothing measured with it), then a re-run
    # of v2; n2: liger and torch both move at t2 (a harness shift). kto: one re-run of one
    # release, +5.6% with p20-p80 ranges apart.
    f = "views_noise"
    t = ["2024-01-01T00:00:00Z", "2024-02-01T00:00:00Z", "2024-03-01T00:00:00Z",
         "2024-04-01T00:00:00Z"]
    t30 = [x.replace(":00Z", ":30Z") for x in t]  # the next provider, 30 s later
    rows = [
        # run id, kernel, workload, implementation, at, version, median, p20, p80 (ns)
        ("no-n1-1", "kl_div", "n1", "liger", t[0], "1", 100000, 98000, 102000),
        ("no-n1-2", "kl_div", "n1", "liger", t[1], "1", 103000, 101000, 105000),
        ("no-n1-3", "kl_div", "n1", "liger", t[2], "2", 110000, 108000, 112000),
        ("no-n1-4", "kl_div", "n1", "liger", t[3], "2", 113000, 111000, 115000),
        ("no-n1-torch-1", "kl_div", "n1", "torch", t30[0], "1", 50000, 49000, 51000),
        ("no-n1-torch-2", "kl_div", "n1", "torch", t30[1], "1", 50500, 49500, 51500),
        ("no-n2-1", "kl_div", "n2", "liger", t[0], "1", 200000, 198000, 202000),
        ("no-n2-2", "kl_div", "n2", "liger", t[1], "2", 230000, 228000, 232000),
        ("no-n2-torch-1", "kl_div", "n2", "torch", t30[0], "1", 400000, 390000, 410000),
        ("no-n2-torch-2", "kl_div", "n2", "torch", t30[1], "2", 440000, 430000, 450000),
        ("no-kto-1", "kto_loss", "k1", "liger", t[0], "0.5.3", 100000, 99000, 101000),
        ("no-kto-2", "kto_loss", "k1", "liger", t[1], "0.5.3", 105600, 104600, 106600),
    ]
    out += [bundle(r, f"{k}/forward", impl, A100, med, workload(wl, k), f, p20, p80, at, ver)
            for r, k, wl, impl, at, ver, med, p20, p80 in rows]
    # Memory series (MB), geglu forward on the A100, family views_noise: liger uses 10% more at
    # t2 while huggingface, measured 30 s later, stays; at t3 both grow 20% (a shared shift).
    rows = [
        # run id, implementation, at, version, median = p20 = p80 (MB)
        ("mem-liger-1", "liger", t[0], "1", 1000.0),
        ("mem-liger-2", "liger", t[1], "2", 1100.0),
        ("mem-liger-3", "liger", t[2], "3", 1320.0),
        ("mem-hf-1", "huggingface", t30[0], "1", 2000.0),
        ("mem-hf-2", "huggingface", t30[1], "2", 2000.0),
        ("mem-hf-3", "huggingface", t30[2], "3", 2400.0),
    ]
    mw = workload("m1", "geglu")
    for r, impl, at, ver, mb in rows:
        b = bundle(r, "geglu/forward", impl, A100, mb, mw, f, at=at, version=ver)
        spec = b["run"]["spec"]
        del spec["timing"]
        spec["measurements"] = [{"metric": "memory", "statistic": s, "unit": "MB", "value": mb}
                                for s in ("p20", "median", "p80")]
        out.append(b)
    return out


def centers() -> list[dict]:
    """Runs whose source gives only a mean (KernelBench-like: mean and stddev, the mean named
    the primary statistic), beside runs with a median (tests/query/test_views_centers.py says
    what each row is for). Softmax forward on the H100, family views_centers (ns)."""
    f = "views_centers"
    # Two weeks apart: within the 30 days that make a key stale (speedups.stale), so mm and
    # mix, measured only at the first time, stay in the summaries.
    t = ["2024-01-01T00:00:00Z", "2024-01-15T00:00:00Z"]
    rows = [
        # run id, workload, implementation, at, version, median, mean, stddev
        ("ce-mm-eager", "mm", "eager", t[0], "1", None, 2000, 100),
        ("ce-mm-inductor", "mm", "inductor", t[0], "1", None, 1000, 50),
        ("ce-mix-eager", "mix", "eager", t[0], "1", None, 2000, 100),
        ("ce-mix-triton", "mix", "triton", t[0], "1", 1000, 1100, 50),
        ("ce-tr-eager-1", "tr", "eager", t[0], "1", None, 1000, 10),
        ("ce-tr-eager-2", "tr", "eager", t[1], "2", None, 1200, 10),
        ("ce-tm-triton-1", "tm", "triton", t[0], "1", None, 1000, 10),
        ("ce-tm-triton-2", "tm", "triton", t[1], "2", 1200, 1210, 10),
    ]
    out = []
    for r, wl, impl, at, ver, median, mean, stddev in rows:
        b = bundle(r, "softmax/forward", impl, H100, median or mean, workload(wl, "softmax"), f,
                   at=at, version=ver, extra={"mean": mean, "stddev": stddev})
        if median is None:  # as the KernelBench reader writes it: run and protocol say so
            b["run"]["spec"]["timing"] = {"primaryStatistic": "mean"}
            b["protocol"]["spec"]["measurement"] = {"primaryStatistic": "mean"}
        out.append(b)
    return out


def sweeps() -> list[dict]:
    """One sweep of rms_norm forward over H on the A100 (M 2048, bf16), for efficiency's
    flat-latency rule (tests/query/test_views_statistics.py works the numbers)."""
    rows = [
        # run id, implementation, version, H, median (ns)
        ("sw-liger-4096", "liger", "1", 4096, 100_000),
        ("sw-liger-8192", "liger", "1", 8192, 110_000),
        ("sw-liger-16384", "liger", "1", 16384, 200_000),
        ("sw-liger-32768", "liger", "1", 32768, 400_000),
        ("sw-torch-4096", "torch", "1", 4096, 50_000),
        ("sw-torch-8192", "torch", "2", 8192, 52_000),
    ]
    return [bundle(r, "rms_norm/forward", impl, A100, med,
                   workload(f"sweep-H{h}", "rms_norm",
                            {"M": 2048, "H": h, "dtype": "torch.bfloat16"}),
                   "views_sweep", at="2024-01-01T00:00:00Z", version=ver)
            for r, impl, ver, h, med in rows]


# The same-version re-run changes of verdicts(): each workload rr0..rr10 of kernel rr (impl x)
# measured twice in release v1, 50 µs then 50 µs x (1 + change). Eleven changes, so the
# envelope (95th percentile of |LN(1 + change)|) is calibrated (10 or more).
RERUN_CHANGES = (0.01, -0.02, 0.03, -0.01, 0.02, 0.04, -0.03, 0.01, 0.05, -0.02, 0.06)


def verdicts() -> list[dict]:
    """The verdict rule's bases (tests/query/test_views_verdicts.py works every number).
    A100, family views_verdicts, source views-fixture; latencies in ns.

    (welch: tests/data/views/kernelbench/, KernelBench's own format, which gives samples)
    run-to-run  rr forward rr0..rr10: x re-run in v1 (RERUN_CHANGES); then rr forward cmp:
             x 50000 vs y 60000, and cmp2: x 50000 vs y 51000, no spread (single timings)
    median-stddev  attn forward fi: a median 1000 (stddev 20) vs b median 1300 (stddev 30)
    """
    f, out = "views_verdicts", []
    t0, t1, t2 = "2024-03-01T00:00:00Z", "2024-03-02T00:00:00Z", "2024-03-03T00:00:00Z"
    for i, change in enumerate(RERUN_CHANGES):
        work = workload(f"rr{i}", "rr")
        out.append(bundle(f"vd-rr{i}-1", "rr/forward", "x", A100, 50_000, work, f, at=t0,
                          version="v1"))
        out.append(bundle(f"vd-rr{i}-2", "rr/forward", "x", A100,
                          round(50_000 * (1 + change), 3), work, f, at=t1, version="v1"))
    for wl, y in (("cmp", 60_000), ("cmp2", 51_000)):
        work = workload(wl, "rr")
        out.append(bundle(f"vd-{wl}-x", "rr/forward", "x", A100, 50_000, work, f, at=t2,
                          version="v1"))
        out.append(bundle(f"vd-{wl}-y", "rr/forward", "y", A100, y, work, f, at=t2,
                          version="v1"))
    for r, impl, median, sd in (("vd-fi-a", "a", 1000, 20), ("vd-fi-b", "b", 1300, 30)):
        out.append(bundle(r, "attn/forward", impl, A100, median, workload("fi", "attn"), f,
                          at=t0, version="1", extra={"stddev": sd}))
    return out


def samples() -> list[dict]:
    """Raw samples (tests/query/test_views_samples.py works every number out by hand). Kernels
    the seeds do not have, so the Spark tests load this file beside them."""
    f = "views_samples"
    w = {n: workload(n, k) for n, k in (("w1", "geglu"), ("w2", "geglu"), ("w3", "geglu"),
                                         ("s1", "softmax"), ("m1", "matmul"),
                                         ("n1", "layer_norm"))}
    at = "2025-01-02T00:00:00Z"

    def rate(run_id: str, implementation: str, median: float, values: list) -> dict:
        b = bundle(run_id, "matmul/forward", implementation, A100, 1000, w["m1"], f, at=at,
                   samples=("tflops", values))
        b["run"]["spec"]["measurements"].append(
            {"metric": "throughput", "statistic": "median", "unit": "TFLOP/s", "value": median})
        return b

    return [
        # w1: 9 samples a side (k = 1: the interval is min..max); liger's in µs, torch's in ms.
        bundle("sa-w1-liger", "geglu/forward", "liger", A100, 10000, w["w1"], f,
               p20=9700, p80=10200, at=at,
               samples=("us", [9.6, 10.0, 9.8, 10.2, 9.9, 10.1, 9.7, 10.3, 10.0])),
        bundle("sa-w1-torch", "geglu/forward", "torch", A100, 12100, w["w1"], f,
               p20=11900, p80=12400, at=at,
               samples=("ms", [0.012, 0.0124, 0.0118, 0.0122, 0.0121, 0.0119, 0.0123, 0.012,
                               0.0125])),
        # w2: 7 samples a side, one outlier each: tight p20-p80 ranges that do not overlap,
        # sample intervals that do.
        bundle("sa-w2-liger", "geglu/forward", "liger", A100, 10000, w["w2"], f,
               p20=9950, p80=10050, at=at,
               samples=("us", [10.0, 10.1, 9.9, 10.0, 13.0, 10.05, 9.95])),
        bundle("sa-w2-torch", "geglu/forward", "torch", A100, 11500, w["w2"], f,
               p20=11450, p80=11550, at=at,
               samples=("us", [11.5, 11.6, 11.4, 11.5, 11.55, 11.45, 9.5])),
        # w3: torch kept 5 samples: no interval (fewer than 7), so the p20-p80 ranges decide.
        bundle("sa-w3-liger", "geglu/forward", "liger", A100, 10000, w["w3"], f,
               p20=9900, p80=10100, at=at,
               samples=("us", [10.0, 10.1, 9.9, 10.0, 10.2, 9.8, 10.0])),
        bundle("sa-w3-torch", "geglu/forward", "torch", A100, 15000, w["w3"], f,
               p20=14900, p80=15100, at=at, samples=("us", [15.0, 15.1, 14.9, 15.0, 15.0])),
        # s1: a series of two results, w1's samples again, one day and one version apart.
        bundle("sa-s1-1", "softmax/forward", "liger", A100, 10000, w["s1"], f, p20=9700,
               p80=10200, at="2025-01-01T00:00:00Z", version="1",
               samples=("us", [9.6, 10.0, 9.8, 10.2, 9.9, 10.1, 9.7, 10.3, 10.0])),
        bundle("sa-s1-2", "softmax/forward", "liger", A100, 12100, w["s1"], f, p20=11900,
               p80=12400, at="2025-01-02T00:00:00Z", version="2",
               samples=("us", [12.0, 12.4, 11.8, 12.2, 12.1, 11.9, 12.3, 12.0, 12.5])),
        # m1: a rate (TFLOP/s, higher is better) with 9 samples a side.
        rate("sa-m1-a", "a", 100, [100, 101, 99, 102, 98, 100, 103, 97, 100]),
        rate("sa-m1-b", "b", 120, [120, 121, 119, 122, 118, 120, 123, 117, 120]),
        # n1: 20 samples, 1..20 µs: k = 5.
        bundle("sa-n1", "layer_norm/forward", "liger", A100, 10500, w["n1"], f, at=at,
               samples=("us", list(range(1, 21)))),
    ]


if __name__ == "__main__":
    write("samples.jsonl", samples())
    write("verdicts.jsonl", verdicts())
    write("sweeps.jsonl", sweeps())
    write("centers.jsonl", centers())
    write("statistics.jsonl", statistics())
    write("speedups.jsonl", speedups())
    write("trends.jsonl", trends())
    write("calibration.jsonl", calibration())
    write("audit.jsonl", audit())
    write("efficiency.jsonl", efficiency())
    write("single.jsonl", single())
