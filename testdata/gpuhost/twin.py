"""On the GPU host: what the first seconds of an attach cost a job, measured
against a twin of the job that runs beside it (issue 29).

  OUT=$OUT GPUPROF=bin/gpuprof python3 testdata/gpuhost/twin.py
      [--windows N] [--on S] [--off S] [--config NAME=FLAGS]... [--job CMD]
      [--budget S] [--fake]

(default: 6 rounds of gpuprof's default flags, an idle control, gpuprof
again: 18 windows, ~300 s; a warm machine's 600 s call fits 34 windows
at --budget 555). A config named twice is measured twice a round.

Two copies of one job (default testdata/gpuhost/launchbound.py) run at
once, each on its own half of the host's physical cores. Each "on" window
attaches gpuprof afresh to one of them, in turn, for --on seconds
(SIGINT at the end, the window closing as gpuprof exits: attach,
learning and detach inside it), then --off seconds with nothing
attached. The day's noise on this host (neighbouring 10 s windows of one
job 14% apart, docs/benchmark.md) is the host's: its CPUs' speed, other
tenants. What of it reaches both copies at once cancels in the attached
copy's step rate over the window divided by its twin's over the same
span; against the same quotient in the run's off windows (twinstats.py
says why those), that is the attach's cost: the twin is a control
measured in the same seconds, not in the window before. A config
"@idle" attaches nothing: its spread is the statistic's own.

gpuprof runs on the attached copy's CPUs, as on a host that is the
job's: its own work (reading the ring buffers, symbols, NVML) then slows
the copy it watches, not the twin, which stays a control. Unpinned
(until 2026-12-03's seventh run) it ran where the scheduler put it, and
in a run one copy came out up to ~3% slower than the other in the on
windows, whichever was attached (docs/benchmark.md). A config whose
flags begin "@on-twin" runs gpuprof on the twin's CPUs instead: the twin
then pays gpuprof's own work, the attached copy only its probes, and the
two configs' difference splits the cost. Each window also counts the
copies' CPU work (perfcount.py: instructions and cycles where the host
has a PMU, the task clock always) and the time the hypervisor stole from
each copy's CPUs (/proc/stat), sampled at every window's start and end.

Both copies share the GPU; a launch-bound loop's kernels leave it idle
most of the time, and the off windows' rates say what each copy ran at
beside the other.

twinstats.py has the statistics (the twin quotient, the copy's own "solo"
one for comparison, steady, by second, the counters), for this run on
stdout and for several pooled (`twinstats.py RUN.tgz...`). The run
goes to $OUT/twin.tgz, small enough to commit under results/: the
truth logs' step ends, gpuprof's logs and summaries, results.json, the
table; with --self-profile gpuprof's profiles of itself, for `go tool
pprof bin/gpuprof`; with --full-archive also each window's --jsonl and
the whole truth logs.

--fake runs benchfake/fakejob.py as the job: a dry run of the control
flow on a machine without torch or a GPU.
"""
import argparse, io, json, os, resource, shlex, signal, subprocess, sys, tarfile, time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import benchlib  # noqa: E402
import perfcount  # noqa: E402
import twinstats  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--windows", type=int, default=6, help="rounds of the configs")
ap.add_argument("--on", type=float, default=10.0, help="on window, seconds")
ap.add_argument("--off", type=float, default=5.0, help="off window, seconds")
ap.add_argument("--config", action="append", default=[], help="NAME=FLAGS: gpuprof attach flags; @idle attaches nothing; \"@on-twin FLAGS\" runs gpuprof on the twin's CPUs")
ap.add_argument("--job", default="", help="the job's command; {py} the interpreter, {out} its directory")
ap.add_argument("--warm", type=int, default=200, help="steps both copies train before the first window")
ap.add_argument("--budget", type=float, default=0, help="seconds: no window starts that would end past it")
ap.add_argument("--gpuprof", default=os.environ.get("GPUPROF", "bin/gpuprof"))
ap.add_argument("--out", default=os.environ.get("OUT", "/tmp"))
ap.add_argument("--self-profile", action="store_true",
                help="gpuprof's own CPU and heap profiles of each window (GPUPROF_SELF_PROFILE) into the run's wNNN-*.pprof/")
