"""Pools the steady on/off ratios that overhead.py --save wrote in several
runs (of one build and one job), and prints each configuration's step
rate and truth fields on/off over all their windows, with 95% bootstrap
intervals of the median, next to the pooled noise floor; then the step
rate on/off at equal compute time and at equal witness speed
(ovhstats.py), each fitted over all the runs' windows at once.

  python3 testdata/gpuhost/overhead_pool.py RUN.json...
"""
import json, statistics, sys

from ovhstats import COVARIATES, adjusted_line, ci, floor_pairs, pairs, pct


def line(what, xs):
    lo, hi = ci(xs, n=4000)
    return f"{what} {pct(statistics.median(xs))} (95% CI {pct(lo)}..{pct(hi)}, mean {pct(statistics.mean(xs))}, n={len(xs)})"


runs = [json.load(open(p)) for p in sys.argv[1:]]
if not runs:
    sys.exit("usage: overhead_pool.py RUN.json... (written by overhead.py --save)")
names = sorted({n for r in runs for n in r["configs"]})
for name in names:
    rate = [x for r in runs for x in r["configs"].get(name, {}).get("rate", [])]
    if len(rate) < 2:
        continue
    label = "noise floor (off vs off)" if name == "@floor" else name
    print(f"{label}: step rate on/off {line('', rate).strip()} over {len(runs)} runs")
    fields = {}
    for r in runs:
        for f, xs in r["configs"].get(name, {}).get("fields", {}).items():
            fields.setdefault(f, []).extend(xs)
    for f, xs in fields.items():
        if len(xs) >= 2:
            print(f"  {line(f, xs)}")
# Runs saved before the fit have no steady_periods: they are left out of it.
fitted = [r for r in runs if r.get("steady_periods")]
for col in COVARIATES:
    for name in names:
        if name == "@floor":
            ps, label = [p for r in fitted for p in floor_pairs(r["steady_periods"], col)], "noise floor (off vs off)"
        else:
            ps, label = [p for r in fitted for p in pairs(r["steady_periods"], name, col)], name
        out = adjusted_line(f"{label} over {len(fitted)} runs", ps, col)
        if out:
            print(out)
