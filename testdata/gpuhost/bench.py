"""On the GPU host: gpuprof against no profiler and against torch.profiler,
on four workloads, in one device call per mode (run from the repo root).

  OUT=$OUT GPUPROF=bin/gpuprof python3 testdata/gpuhost/bench.py inrun   # ~540 s
  OUT=$OUT GPUPROF=bin/gpuprof python3 testdata/gpuhost/bench.py whole   # ~500 s
      [--budget S] [--only launchbound,compute,data,hf] [--alternations N] [--fake] [--scale X]

Workloads: launchbound (testdata/gpuhost/launchbound.py: ~300 small
kernels a step), compute and data (shared/workloads/spec_pipeline.py
--mode compute|data), hf (testdata/gpuhost/shapes/hf_trainer.py --mode
compute: the HF Transformers Trainer). With --only, also data-heap: the
data pipeline with glibc malloc's thresholds fixed in every run (why:
the WORKLOADS entry).

inrun: for each workload, overhead.py in one run of the job, alternating
windows off, gpuprof (default attach flags), off, idle (nothing: the
control), off, gpuprof, off, idle, then off, torchprof (torch.profiler
started and stopped in the job: torchprof.py), off, torchprof, off: the
torchprof windows last (--tp-last), as CUPTI stays in the process once
started, and shorter (TP_SECS: their stops take seconds a second of
window), and the share's timeout falls on them if their stops take long
(overhead.py --until drops later gpuprof and idle alternations where
they would leave one torchprof window no time). Its table (bench-inrun.md): the step rate on/off over
the full window (start to gpuprof's exit / the profiler's stop returning:
attach, learning, detach and a stop's processing counted), the whole one
(0.5 s in to 0.5 s before the nominal end) and the steady one (--learn s
in), each the median over windows with a 95% bootstrap interval; the
same against the idle control; the off-vs-off noise floor; gpuprof's
fields against the truth log (median absolute error of step_time,
data_time, compute_time as % of the truth's median, pooled over its
windows), steps matched one to one; gpuprof's CPU, peak RSS, attach and
detach time, events lost; torch.profiler's start and stop time and the
events it kept. The launch-bound loop has windows of 10 s: its "full"
ratio is the issue's first-10-seconds A/B.

whole: for each workload, whole runs of a fixed number of steps, bare,
under `gpuprof run` and under `torchprof.py --from-start`, in rounds
(bare, gpuprof, torchprof of every workload, then again), each run's step
rate over its steady part (the steps ending after the first 20% of its
span by the truth's timestamps) and over all its steps, and each ratio to
the bare run of the same round (bench-whole.md). A run that has logged
its steps and does not exit within a grace period (torch.profiler
processing a whole run's events at exit) is killed; its rate stands.

Everything goes under $OUT/bench-MODE/ (overhead.py's output and --save
JSON, gpuprof's logs, summaries and --jsonl, truth files), tarred into
$OUT/bench-MODE.tar.gz; the table also as $OUT/bench-MODE.md and on
stdout. Each workload gets a share of --budget (overhead.py is ended by
SIGTERM at its share and measures the windows it has); later rounds of
whole runs are skipped when the budget would not hold them.

--fake runs benchfake/fakejob.py (a Python loop writing truth lines) for
every workload, with benchfake/torch on PYTHONPATH (a stand-in
torch.profiler), windows scaled by --scale: a dry run of the control
flow on a machine without torch or a GPU.
"""
import argparse, json, os, shlex, signal, statistics, subprocess, sys, tarfile, time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import benchlib  # noqa: E402
from ovhstats import ci  # noqa: E402

T_BEGIN = time.monotonic()
ap = argparse.ArgumentParser()
ap.add_argument("mode", choices=["inrun", "whole"])
ap.add_argument("--out", default=os.environ.get("OUT", "bench-out"))
ap.add_argument("--gpuprof", default=os.environ.get("GPUPROF", "bin/gpuprof"))
ap.add_argument("--budget", type=float, default=0, help="seconds for the whole call (default: inrun 545, whole 540)")
ap.add_argument("--only", default="", help="workloads, comma-separated")
ap.add_argument("--alternations", type=int, default=0)
ap.add_argument("--fake", action="store_true")
ap.add_argument("--scale", type=float, default=1.0, help="with --fake: windows and steps scaled by this")
args = ap.parse_args()
budget = args.budget or (545 if args.mode == "inrun" else 540)
DEADLINE = T_BEGIN + budget
PY = sys.executable
GP = os.path.abspath(args.gpuprof)
TORCHPROF = os.path.join(HERE, "torchprof.py")
root = os.path.abspath(os.path.join(args.out, f"bench-{args.mode}"))
os.makedirs(root, exist_ok=True)