ap.add_argument("--full-archive", action="store_true",
                help="keep gpuprof's --jsonl of each window and the whole truth logs in twin.tgz (~6 MB a run, not ~0.7)")
ap.add_argument("--fake", action="store_true")
args = ap.parse_args()
start = time.monotonic()
# By default two attaches to an idle control's one: the attaches are what
# is measured, the control only bounds the statistic's spread.
configs = [c.split("=", 1) for c in (args.config or ["default=", "idle=@idle", "default="])]
configs = [(n, shlex.split(f)) for n, f in configs]
res = "/tmp/twin"
subprocess.run(["rm", "-rf", res])
os.makedirs(res)
py = sys.executable
env = dict(os.environ)
job = args.job or "{py} " + os.path.join(HERE, "launchbound.py") + " --out {out}"
if args.fake:
    job = "{py} " + os.path.join(HERE, "benchfake", "fakejob.py") + " --out {out}"
    env["PYTHONPATH"] = os.path.join(HERE, "benchfake") + os.pathsep + env.get("PYTHONPATH", "")


def core_halves():
    """The CPUs this process may use, split in two by physical core (a
    core's hyperthreads on one side), so that neither copy runs on the
    other's cores' siblings."""
    cpus = sorted(os.sched_getaffinity(0))
    cores = {}
    for c in cpus:
        try:
            with open(f"/sys/devices/system/cpu/cpu{c}/topology/thread_siblings_list") as f:
                key = f.read().strip()
        except OSError:
            key = str(c)
        cores.setdefault(key, []).append(c)
    groups = list(cores.values())
    half = max(1, len(groups) // 2)
    a = [c for g in groups[:half] for c in g]
    b = [c for g in groups[half:] for c in g] or a
    return a, b


halves = core_halves()
copies = []
for i, name in enumerate("AB"):
    d = os.path.join(res, name)
    os.makedirs(d)
    cmd = shlex.split(job.format(py=py, out=d))
    cpus = set(halves[i])
    p = subprocess.Popen(cmd, env=env, stdout=open(d + "/stdout", "w"), stderr=subprocess.STDOUT,
                         preexec_fn=lambda cpus=cpus: os.sched_setaffinity(0, cpus))
    copies.append(dict(name=name, pid=p.pid, proc=p, dir=d, cpus=sorted(cpus)))


def truth(c):
    return benchlib.read_jsonl(os.path.join(c["dir"], "truth.jsonl"))


def stop_all(*_):
    for c in copies:
        if c["proc"].poll() is None:
            c["proc"].terminate()


signal.signal(signal.SIGTERM, lambda *a: (stop_all(), sys.exit(1)))
deadline = time.monotonic() + 300
while min(len(truth(c)) for c in copies) < args.warm:
    if time.monotonic() > deadline or any(c["proc"].poll() is not None for c in copies):
        stop_all()
        sys.exit(f"twin.py: the copies did not reach {args.warm} steps: see {res}/A/stdout")
    time.sleep(1)

windows = []  # dict(kind=off|on, config, target, t0, t1 in monotonic ns, c0, c1 counts, ...)
counters = {c["name"]: perfcount.ThreadCounters(c["pid"]) for c in copies}


def counts():
    return {c["name"]: dict(counters[c["name"]].read(), steal_ticks=benchlib.steal_ticks(set(c["cpus"]))) for c in copies}


def off_window():
    t0, c0 = time.monotonic_ns(), counts()
    time.sleep(args.off)
    windows.append(dict(kind="off", t0=t0, t1=time.monotonic_ns(), c0=c0, c1=counts()))


def on_window(name, flags, target):
    t0 = time.monotonic_ns()
    w = dict(kind="on", config=name, target=target["name"], t0=t0, c0=counts())
    if flags == ["@idle"]:
        time.sleep(args.on)
        w.update(t1=time.monotonic_ns(), c1=counts())
        windows.append(w)
        return
    runs_on = target
    if flags[:1] == ["@on-twin"]:
        flags, runs_on = flags[1:], next(c for c in copies if c is not target)
    w["gpuprof_cpus"] = runs_on["cpus"]
    base = os.path.join(res, f"w{len(windows):03d}-{name}-{target['name']}")
    cmd = [args.gpuprof, "attach", "--pid", str(target["pid"]), "-d", f"{args.on + 120:g}s", "-q",
           "--jsonl", base + ".jsonl"] + flags
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(base + ".out", "w") as out, open(base + ".log", "w") as log:
        env = dict(os.environ, GPUPROF_LOG="debug")
        if args.self_profile:
            env["GPUPROF_SELF_PROFILE"] = base + ".pprof"
        r = subprocess.Popen(cmd, stdout=out, stderr=log, env=env,
                             preexec_fn=lambda cpus=set(runs_on["cpus"]): os.sched_setaffinity(0, cpus))
    time.sleep(max(0.0, t0 / 1e9 + args.on - time.monotonic()))
    w["sigint"] = time.monotonic_ns()
    if r.poll() is None:
        r.send_signal(signal.SIGINT)
    try:
        r.wait(60)
    except subprocess.TimeoutExpired:
        r.kill()
        r.wait()
    w.update(t1=time.monotonic_ns(), c1=counts())
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    w.update(rc=r.returncode, base=base, cpu_s=(after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime),
             events=benchlib.events(base + ".out"))
    if r.returncode != 0:
        print(f"{os.path.basename(base)}: exit {r.returncode}: see {base}.log", file=sys.stderr, flush=True)
    windows.append(w)


plan = [(c, (i + k) % 2) for i in range(args.windows) for k, c in enumerate(configs)]
per = args.on + args.off + 1
off_window()
for n, ((name, flags), t) in enumerate(plan):
    if args.budget and time.monotonic() - start + per + 15 > args.budget:
        print(f"twin.py: budget: {n} of {len(plan)} windows", file=sys.stderr, flush=True)
        break
    on_window(name, flags, copies[t])
    off_window()
    print(f"window {n + 1}/{len(plan)} ({name} on {copies[t]['name']}) done", file=sys.stderr, flush=True)
stop_all()
for c in copies:
    c["proc"].wait()

kinds = list(counters["A"].events)
with open(os.path.join(res, "results.json"), "w") as f:
    json.dump(dict(args=vars(args), job=job.format(py="python3", out="DIR"), cpus=[c["cpus"] for c in copies],
                   counted=kinds, pmu=perfcount.has_pmu(), user_hz=os.sysconf("SC_CLK_TCK"), windows=windows), f)
table = twinstats.report([twinstats.load(res)])
print(table)
with open(os.path.join(res, "table.md"), "w") as f:
    f.write(table)


def slim(info):
    """What twinstats reads and a reader checks: the logs, not each
    window's --jsonl (twinstats never reads it); the truth logs are
    added apart, cut to their step ends."""
    name = os.path.basename(info.name)
    if name == "truth.jsonl" or (name.startswith("w") and name.endswith(".jsonl")):
        return None
    return info


def add_step_ends(t, c):
    """c's truth log in t with only each step's end, the one field
    twinstats reads; the log on disk stays whole."""
    data = "".join(json.dumps(dict(t_end_ns=s["t_end_ns"])) + "\n" for s in truth(c)).encode()
    info = tarfile.TarInfo(os.path.join("twin", c["name"], "truth.jsonl"))
    info.size, info.mtime = len(data), int(time.time())
    t.addfile(info, io.BytesIO(data))


with tarfile.open(os.path.join(args.out, "twin.tgz"), "w:gz") as t:
    if args.full_archive:
        t.add(res, arcname="twin")
    else:
        t.add(res, arcname="twin", filter=slim)
        for c in copies:
            add_step_ends(t, c)
