"""Units as sources write them, and the exact conversion of a source's number to the unit the
``spec.measurements`` of a built run hold it in.

One home for both users: :mod:`kidata.ingest.readers.builder` converts a source's statistics
with it when it builds a run, and :mod:`kidata.ingest.flatten` converts the raw samples the
builder keeps in ``sourceNative.samples`` (in the source's unit, ``sourceNative.unit``) with the
same rule, so that a run's samples and its statistics agree to the last digit kept.
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation

# Metric names and units as the warehouse stores them (kidata/ingest/validate.py UNITS), with the
# spellings sources use. Latency is converted exactly to ns here (Decimal), the rest as given.
LATENCY_NS = {"ns": Decimal(1), "us": Decimal(10) ** 3, "µs": Decimal(10) ** 3,
              "ms": Decimal(10) ** 6, "s": Decimal(10) ** 9, "sec": Decimal(10) ** 9,
              "ns/iter": Decimal(1), "us/iter": Decimal(10) ** 3, "ms/iter": Decimal(10) ** 6}
UNIT_SPELLINGS = {
    # unit as written -> (metric, unit as stored in measurements)
    **{u: ("latency", "ns") for u in LATENCY_NS},
    "tflops": ("throughput", "TFLOP/s"), "tflop/s": ("throughput", "TFLOP/s"),
    "gflops": ("throughput", "GFLOP/s"), "gflop/s": ("throughput", "GFLOP/s"),
    "gb/s": ("bandwidth", "GB/s"), "tb/s": ("bandwidth", "TB/s"),
    "bytes/s": ("bandwidth", "B/s"), "b/s": ("bandwidth", "B/s"),
    "mb": ("memory", "MB"), "mib": ("memory", "MiB"), "gb": ("memory", "GB"),
    "count": ("instructions", "count"),
    "x": ("speedup", "x"),
}


def unit_of(text: str) -> tuple[str, str] | None:
    """``(metric, stored unit)`` of a unit as a source writes it, or None when unknown."""
    return UNIT_SPELLINGS.get(text.strip().lower().replace("µs", "us") if text.strip() != "µs"
                              else "µs")


def latency_factor(text: str) -> Decimal:
    """The exact factor from a latency unit as a source writes it to ns (``text`` is one
    :func:`unit_of` reads as latency)."""
    return LATENCY_NS[text.strip().lower() if text.strip() != "µs" else "µs"]


def plain(number: Decimal) -> int | float:
    """An exact Decimal as JSON: an int when whole, else a float rounded to 6 decimals."""
    if number == number.to_integral_value() and abs(number) < 2 ** 53:
        return int(number)  # exact as a float too, and within JSON's 64-bit integers
    return round(float(number), 6)


def converter(text: str):
    """A function giving a source's positive finite number in ``text`` (a unit :func:`unit_of`
    knows) as a built run's measurements hold it: latency converted exactly to ns, other
    metrics as given, then :func:`plain`; None for anything else (not a number, a bool, not
    finite, not positive). The factor is looked up once: a run's samples share one."""
    metric_unit = unit_of(text)
    factor = latency_factor(text) if metric_unit is not None and metric_unit[0] == "latency" \
        else Decimal(1)
    whole = int(factor) if factor == factor.to_integral_value() else None

    def convert(value: int | float) -> int | float | None:
        if type(value) is int and whole is not None and 0 < value < 10 ** 30:
            number = value * whole  # exact in integers: plain() of it is itself
            return number if number < 2 ** 53 else plain(Decimal(number))
        if isinstance(value, bool) or not isinstance(value, int | float):
            return None
        try:
            number = Decimal(repr(value)) if isinstance(value, float) else Decimal(value)
        except (InvalidOperation, ValueError):
            return None
        if not number.is_finite() or number <= 0 or not -30 <= number.adjusted() <= 30:
            return None
        return plain(number * factor)

    return convert
