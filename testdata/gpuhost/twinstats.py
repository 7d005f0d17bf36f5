"""twin.py's statistics, for one run or several pooled (issue 29).

  python3 testdata/gpuhost/twinstats.py RUN [RUN...]    # each twin.tgz, or its twin/ directory

Every "on" window's cost is its quotient over a baseline, less one:
negative, the attached copy was slower. The baseline is the mean of the
same quotient over all the run's off windows ("run's off windows"), or
over the two either side of the window ("adjacent"). The twin quotient's
noise is short: per second its autocorrelation is ~0.4 at 1 s and ~0 from
5-10 s on (each run's line says), and its slow drift is what the twin
cancels; so the run's ~20 off windows estimate the copies' ratio with
little noise of their own where the two adjacent 4 s ones add theirs
(a window's sd 4.6% against 6.3% on 2026-12-03's 46 windows). The
solo rate drifts (its autocorrelation at 10 s up to 0.2) and keeps the
adjacent baseline. The quotients:
- twin: the attached copy's step rate over its twin's, both over the
  window's span (its start to gpuprof's exit): the host's noise, which
  reaches both copies at once, cancels;
- solo: the attached copy's step rate alone, as overhead.py measures it,
  for comparison: what the twin buys;
- steady: the twin quotient from 3 s in to the SIGINT;
- by second: the twin quotient over each second since the attach;
- "at most": the slowdown's 95% one-sided bound (a cost "within 1%" is
  bounded on one side), windows resampled as in the table, and runs
  resampled then their windows (a run's windows share its baseline);
- a counter's (perfcount.py): steps over the count, the copy's own.
Each config's costs pooled over the runs: mean with a 95% bootstrap
interval, median, each copy as the target apart. A config "@idle" (nothing
attached) gives the statistic's own spread.
"""
import bisect, json, os, random, statistics, sys, tarfile, tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import benchlib  # noqa: E402
from ovhstats import bootstrap, ci  # noqa: E402

S = int(1e9)
TWIN = {"A": "B", "B": "A"}


def load(path):
    """A run: results.json and both copies' step ends (ns), from a
    twin.tgz (unpacked to a directory removed after) or its twin/ directory."""
    if path.endswith((".tgz", ".tar.gz")):
        with tempfile.TemporaryDirectory(prefix="twinstats") as d, tarfile.open(path) as t:
            t.extractall(d, filter="data")
            run = read_run(os.path.join(d, "twin"))
    else:
        run = read_run(path)
    run["path"] = path
    return run


def read_run(d):
    with open(os.path.join(d, "results.json")) as f:
        run = json.load(f)
    # The day's first two runs' results.json did not name these.
    run.setdefault("counted", list(run["windows"][0].get("c0", {}).get("A", {})))
    run.setdefault("pmu", "instructions" in run["counted"])
    run.setdefault("job", "launchbound.py")
    run.setdefault("cpus", ["?", "?"])
    run["ends"] = {k: [s["t_end_ns"] for s in benchlib.read_jsonl(os.path.join(d, k, "truth.jsonl"))] for k in "AB"}
    return run


def rate(run, name, a, b):
    """Steps a second of copy name ending in [a, b] ns (the ends are in
    order: a slice of them, found by bisection)."""
    ends = run["ends"][name]
    return benchlib.step_rate(ends[bisect.bisect_left(ends, a):bisect.bisect_right(ends, b)])


def quotient(run, w, x, what, a, b):
    """Window w's quotient over [a, b] ns with copy x the target."""
    y = TWIN[x]
    if what == "twin":
        return rate(run, x, a, b) / rate(run, y, a, b)
    if what == "solo":
        return rate(run, x, a, b)
    # A counter: steps a count over the whole window.
    n = len([t for t in run["ends"][x] if w["t0"] <= t <= w["t1"]])
    return n / (w["c1"][x][what] - w["c0"][x][what]) if n else float("nan")


