"""On the GPU host: the pipeline's step rate with gpuprof attached and
without, alternating in one run so that drift and warm-up cancel.

  python3 testdata/gpuhost/overhead.py WORKLOAD_DIR GPUPROF MODE [ALTERNATIONS [SECONDS [ATTACH FLAGS...]]]

Runs spec_pipeline.py in MODE; once it has trained 100 steps, alternates
windows of SECONDS: off, on, off, on, ..., off (ALTERNATIONS "on" windows,
each between two "off" ones). "On" runs gpuprof attach for the window.
Each window leaves out 0.5 s at both ends (attach, detach) and reports the
truth file's steps ending in it per second, and their median step_time.
"Steady" leaves out the first LEARN seconds of each "on" window as well:
while gpuprof finds the step boundary it counts every kernel launch, then
only --launch-duty of the time; a long-running attach is in that state.
Each "on" window is compared with the mean of the "off" windows on either
side of it, which cancels a pipeline that speeds up or slows down over the
run; the median of those ratios is the result, with a 95% bootstrap interval.
The same statistic taken between "off" windows alone is printed as the run's
noise floor: an "on" result inside it is no measurable slowdown.

GPUPROF_CPUS=LIST runs gpuprof under taskset -c LIST, away from the
pipeline's cores, to tell its own CPU use apart from its probes' cost.
"""
import json, os, random, statistics, subprocess, sys, tempfile, time

w, gpuprof, mode = sys.argv[1:4]
alternations = int(sys.argv[4]) if len(sys.argv) > 4 else 5
secs = float(sys.argv[5]) if len(sys.argv) > 5 else 5.0
extra = sys.argv[6:]
LEARN = 3.0
tmp = tempfile.mkdtemp()
truth = os.path.join(tmp, "truth.jsonl")
steps = int((2 * alternations + 1) * secs * 150) + 2000
pipe = subprocess.Popen([sys.executable, os.path.join(w, "spec_pipeline.py"), "--mode", mode, "--steps", str(steps),
                         "--truth", truth, "--start-delay", "0"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def lines():
    try:
        with open(truth) as f:
            return sum(1 for _ in f)
    except FileNotFoundError:
        return 0


deadline = time.monotonic() + 120
while lines() < 100 and time.monotonic() < deadline and pipe.poll() is None:
    time.sleep(0.2)

spans = []  # (state, start_ns, end_ns)
for i in range(alternations):
    t0 = time.monotonic_ns(); time.sleep(secs); spans.append(("off", t0, time.monotonic_ns()))
    t0 = time.monotonic_ns()
    pin = ["taskset", "-c", os.environ["GPUPROF_CPUS"]] if os.environ.get("GPUPROF_CPUS") else []
    subprocess.run(pin + [gpuprof, "attach", "--pid", str(pipe.pid), "-d", f"{secs}s", "-q"] + extra,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    spans.append(("on", t0, time.monotonic_ns()))
t0 = time.monotonic_ns(); time.sleep(secs); spans.append(("off", t0, time.monotonic_ns()))
pipe.kill(); pipe.wait()

rows = [json.loads(l) for l in open(truth)]


def measure(skip_on):
    stats = []
    for state, a, b in spans:
        a, b = a + int((skip_on if state == "on" else 0.5) * 1e9), b - 500_000_000
        sel = [r for r in rows if a <= r["t_end_ns"] < b]
        rate = len(sel) / ((b - a) / 1e9)
        st = statistics.median(r["step_time"] for r in sel) if sel else float("nan")
        stats.append((state, rate, st))
    rate_ratios, st_ratios = [], []
    for i, (state, rate, st) in enumerate(stats):
        if state == "on":
            rate_ratios.append(rate / ((stats[i - 1][1] + stats[i + 1][1]) / 2))
            st_ratios.append(st / ((stats[i - 1][2] + stats[i + 1][2]) / 2))
    return stats, rate_ratios, st_ratios


def ci(xs, n=2000):
    """95% bootstrap interval of the median of xs."""
    rnd = random.Random(1)
    meds = sorted(statistics.median(rnd.choices(xs, k=len(xs))) for _ in range(n))
    return meds[int(0.025 * n)], meds[int(0.975 * n)]


def pct(x):
    return f"{100 * (x - 1):+.2f}%"


for name, skip in (("whole", 0.5), ("steady", LEARN)):
    if secs - skip < 1.5:
        continue
    stats, rate_ratios, st_ratios = measure(skip)
    if name == "whole":
        for state, rate, st in stats:
            print(f"{state:3s} {rate:8.2f} steps/s  median step_time {st * 1e3:7.3f} ms")
    r, s = statistics.median(rate_ratios), statistics.median(st_ratios)
    lo, hi = ci(rate_ratios)
    print(f"mode {mode} {' '.join(extra)} [{name}]: step rate on/off {r:.4f} ({pct(r)}, 95% CI {pct(lo)}..{pct(hi)}, "
          f"mean {pct(statistics.mean(rate_ratios))}, n={len(rate_ratios)}); step_time on/off {s:.4f} ({pct(s)})")
    print(f"  each {' '.join(pct(x) for x in rate_ratios)}")
    # The same statistic between "off" windows (each against its "off"
    # neighbours two windows away) is the noise floor of this run.
    offs = [x for x in stats if x[0] == "off"]
    null = [offs[i][1] / ((offs[i - 1][1] + offs[i + 1][1]) / 2) for i in range(1, len(offs) - 1)]
    if len(null) >= 3:
        lo, hi = ci(null)
        print(f"  noise floor (off vs off): median {pct(statistics.median(null))}, 95% CI {pct(lo)}..{pct(hi)}")