# name, in-run job ({out}: its directory), window s, off window s, share of
# the in-run budget (s), whole-run job ({steps}), its steps, per-run cap (s).
WORKLOADS = [
    dict(name="launchbound", job="{py} testdata/gpuhost/launchbound.py --out {out}",
         secs=10, off=5, share=145, whole="{py} testdata/gpuhost/launchbound.py --out {out} --steps {steps}",
         steps=600, cap=60, est=12),
    dict(name="compute", job="{py} shared/workloads/spec_pipeline.py --mode compute --steps 1000000 "
         "--truth {out}/truth.jsonl --start-delay 0", secs=8, off=4, share=128,
         whole="{py} shared/workloads/spec_pipeline.py --mode compute --steps {steps} --truth {out}/truth.jsonl "
         "--start-delay 0", steps=1000, cap=60, est=15),
    dict(name="data", job="{py} shared/workloads/spec_pipeline.py --mode data --steps 1000000 "
         "--truth {out}/truth.jsonl --start-delay 0", secs=8, off=4, share=125,
         whole="{py} shared/workloads/spec_pipeline.py --mode data --steps {steps} --truth {out}/truth.jsonl "
         "--start-delay 0", steps=900, cap=60, est=15),
    dict(name="hf", job="{py} testdata/gpuhost/shapes/hf_trainer.py --mode compute --truth {out}/truth.jsonl",
         secs=8, off=4, share=142,
         whole="{py} testdata/gpuhost/shapes/hf_trainer.py --mode compute --truth {out}/truth.jsonl --steps {steps}",
         steps=150, cap=90, est=36),
]
# The data pipeline again with glibc malloc's thresholds fixed (the same
# in every run): its 4 MiB clones then reuse heap memory. Left to malloc's
# dynamic thresholds, a run settles either where they do or where the
# heap's top is trimmed and faulted in afresh every step (heapclones.c,
# the same clones in C, on the dev VM: 0 against 2,016 faults a step,
# 11-13 against 34-47 ms, by whether a tensor's small object is allocated
# before its data; docs/benchmark.md 2026-12-07): a 3-4x swing in the
# data phase that no profiler need cause. Run only when named (--only).
WORKLOADS.insert(3, dict(WORKLOADS[2], name="data-heap", optional=True,
                         env={"MALLOC_MMAP_THRESHOLD_": "67108864", "MALLOC_TRIM_THRESHOLD_": "1073741824"}))
if args.only:
    keep = args.only.split(",")
    WORKLOADS = [w for w in WORKLOADS if w["name"] in keep]
else:
    WORKLOADS = [w for w in WORKLOADS if not w.get("optional")]
env = dict(os.environ, PYTHONUNBUFFERED="1")
if args.fake:
    fake = os.path.join(HERE, "benchfake", "fakejob.py")
    env["PYTHONPATH"] = os.path.join(HERE, "benchfake") + os.pathsep + env.get("PYTHONPATH", "")
    for w in WORKLOADS:
        w["job"] = "{py} " + fake + " --truth {out}/truth.jsonl"
        w["whole"] = "{py} " + fake + " --truth {out}/truth.jsonl --steps {steps}"
        w["secs"], w["off"], w["share"] = w["secs"] * args.scale, w["off"] * args.scale, w["share"] * args.scale
        w["steps"] = max(200, int(w["steps"] * args.scale))
        w["est"] = w["est"] * args.scale
else:
    # Only the files of the workloads run: a checkout without shared/
    # (the device carries it only where it is there) can still run
    # --only launchbound.
    # Each job's script: the word after {py} in its command.
    missing = sorted({w["whole"].split()[1] for w in WORKLOADS} | {args.gpuprof})
    missing = [p for p in missing if not os.path.exists(p)]
    if missing:
        sys.exit(f"bench.py: run from the repo root; missing: {', '.join(missing)}")