def off_quotient(run, o, x, what):
    """Off window o's quotient with copy x the target, half a second in
    from each end (an attach's detach, a window's start, kept out)."""
    return quotient(run, o, x, what, o["t0"] + S // 2, o["t1"] - S // 2)


def cost(run, i, what, a=None, b=None, baseline="adjacent"):
    """On window i's cost against its baseline: "adjacent" (the off
    windows either side) or "run" (all the run's off windows)."""
    w, ws = run["windows"][i], run["windows"]
    on = quotient(run, w, w["target"], what, w["t0"] if a is None else a, w["t1"] if b is None else b)
    if baseline == "run":
        base = run_baseline(run, w["target"], what)
    else:
        offs = [off_quotient(run, o, w["target"], what) for o in (ws[i - 1], ws[i + 1]) if o["kind"] == "off"]
        offs = [q for q in offs if q == q]
        base = statistics.mean(offs) if offs else float("nan")
    return on / base - 1


def run_baseline(run, x, what):
    """The mean of the quotient over all the run's off windows, copy x the
    target: the same for each of its windows, so worked out once."""
    key = (x, what)
    cache = run.setdefault("baselines", {})
    if key not in cache:
        offs = [off_quotient(run, o, x, what) for o in run["windows"] if o["kind"] == "off"]
        offs = [q for q in offs if q == q]
        cache[key] = statistics.mean(offs) if offs else float("nan")
    return cache[key]


def window_costs(run):
    """One record per on window of the run."""
    out = []
    secs = int(run["args"]["on"])
    for i, w in enumerate(run["windows"]):
        if w["kind"] != "on":
            continue
        t0 = w["t0"]
        out.append(dict(config=w["config"], target=w["target"], twin=cost(run, i, "twin", baseline="run"),
                        adjacent=cost(run, i, "twin"), solo=cost(run, i, "solo"),
                        steady=cost(run, i, "twin", a=t0 + 3 * S, b=w.get("sigint", w["t1"]), baseline="run"),
                        seconds=[cost(run, i, "twin", a=t0 + s * S, b=t0 + (s + 1) * S, baseline="run")
                                 for s in range(secs)],
                        counted={k: cost(run, i, k) for k in run["counted"]},
                        events=w.get("events"), cpu_s=w.get("cpu_s")))
    return out


def fmt(xs):
    xs = [x for x in xs if x == x]
    if len(xs) < 2:
        return "n/a"
    lo, hi = ci(xs, stat=statistics.mean)
    return f"{100 * statistics.mean(xs):+.2f}% [{100 * lo:+.2f}%, {100 * hi:+.2f}%]"


def run_lines(run):
    ws = run["windows"]
    off = {k: [rate(run, k, o["t0"] + S // 2, o["t1"] - S // 2) for o in ws if o["kind"] == "off"] for k in "AB"}
    line = (f"{run['path']}: {run['job']}; CPUs {run['cpus'][0]} and {run['cpus'][1]}; on {run['args']['on']:g} s,"
            f" off {run['args']['off']:g} s; {sum(w['kind'] == 'on' for w in ws)} on windows; off windows' step rates: "
            + ", ".join(f"{k} median {statistics.median(v):.1f}/s ({min(v):.1f}-{max(v):.1f})" for k, v in off.items()))
    if len(off["A"]) > 2:
        line += f"; their correlation {statistics.correlation(off['A'], off['B']):+.2f}"
    q = [rate(run, "A", t, t + S) / rate(run, "B", t, t + S) for t in range(ws[0]["t0"], ws[-1]["t1"] - S, S)]
    q = [x for x in q if x == x]
    if len(q) > 40:
        line += "; the twin quotient's autocorrelation a second apart " + ", ".join(
            f"{k} s {autocorrelation(q, k):+.2f}" for k in (1, 5, 10))
    return [line] + steal_lines(run)


def steal_lines(run):
    """The hypervisor's steal on each copy's CPUs (twin.py since
    2026-12-03's seventh run), and how the windows' twin quotient moved
    with the copies' difference in it."""
    ws = [w for w in run["windows"] if "steal_ticks" in w.get("c0", {}).get("A", {})]
    if len(ws) < 3:
        return []
    hz = run.get("user_hz", 100)

    def stolen(w, k):  # CPU-seconds stolen a second of the window
        return (w["c1"][k]["steal_ticks"] - w["c0"][k]["steal_ticks"]) / hz / ((w["t1"] - w["t0"]) / S)

    q = [rate(run, "A", w["t0"], w["t1"]) / rate(run, "B", w["t0"], w["t1"]) for w in ws]
    d = [stolen(w, "A") - stolen(w, "B") for w in ws]
    line = "  steal on the copies' CPUs: " + ", ".join(
        f"{k} {100 * statistics.mean(stolen(w, k) for w in ws):.2f}% of a CPU" for k in "AB")
    if len(set(d)) > 1 and len(set(q)) > 1:
        line += f"; the windows' A/B quotient against A's steal less B's: correlation {statistics.correlation(q, d):+.2f}"
    return [line]


def bound_line(name, runs, n=2000):
    """The most the twin quotient says a config slowed its copy, at 95%
    one-sided (a cost "within 1%" is a bound on one side), with the
    windows resampled as the table's interval is, and with the runs
    resampled and then their windows: a run's windows share its off
    windows' baseline, so its error is common to them and the first
    bootstrap leaves it out."""
    by_window = bootstrap([x for r in runs for x in r], statistics.mean, n)
    line = f"{name}: slower by at most {-100 * by_window[int(0.05 * n)]:.2f}% (95% one-sided, windows resampled)"
    if len(runs) < 3:  # too few runs to resample
        return line + f"; {len(runs)} run(s)"
    rnd = random.Random(1)
    by_run = sorted(statistics.mean([x for r in rnd.choices(runs, k=len(runs)) for x in rnd.choices(r, k=len(r))])
                    for _ in range(n))
    return (line + f", {-100 * by_run[int(0.05 * n)]:.2f}% (runs resampled, then their windows; two-sided"
            f" [{100 * by_run[int(0.025 * n)]:+.2f}%, {100 * by_run[int(0.975 * n)]:+.2f}%]); {len(runs)} runs")


def autocorrelation(xs, lag):
    m = statistics.mean(xs)
    var = sum((x - m) ** 2 for x in xs)
    return sum((xs[i] - m) * (xs[i + lag] - m) for i in range(len(xs) - lag)) / var


def report(runs):
    lines = [l for r in runs for l in run_lines(r)]
    counted = list(dict.fromkeys(k for r in runs for k in r["counted"]))
    if not all(r["pmu"] for r in runs):
        lines.append("counted a step: " + ", ".join(counted) + " (no PMU on a host: no instructions or cycles)")
    recs = [dict(c, run=i) for i, r in enumerate(runs) for c in window_costs(r)]
    lines += ["", "negative: the attached copy slower (mean, 95% bootstrap interval);"
              " twin and steady against the run's off windows, the others against the adjacent ones", "",
              "| config | n | twin, full window | median | twin, adjacent off windows | solo (no twin) | steady (3 s in)"
              " | target A | target B | " + " | ".join(k + " a step" for k in counted) + " | gpuprof CPU s | events lost |",
              "|---|---|---|---|---|---|---|---|---|" + "---|" * len(counted) + "---|---|"]
    configs = list(dict.fromkeys(c["config"] for c in recs))
    for name in configs:
        cs = [c for c in recs if c["config"] == name]
        twin = [c["twin"] for c in cs]
        ev = [c["events"] for c in cs if c["events"]]
        lost = f"{sum(l for _, l in ev)} of {sum(d for d, _ in ev)}" if ev else "-"
        cpu = [c["cpu_s"] for c in cs if c["cpu_s"] is not None]
        lines.append(f"| {name} | {len(cs)} | {fmt(twin)} | {100 * statistics.median(twin):+.2f}% | "
                     f"{fmt([c['adjacent'] for c in cs])} | {fmt([c['solo'] for c in cs])} | {fmt([c['steady'] for c in cs])} | "
                     + "".join(f"{fmt([c['twin'] for c in cs if c['target'] == t])} | " for t in "AB")
                     + "".join(f"{fmt([c['counted'].get(k, float('nan')) for c in cs])} | " for k in counted)
                     + f"{statistics.mean(cpu) if cpu else 0:.2f} | {lost} |")
    lines.append("")
    for name in configs:
        by_run = {}
        for c in recs:
            if c["config"] == name and c["twin"] == c["twin"]:
                by_run.setdefault(c["run"], []).append(c["twin"])
        if sum(map(len, by_run.values())) > 1:
            lines.append(bound_line(name, list(by_run.values())))
    lines.append("")
    for name in configs:
        cs = [c for c in recs if c["config"] == name]
        n = max(len(c["seconds"]) for c in cs)
        lines.append(f"{name} by second since the attach: " + ", ".join(
            f"{s}: {fmt([c['seconds'][s] for c in cs if s < len(c['seconds'])]).split(' [')[0]}" for s in range(n)))
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: twinstats.py RUN [RUN...]: each a twin.tgz from twin.py, or its twin/ directory")
    print(report([load(p) for p in sys.argv[1:]]))
