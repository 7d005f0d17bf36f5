"""On a host of two GPUs: where gpuprof's cost lands in multi_pipeline.py's
two DDP ranks (compute mode), thread by thread.

  python3 testdata/gpuhost/costs.py OUT GPUPROF ON_SECONDS OFF_SECONDS NAME=FLAGS...

Once rank 0 has logged 300 steps: an off window, then each configuration
attached (`attach --pid LAUNCHER --children -q --probe-stats -d ON FLAGS`)
with an off window after it. Each window prints the ranks' step rate and,
for every rank thread that ran more than 20 µs a step, its user and system
CPU a step (/proc/PID/task/TID/stat: a uprobe's trap and its BPF program
are the trapping thread's system time), its run time a step (schedstat)
and its context switches a step; each on window also gpuprof's BPF
program statistics (OUT/NAME.txt holds its whole output). The step rate of
one window is as noisy as overhead.py's; the system time a step of a
thread that does not sync (the autograd thread) is not: it says what the
probes cost that thread."""
import os, subprocess, sys, time

if len(sys.argv) < 6:
    sys.exit(__doc__)
out, g = sys.argv[1], sys.argv[2]
secs, offs = float(sys.argv[3]), float(sys.argv[4])
configs = [c.split("=", 1) for c in sys.argv[5:]]
os.makedirs(out, exist_ok=True)
here = os.path.dirname(os.path.abspath(__file__))
job = subprocess.Popen(["python3", os.path.join(here, "multi_pipeline.py"), "--out", "/tmp/cj", "--ranks", "2", "--steps", "100000", "--mode", "compute"],
                       stdout=open(out + "/job.log", "w"), stderr=subprocess.STDOUT)
def lines(p):
    try:
        with open(p) as f: return sum(1 for _ in f)
    except OSError: return 0
while lines("/tmp/cj/truth-rank0.jsonl") < 300: time.sleep(0.5)
def ranks():
    rs = {}
    for p in os.listdir("/proc"):
        if not p.isdigit(): continue
        try:
            env = open(f"/proc/{p}/environ", "rb").read().split(b"\0")
        except OSError: continue
        for v in env:
            if v.startswith(b"RANK="):
                rs[int(v[5:])] = int(p)
    return rs
R = ranks()
print("ranks", R, "launcher", job.pid, flush=True)
def snap():
    s = {"t": time.time(), "steps": {r: lines(f"/tmp/cj/truth-rank{r}.jsonl") for r in R}, "th": {}}
    for r, pid in R.items():
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                st = open(f"/proc/{pid}/task/{tid}/stat").read()
                comm = st[st.index("(") + 1:st.rindex(")")]
                f = st[st.rindex(")") + 2:].split()
                sw = [l for l in open(f"/proc/{pid}/task/{tid}/status") if "ctxt_switches" in l]
                run = int(open(f"/proc/{pid}/task/{tid}/schedstat").read().split()[0])
                s["th"][(r, int(tid))] = (comm, int(f[11]), int(f[12]), sum(int(l.split()[1]) for l in sw), run)
            except OSError: pass
    return s
def report(name, a, b, extra=""):
    dt = b["t"] - a["t"]
    line = [f"== {name} {dt:.1f}s"]
    for r in R:
        n = b["steps"][r] - a["steps"][r]
        line.append(f" rank{r} {n/dt:.2f} steps/s")
    print("".join(line) + extra, flush=True)
    rows = []
    for k, v in b["th"].items():
        if k not in a["th"]: continue
        u = a["th"][k]; r = k[0]; n = max(b["steps"][r] - a["steps"][r], 1)
        run = (v[4] - u[4]) / n / 1e3
        if run < 20: continue
        rows.append((r, k[1] == R[r], v[0], (v[1] - u[1]) * 1e4 / n, (v[2] - u[2]) * 1e4 / n, (v[3] - u[3]) / n, run))
    for row in sorted(rows, key=lambda x: (x[0], -x[6])):
        print(f"   rank{row[0]} {'main' if row[1] else row[2]:>16}  user {row[3]:7.0f} us  sys {row[4]:7.0f} us  run {row[6]:7.0f} us  switches {row[5]:5.1f}  a step", flush=True)
a = snap(); time.sleep(offs); b = snap(); report("off", a, b)
for name, flags in configs:
    a = snap()
    p = subprocess.run(f"{g} attach --pid {job.pid} --children -q --probe-stats -d {secs}s {flags}", shell=True, capture_output=True, text=True)
    b = snap()
    open(f"{out}/{name}.txt", "w").write(p.stdout + "\n--- stderr\n" + p.stderr)
    st = p.stdout[p.stdout.find("BPF programs"):]
    st = st[:st.find("\n\n")]
    report(name, a, b, f"  (gpuprof exit {p.returncode})")
    print(st, flush=True)
    a = snap(); time.sleep(offs); b = snap(); report("off", a, b)
job.kill()