def say(msg):
    print(f"[{time.monotonic() - T_BEGIN:6.1f} s] {msg}", flush=True)


def fmt(v, spec=".2f", unit=""):
    return "-" if v is None or v != v else f"{v:{spec}}{unit}"


def pc(x):
    """A ratio as a signed % change."""
    return "-" if x is None or x != x else f"{100 * (x - 1):+.2f}%"


def ratio_cell(xs):
    xs = [x for x in xs or [] if x == x]
    if not xs:
        return "-"
    if len(xs) == 1:
        return pc(xs[0])
    lo, hi = ci(xs)
    return f"{pc(statistics.median(xs))} [{pc(lo)}, {pc(hi)}]"


def med(xs):
    xs = [x for x in xs if x is not None and x == x]
    return statistics.median(xs) if xs else None


def env_report():
    with open(os.path.join(root, "env.txt"), "w") as f:
        for cmd in (["nvidia-smi"], [GP, "version"], [PY, "-c", "import torch, sys; print(torch.__version__, "
                    "torch.version.cuda, sys.version)"], ["nproc"], ["uname", "-a"]):
            try:
                r = subprocess.run(cmd, capture_output=True, text=True, timeout=10, env=env)
                f.write(f"$ {' '.join(cmd)}\n{r.stdout}{r.stderr}\n")
            except Exception as e:
                f.write(f"$ {' '.join(cmd)}\n{e!r}\n")


def finish(md_lines):
    if DEADLINE + 20 - time.monotonic() > 15:
        env_report()
    md = os.path.join(args.out, f"bench-{args.mode}.md")
    with open(md, "w") as f:
        f.write("\n".join(md_lines) + "\n")
    with open(os.path.join(root, f"bench-{args.mode}.md"), "w") as f:
        f.write("\n".join(md_lines) + "\n")
    tar = os.path.join(args.out, f"bench-{args.mode}.tar.gz")
    with tarfile.open(tar, "w:gz") as t:
        t.add(root, arcname=f"bench-{args.mode}")
    print("\n".join(md_lines))
    say(f"wrote {md} and {tar}")


# ---------------------------------------------------------------- in-run

# The torchprof windows' length and the time their stops are given: at
# build 19d6376 (2026-12-03) stops of 8-10 s windows took 21 s (the data
# pipeline, 322,000 events kept) to over 60 s (the launch-bound loop,
# the compute pipeline, the HF Trainer), longer than the shares left them,
# and no window but the data pipeline's was measured.
TP_SECS, TP_RESERVE = 4, 35


