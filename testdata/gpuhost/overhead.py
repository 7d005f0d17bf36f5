"""On the GPU host: the pipeline's step rate with gpuprof attached and
without, alternating in one run so drift and warm-up cancel.

  python3 testdata/gpuhost/overhead.py WORKLOAD_DIR GPUPROF MODE [WINDOWS [SECONDS]]

Runs spec_pipeline.py in MODE, then alternates windows of SECONDS: off, on,
off, on, ... (WINDOWS of each, plus a last off). "On" runs gpuprof attach
for the window. Step rate in a window is the truth file's steps ending in it
per second, leaving out 0.5 s at each end (attach and detach). Prints the
rates and the ratio of the mean on-rate to the mean off-rate.
"""
import json, os, statistics, subprocess, sys, tempfile, time

w, gpuprof, mode = sys.argv[1:4]
windows = int(sys.argv[4]) if len(sys.argv) > 4 else 3
secs = float(sys.argv[5]) if len(sys.argv) > 5 else 6.0
tmp = tempfile.mkdtemp()
truth = os.path.join(tmp, "truth.jsonl")
# Enough steps to outlast all windows at the fastest mode's rate.
steps = int((2 * windows + 2) * secs * 120) + 200
pipe = subprocess.Popen([sys.executable, os.path.join(w, "spec_pipeline.py"), "--mode", mode, "--steps", str(steps),
                         "--truth", truth, "--start-delay", "1"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
time.sleep(8)  # import, model setup, start delay and warm-up steps

spans = []  # (state, start_ns, end_ns)
for i in range(windows):
    t0 = time.monotonic_ns(); time.sleep(secs); spans.append(("off", t0, time.monotonic_ns()))
    t0 = time.monotonic_ns()
    subprocess.run([gpuprof, "attach", "--pid", str(pipe.pid), "-d", f"{secs}s", "-q"],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    spans.append(("on", t0, time.monotonic_ns()))
t0 = time.monotonic_ns(); time.sleep(secs); spans.append(("off", t0, time.monotonic_ns()))
pipe.kill(); pipe.wait()

ends = [json.loads(l)["t_end_ns"] for l in open(truth)]
rates = {"on": [], "off": []}
for state, a, b in spans:
    a, b = a + 500_000_000, b - 500_000_000
    n = sum(1 for e in ends if a <= e < b)
    rates[state].append(n / ((b - a) / 1e9))
    print(f"{state:3s} {n:5d} steps {n / ((b - a) / 1e9):8.2f} steps/s")
on, off = statistics.mean(rates["on"]), statistics.mean(rates["off"])
print(f"mode {mode}: on {on:.2f} steps/s, off {off:.2f} steps/s, on/off {on / off:.4f} ({100 * (on / off - 1):+.2f}%)")