def inrun():
    rows = []
    for k, w in enumerate(WORKLOADS):
        name = w["name"]
        left = DEADLINE - time.monotonic()
        later = sum(x["share"] for x in WORKLOADS[k + 1:])
        # Its share, less where time runs short: the workloads after it keep
        # 60% of theirs.
        share = min(w["share"], left - 0.6 * later)
        if share < 40 * (args.scale if args.fake else 1):
            say(f"{name}: skipped, {left:.0f} s left")
            rows.append((name, None, f"skipped: {left:.0f} s left"))
            continue
        alt = args.alternations or 2
        scale = args.scale if args.fake else 1
        save = os.path.join(root, f"{name}.json")
        cmd = ["timeout", "-s", "TERM", "-k", "20", f"{max(10, share - 8):.0f}",
               PY, os.path.join(HERE, "overhead.py"), ".", GP, name, str(alt), f"{w['secs']:g}",
               "--off-seconds", f"{w['off']:g}", "--learn", f"{min(3, w['secs'] / 3):g}",
               "--job", w["job"].format(py=PY, out="{out}"), "--truth", "truth.jsonl",
               "--config", "gpuprof=", "--config", "idle=@idle", "--config", "torchprof=@torchprof",
               "--tp-last", "--tp-timeout", "60", "--until", f"{max(10, share - 10):.0f}",
               "--tp-seconds", f"{TP_SECS * scale:g}", "--tp-reserve", f"{TP_RESERVE * scale:g}",
               "--save", save, "--logs", os.path.join(root, f"{name}-logs")]
        say(f"{name}: overhead.py, {alt} alternations of {w['secs']:g} s windows (off {w['off']:g} s), "
            f"share {share:.0f} s")
        with open(os.path.join(root, f"{name}.txt"), "w") as out:
            out.write("$ " + shlex.join(cmd) + "\n")
            out.flush()
            r = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, env=dict(env, **w.get("env", {})))
        say(f"{name}: exit {r.returncode}")
        try:
            with open(save) as f:
                rows.append((name, json.load(f), None))
        except (OSError, ValueError):
            tail = open(os.path.join(root, f"{name}.txt"), errors="replace").read()[-300:].replace("\n", " / ")
            rows.append((name, None, f"no result (exit {r.returncode}): {tail}"))
    md = ["## gpuprof vs torch.profiler vs nothing, in one run of each job (alternating windows)", "",
          "Step rate on/off: the job's own truth log, each on window against the mean of the off windows either "
          "side; median over windows [95% bootstrap CI]. full: from the window's start to gpuprof's exit or "
          "torch.profiler's stop returning (attach, learning, detach, the stop's processing); whole: 0.5 s in to "
          "0.5 s before the nominal end; steady: from --learn s in. vs idle: full ratio over the idle control's "
          "in the same alternation. Field errors: median |gpuprof - truth| of matched steps as % of the truth's "
          "median (the medians' own difference in brackets). For torchprof, attach/detach are its start()/stop() "
          "times and the events column the events it kept.", "",
          "| workload | config | windows | full | whole | steady | vs idle (full) | noise floor (full) | "
          "step_time err | data_time err | compute_time err | steps matched (1:1 windows) | CPU % | RSS MiB | "
          "attach s | detach s | events lost |",
          "|" + "---|" * 17]
    for name, res, why in rows:
        if res is None:
            md.append(f"| {name} | {why} |" + " |" * 15)
            continue
        b = res.get("bench", {})
        R, V, F = b.get("ratios", {}), b.get("vs_idle", {}), b.get("floor", {})
        floor = ratio_cell(F.get("full"))
        for cfg in ("gpuprof", "torchprof", "idle"):
            full = R.get("full", {}).get(cfg)
            cells = [name, cfg, str(len(full or [])), ratio_cell(full), ratio_cell(R.get("whole", {}).get(cfg)),
                     ratio_cell(R.get("steady", {}).get(cfg)), ratio_cell(V.get("full", {}).get(cfg)) if cfg != "idle" else "",
                     floor]
            if cfg == "gpuprof":
                gws = b.get("gpuprof", [])
                fe = b.get("fields_pooled", {}).get(cfg, {})
                for f in benchlib.FIELDS:
                    e = fe.get(f)
                    cells.append(f"{e['abs_err_pct']:.1f}% ({e['med_diff_pct']:+.1f}%)" if e else "-")
                m = sum(g["compare"]["matched"] for g in gws)
                o = sum(g["compare"]["ours"] for g in gws)
                one = sum(1 for g in gws if g["compare"]["one_to_one"])
                cells.append(f"{m}/{o} ({one}/{len(gws)})")
                cells.append(fmt(med([g["cpu_pct"] for g in gws]), ".1f"))
                rss = [g["rss_mib"] for g in gws if g["rss_mib"]]
                cells.append(fmt(max(rss) if rss else None, ".0f"))
                cells.append(fmt(med([g["attach_s"] for g in gws])))
                cells.append(fmt(med([g["detach_s"] for g in gws])))
                lost = [g["lost"] for g in gws if g["lost"] is not None]
                dl = [g["delivered"] for g in gws if g["delivered"] is not None]
                cells.append(f"{sum(lost)} of {sum(dl)}" if lost else "-")
            elif cfg == "torchprof":
                tws = b.get("torchprof", [])
                cells += ["", "", "", "", "", ""]
                cells.append(fmt(med([t["start_s"] for t in tws])))
                cells.append(fmt(med([t["stop_s"] for t in tws])))
                ev = [t["events"] for t in tws if t.get("events") is not None]
                cells.append(f"{int(med(ev))} kept" if ev else "-")
            else:
                cells += [""] * 9
            md.append("| " + " | ".join(cells) + " |")
    md += ["", "Per window: bench-inrun/NAME.txt (overhead.py's output); gpuprof's logs, summaries and steps: "
           "bench-inrun/NAME-logs/."]
    finish(md)


# ----------------------------------------------------------------- whole

def job_pids(pid, kind):
    """The processes of the job started as pid (under `gpuprof run`: the
    processes under it, gpuprof, its link releaser and the releaser's
    closers, run from a memfd, left out, and so is a process whose
    executable is gone: an exited closer not yet reaped)."""
    pids = benchlib.tree(pid)
    if kind != "gpuprof":
        return pids
    def ours(p):
        try:
            exe = os.readlink(f"/proc/{p}/exe")
        except OSError:
            return True
        return exe == os.path.realpath(GP) or exe.startswith("/memfd:")
    return [p for p in pids if not ours(p)]


def job_sample(pid, kind, tick, use, threads):
    """The job started as pid, sampled by one walk of its tree, over what
    earlier samples had: its CPU seconds and page faults so far (the
    most), and its threads (benchlib.threads) when it had the most (a
    sample as the job exits finds few left)."""
    pids = job_pids(pid, kind)
    now = benchlib.threads(pids)
    return max(use, benchlib.tree_usage(pids, tick)), now if len(now) >= len(threads) else threads


def run_one(w, kind, rnd):
    d = os.path.join(root, f"{w['name']}-{kind}-{rnd}")
    os.makedirs(d, exist_ok=True)
    cmd = shlex.split(w["whole"].format(py=PY, out=d, steps=w["steps"]))
    truth = os.path.join(d, "truth.jsonl")
    e = dict(env, **w.get("env", {}))
    if kind == "gpuprof":
        cmd = [GP, "run", "-q", "--jsonl", os.path.join(d, "steps.jsonl"), "--"] + cmd
        e["GPUPROF_LOG"] = "debug"
    elif kind == "torchprof":
        cmd = cmd[:1] + [TORCHPROF, "--from-start", "--status", os.path.join(d, "torchprof.status")] + cmd[1:]
    grace = 8
    out = open(os.path.join(d, "stdout.txt"), "w")
    err = open(os.path.join(d, "stderr.txt"), "w")
    out.write("$ " + shlex.join(cmd) + "\n")
    out.flush()
    t0, wall0 = time.monotonic_ns(), time.time()
    p = subprocess.Popen(cmd, stdout=out, stderr=err, env=e, start_new_session=True)
    tick = os.sysconf("SC_CLK_TCK")
    hwm = cpu = None
    # The job's own CPU and page faults (gpuprof's left out) and the
    # host's steal over the run: what tells a slow run's cause apart, the
    # job's own work, or a neighbour on the host.
    steal0, job_use, job_seen, job_threads = benchlib.steal_ticks(), (0.0, 0, 0), 0.0, []
    done_at, why = None, "exit"
    while p.poll() is None:
        if kind == "gpuprof":
            hwm = benchlib.vm_hwm_kib(p.pid) or hwm
            c = benchlib.self_cpu(p.pid, tick)
            cpu = c if c is not None else cpu
        now = time.monotonic()
        if now - job_seen >= 0.5:
            job_use, job_threads = job_sample(p.pid, kind, tick, job_use, job_threads)
            job_seen = now
        if done_at is None:
            try:
                with open(truth) as f:
                    if sum(1 for _ in f) >= w["steps"]:
                        done_at = now
            except OSError:
                pass
        if done_at is not None and now - done_at > grace:
            why = f"killed {grace} s after its last step"
            break
        if now - t0 / 1e9 > w["cap"]:
            why = f"killed at the cap ({w['cap']} s)"
            break
        if now > DEADLINE:
            why = "killed at the call's budget"
            break
        time.sleep(0.1)
    t_exit = time.monotonic_ns()
    steal = (benchlib.steal_ticks() - steal0) / tick
    job_use, job_threads = job_sample(p.pid, kind, tick, job_use, job_threads)
    with open(os.path.join(d, "threads.json"), "w") as f:
        json.dump(job_threads, f, indent=0)
    try:
        os.killpg(p.pid, signal.SIGKILL)  # its DataLoader workers, engines, the job under gpuprof run
    except ProcessLookupError:
        pass
    p.wait()
    out.close()
    err.close()
    rows = sorted(benchlib.read_jsonl(truth), key=lambda r: r["t_end_ns"])
    ends = [r["t_end_ns"] for r in rows]
    res = dict(workload=w["name"], kind=kind, round=rnd, steps=len(rows), end=why, rc=p.returncode,
               wall_s=(t_exit - t0) / 1e9)
    if len(ends) > 10:
        cut = ends[0] + 0.2 * (ends[-1] - ends[0])
        st = [x for x in ends if x >= cut]
        res["steady_rate"] = (len(st) - 1) / ((st[-1] - st[0]) / 1e9)
        res["all_rate"] = (len(ends) - 1) / ((ends[-1] - ends[0]) / 1e9)
        res["startup_s"] = (rows[0].get("t_start_ns", ends[0]) - t0) / 1e9
        res["exit_s"] = (t_exit - ends[-1]) / 1e9
        res["job_cores"] = job_use[0] / res["wall_s"]
        res["job_faults_step"] = job_use[1] / len(rows)
        res["sched"] = benchlib.threads_digest(job_threads)
        res["csw_step"] = (res["sched"]["vcsw"] / len(rows), res["sched"]["ncsw"] / len(rows))
        res["phases"] = benchlib.phase_medians(rows)
    res["host_steal_pct"] = 100 * steal / res["wall_s"] / os.cpu_count()
    if kind == "gpuprof":
        res["cpu_pct"] = 100 * cpu / res["wall_s"] if cpu is not None else None
        res["rss_mib"] = hwm / 1024 if hwm else None
        first, last, took = benchlib.log_times(os.path.join(d, "stderr.txt"))
        res["attach_s"] = first - wall0 if first else None
        ev = benchlib.events(os.path.join(d, "stdout.txt"))
        res["delivered"], res["lost"] = ev if ev else (None, None)
        cmp_, _ = benchlib.compare(rows, benchlib.read_jsonl(os.path.join(d, "steps.jsonl")))
        res["compare"] = cmp_
    if kind == "torchprof":
        for l in open(os.path.join(d, "torchprof.status")) if os.path.exists(os.path.join(d, "torchprof.status")) else []:
            f = l.split()
            if f[0] == "stopped":
                res["stop_s"], res["events"] = (int(f[3]) - int(f[1])) / 1e9, int(f[4])
    with open(os.path.join(d, "result.json"), "w") as f:
        json.dump(res, f, indent=1)
    return res


def phases_cell(ph):
    """A run's phase medians (benchlib.phase_medians), those its job logs."""
    if not ph:
        return "-"
    ms = "/".join(fmt(ph.get(f), ".1f") for f in benchlib.PHASES[:4])
    return ms + (f", pool {ph['pool']:.0f}" if "pool" in ph else "")


def sched_cell(sd):
    """A run's threads: how many, by policy, and the CPU lists they were
    allowed where not all the same."""
    if not sd:
        return "-"
    cell = f"{sd['threads']} " + ", ".join(f"{k} {v}" for k, v in sd["policies"].items())
    return cell + ("; cpus " + ", ".join(f"{k}: {v}" for k, v in sd["cpus"].items()) if len(sd["cpus"]) > 1 else "")


def whole():
    kinds = ("bare", "gpuprof", "torchprof")
    results, skipped = [], []
    spent = {}  # (workload, kind): the wall of its last run, for the budget
    rounds = args.alternations or 2
    for rnd in range(1, rounds + 1):
        for w in WORKLOADS:
            for kind in kinds:
                need = spent.get((w["name"], kind), w["est"] * (1.6 if kind == "torchprof" else 1))
                if time.monotonic() + need > DEADLINE:
                    skipped.append(f"{w['name']} {kind} round {rnd}")
                    say(f"{w['name']} {kind} round {rnd}: skipped ({DEADLINE - time.monotonic():.0f} s left, ~{need:.0f} s needed)")
                    continue
                r = run_one(w, kind, rnd)
                spent[(w["name"], kind)] = r["wall_s"] + 3
                results.append(r)
                say(f"{w['name']} {kind} round {rnd}: {r['steps']} steps, steady {fmt(r.get('steady_rate'))} steps/s, "
                    f"wall {r['wall_s']:.1f} s, {r['end']}")
    with open(os.path.join(root, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
    md = ["## gpuprof vs torch.profiler vs nothing, whole runs alternated", "",
          "Each run: a fixed number of steps; bare, under `gpuprof run`, under torchprof.py --from-start "
          "(torch.profiler from before the script to its exit). steady: steps/s over the steps ending after the "
          "first 20% of the run's span (truth timestamps); all: over all its steps. Ratio: to the bare run of the "
          "same round. startup: spawn to the first step's start; exit: last step to the process's end (or kill). "
          "job cores: the job's processes' CPU over the run's wall (gpuprof's own not in it; read each half second); "
          "faults/step: their page faults a step; steal: the host's steal over the run, % of its CPUs; "
          "threads: the job's threads when it had the most, by scheduling policy; csw/step: their voluntary and "
          "involuntary context switches a step; phases: the job's own log, medians: data, compute, dispatch wait "
          "and engine batch in ms, and the sample pool's fill.", "",
          "| workload | kind | round | steps | steady steps/s | ratio (steady) | all steps/s | ratio (all) | "
          "startup s | exit s | end | phases (data/compute/wait/batch ms, pool) | job cores | faults/step | steal % | threads | csw/step | CPU % | RSS MiB | attach s | events lost | step_time err | data_time err | "
          "compute_time err | matched (1:1) | tp stop s | tp events |",
          "|" + "---|" * 27]
    bare = {(r["workload"], r["round"]): r for r in results if r["kind"] == "bare"}
    for r in results:
        b = bare.get((r["workload"], r["round"]), {})
        rs = r.get("steady_rate", float("nan")) / b["steady_rate"] if b.get("steady_rate") else None
        ra = r.get("all_rate", float("nan")) / b["all_rate"] if b.get("all_rate") else None
        c = [r["workload"], r["kind"], str(r["round"]), str(r["steps"]), fmt(r.get("steady_rate")),
             pc(rs) if r["kind"] != "bare" else "", fmt(r.get("all_rate")), pc(ra) if r["kind"] != "bare" else "",
             fmt(r.get("startup_s"), ".1f"), fmt(r.get("exit_s"), ".1f"), r["end"], phases_cell(r.get("phases")),
             fmt(r.get("job_cores")), fmt(r.get("job_faults_step"), ".0f"), fmt(r.get("host_steal_pct")),
             sched_cell(r.get("sched")), "/".join(fmt(x, ".0f") for x in r.get("csw_step", ()))]
        if r["kind"] == "gpuprof":
            cmp_ = r["compare"]
            c += [fmt(r.get("cpu_pct"), ".1f"), fmt(r.get("rss_mib"), ".0f"), fmt(r.get("attach_s")),
                  f"{r['lost']} of {r['delivered']}" if r.get("lost") is not None else "-"]
            for f in benchlib.FIELDS:
                e = cmp_["fields"].get(f)
                c.append(f"{e['abs_err_pct']:.1f}% ({e['med_diff_pct']:+.1f}%)" if e else "-")
            c.append(f"{cmp_['matched']}/{cmp_['ours']} ({'yes' if cmp_['one_to_one'] else 'no'})")
        else:
            c += [""] * 8
        c += [fmt(r.get("stop_s"), ".1f"), str(r.get("events", ""))] if r["kind"] == "torchprof" else ["", ""]
        md.append("| " + " | ".join(c) + " |")
    # Per workload: each kind's ratio to bare, median over rounds.
    md += ["", "| workload | kind | runs | steady ratio (median over rounds) | all ratio |", "|---|---|---|---|---|"]
    for w in WORKLOADS:
        for kind in kinds[1:]:
            xs, ys = [], []
            for r in results:
                b = bare.get((r["workload"], r["round"]), {})
                if r["workload"] == w["name"] and r["kind"] == kind and b.get("steady_rate") and r.get("steady_rate"):
                    xs.append(r["steady_rate"] / b["steady_rate"])
                    ys.append(r["all_rate"] / b["all_rate"])
            md.append(f"| {w['name']} | {kind} | {len(xs)} | {pc(med(xs))} ({', '.join(pc(x) for x in xs)}) | "
                      f"{pc(med(ys))} |")
    if skipped:
        md += ["", "Skipped for the budget: " + "; ".join(skipped)]
    finish(md)


say(f"bench {args.mode}: {', '.join(w['name'] for w in WORKLOADS)}; budget {budget:.0f} s; gpuprof {GP}")
inrun() if args.mode == "inrun" else whole()
