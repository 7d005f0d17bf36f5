"""On the GPU host: the pipeline's step rate with gpuprof attached and
without, alternating in one run so that drift and warm-up cancel.

  python3 testdata/gpuhost/overhead.py WORKLOAD_DIR GPUPROF MODE [ALTERNATIONS [SECONDS [ATTACH FLAGS...]]]
      [--config NAME=FLAGS]... [--gpuprof-cpus LIST] [--job-cpus LIST]

Runs spec_pipeline.py in MODE; once it has trained 100 steps, alternates
windows of SECONDS: off, on, off, on, ..., off. "On" runs gpuprof attach for
the window. With several --config, the "on" windows take them in turn
(off, A, off, B, off, A, ...), each ALTERNATIONS times, so that every
configuration is measured in the same run under the same conditions.
Each window leaves out 0.5 s at both ends (attach, detach) and reports the
step rate of the truth file's steps ending in it (their count less one
over the time from the first's end to the last's: no rounding to whole
steps), and their median step_time. --off-seconds gives the "off" windows
a length of their own: the "on" ones must hold --learn, the "off" ones
need not, and shorter windows follow the job's drift closer and make more
alternations in a device call.
"Steady" leaves out the first --learn seconds (default 3) of each "on" window as well:
while gpuprof finds the step boundary it counts every kernel launch, then
only --launch-duty of the time; a long-running attach is in that state.
Each "on" window is compared with the mean of the "off" windows on either
side of it, which cancels a pipeline that speeds up or slows down over the
run; the median of those ratios is the result, with a 95% bootstrap interval.
The same statistic taken between "off" windows alone is printed as the run's
noise floor: an "on" result inside it is no measurable slowdown.
The steady part also gives each field of the truth log on/off (period,
step_time, compute_time, data_time, dispatch_wait), so that a slowdown is
placed in the GPU's work, the step's own CPU or the data phase. --save FILE
keeps the ratios, and overhead_pool.py pools those of several runs (one
10-minute device call holds ~10 alternations; a 1% claim needs more).

A configuration whose flags hold "@ranks" attaches to the job's processes
with a rank in their environment (RANK=, torchrun's) rather than to the
job's command: the ranks alone, not the launcher or the engines.

A configuration whose flags hold "@bin=PATH" runs the gpuprof at PATH
instead of GPUPROF: two builds measured in turn in one run, so that the
job's drift cancels between them as it does between on and off.

A configuration whose flags hold "@freeze=S" stops gpuprof (SIGSTOP) S s
into the window and lets it go on (SIGCONT) just before the SIGINT at its
end: the probes stay in the job and run, their ring buffer fills (what they
emit is then counted lost), while gpuprof's own threads (draining,
correlating, NVML, rescans) do nothing. Against the same flags unfrozen, it
tells the cost of the probes' traps in the job from the cost of gpuprof's
own work on the machine.

A configuration whose flags hold "@env=NAME=VALUE" runs gpuprof with that
in its environment (GOMAXPROCS=1, say). Each gpuprof window keeps its CPU
time as it went (every 50 ms; "cpu_series" in --save's bench), to set a
window's cost beside what gpuprof was doing then.

A configuration whose flags hold "@nice=N" runs gpuprof under `nice -n N`:
its threads, and the kernel work of its system calls (the BPF verifier,
the uprobes' registration), at a lower priority than the job's.

A configuration whose flags are just "@idle" runs `sleep` for the window
instead of gpuprof: the same "on" window with nothing attached, which
measures what the alternation itself does to the comparison. With one, each
other configuration is also given against it, alternation by alternation.

Each window also reports the CPU the job used (user and system, from
/proc/PID/stat: a uprobe's trap and BPF program count as the job's system
time), its threads' context switches a second (voluntary and not, from
/proc/PID/task/TID/status: a thread with a watchpoint pays at each) and,
for "on" windows, the CPU gpuprof itself used. --gpuprof-cpus
runs gpuprof under taskset, --job-cpus the pipeline, to keep them apart.

The process that writes the truth file (found by its open descriptor) is
also measured on its own in the steady part of each window: its CPU time
(all its threads) and context switches per step it logs. In a loop bound
by the threads that launch its work, a probe's cost is CPU time of those
threads, so the CPU a step moves with what gpuprof adds to the job and
far less with the pace of the rest of the job than the step rate does.
The same is given by thread name, user and system time apart: a probe's
trap and BPF program are system time of the thread that hit it, where a
thread spinning in a CUDA sync adds user time as the step grows.

--witness CMD runs a CPU-speed witness beside the job (witness.c: a line
a piece of fixed work; {out} is its file): each window's steady part then
also has the witness's period, and the step rate on/off is also given at
equal witness speed and at equal compute time (ovhstats.py says why and
when each holds).

--job CMD runs another job instead of spec_pipeline.py (MODE is then only
a label): a command line in which {out} is a directory for its truth
files, --truth NAME the one (in that directory) whose steps are counted.
gpuprof attaches to the command's process; give --children in the attach
flags to follow the processes it starts (multi_pipeline.py's ranks and
engine), whose CPU counts as the job's.

A configuration whose flags are just "@torchprof" runs torch.profiler in
the job for the window instead (torchprof.py: the job's python command is
run under it, for every window, so that off windows run the same wrapper
idle): SIGUSR1 to the job's process at the window's start, SIGUSR2 at its
nominal end, and the window lasts until the wrapper says the stop (the
trace's processing, on the job's main thread) is done (--tp-timeout).
Its start and stop times and the events it kept are reported per window.
--tp-last puts its windows after all the other configurations' alternations
(off, A, off, B, ..., off, TP, off, TP, off): CUPTI, once started, stays
in the process, and the windows before the first start are free of it.

Besides "whole" (0.5 s in to 0.5 s before the nominal end) and "steady"
(--learn s in), each ratio is given over the "full" window: from the
window's start to the moment gpuprof exited (its attach, learning and
detach) or torch.profiler's stop returned (its processing), the steps
counted from the last one ending before the start to the first one ending
after the end, so that a stall at either end counts.

gpuprof's windows run it with --jsonl, GPUPROF_LOG=debug and a SIGINT at
the window's nominal end (-d is only a backstop), and report: its peak
RSS (VmHWM, polled while it runs), attach time (its start to the last
"attached" line of its log: probes on the job's libraries), detach time
(SIGINT to its exit; and the session's own, from its log), events lost
(its summary), and its steps against the truth's (benchlib.py: matched as
`gpuprof compare` does; the median absolute error of step_time, data_time
and compute_time as % of the truth's median, and whether one to one).
--save also holds all of that under "bench", for bench.py's table.
"""
import argparse, bisect, json, os, shlex, signal, statistics, subprocess, sys, tempfile, time

T_START = time.monotonic()  # --until counts from here

import benchlib
from ovhstats import COVARIATES, adjusted_line, ci, fit, floor_pairs, pairs, pct

ap = argparse.ArgumentParser()
ap.add_argument("workload")
ap.add_argument("gpuprof")
ap.add_argument("mode")
ap.add_argument("alternations", nargs="?", type=int, default=5)
ap.add_argument("seconds", nargs="?", type=float, default=5.0)
ap.add_argument("--off-seconds", type=float, default=0, help="length of the off windows (default: SECONDS)")
ap.add_argument("--config", action="append", default=[], help="NAME=ATTACH FLAGS (repeat)")
ap.add_argument("--gpuprof-cpus", default=os.environ.get("GPUPROF_CPUS", ""))
ap.add_argument("--job-cpus", default="")
ap.add_argument("--job", default="", help="a job command line instead of spec_pipeline.py; {out}: a directory for its truth files")
ap.add_argument("--truth", default="truth.jsonl", help="with --job: the truth file in {out} whose steps are counted")
ap.add_argument("--save", default="", help="write each configuration's steady on/off ratios here (JSON), for overhead_pool.py")
ap.add_argument("--learn", type=float, default=3.0, help="seconds of each on window left out of 'steady' (gpuprof finding the steps)")
ap.add_argument("--witness", default="", help="a command ({out}: a file) writing a line a piece of fixed CPU work, "
                "its first field the piece's end in monotonic ns (witness.c): a covariate gpuprof cannot move")
ap.add_argument("--torchprof", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "torchprof.py"),
                help="the wrapper that @torchprof runs the job under")
ap.add_argument("--tp-timeout", type=float, default=120, help="seconds a torch.profiler stop may take (a start: 30 at most)")
ap.add_argument("--tp-last", action="store_true", help="run the @torchprof windows after all the others' alternations: "
                "once started, CUPTI stays in the process, so the windows before any start are free of it")
ap.add_argument("--until", type=float, default=0, help="seconds from the start that the windows must end by (a timeout's): "
                "with --tp-last, alternations of the other configurations are dropped where running them would leave "
                "one of the @torchprof windows no time (--tp-reserve a window beyond its length)")
ap.add_argument("--tp-reserve", type=float, default=15, help="with --until: seconds a @torchprof window is given beyond its length "
                "(its start and stop)")
ap.add_argument("--tp-seconds", type=float, default=0, help="the @torchprof windows' length (default: the on windows'): "
                "torch.profiler's stop processes what it kept, 2.5-7 s a second of window on the H200 host, training stalled")
ap.add_argument("--logs", default="", help="keep each on window's gpuprof log (GPUPROF_LOG=debug) and summary in this directory")
args, extra = ap.parse_known_args()
configs = [(c.split("=", 1)[0], c.split("=", 1)[1].split() if "=" in c else []) for c in args.config]
if not configs:
    configs = [(" ".join(extra) or "default", extra)]
secs, LEARN = args.seconds, args.learn
if args.logs:
    os.makedirs(args.logs, exist_ok=True)
off_secs = args.off_seconds or secs
tp_secs = args.tp_seconds or secs
tick = os.sysconf("SC_CLK_TCK")
tmp = tempfile.mkdtemp()
truth = os.path.join(tmp, args.truth)
windows = 2 * args.alternations * len(configs) + 1
steps = int(windows * secs * 150) + 2000
pin_job = ["taskset", "-c", args.job_cpus] if args.job_cpus else []
pin_gpuprof = ["taskset", "-c", args.gpuprof_cpus] if args.gpuprof_cpus else []
if args.job:
    job = shlex.split(args.job.replace("{out}", tmp))
else:
    job = [sys.executable, os.path.join(args.workload, "spec_pipeline.py"), "--mode", args.mode,
           "--steps", str(steps), "--truth", truth, "--start-delay", "0"]
TP = any(f == ["@torchprof"] for _, f in configs)
tp_status = os.path.join(tmp, "torchprof.status")
if TP:
    # python [options] SCRIPT ARGS -> python [options] torchprof.py --status F SCRIPT ARGS
    i = 1
    while i < len(job) and job[i].startswith("-"):
        if job[i] in ("-m", "-c"):
            sys.exit("@torchprof runs a script file: not python -m or -c")
        i += 1
    if not os.path.basename(job[0]).startswith("python") or i >= len(job):
        sys.exit(f"@torchprof needs a job run as `python SCRIPT ...`: {' '.join(job)}")
    job = job[:i] + [args.torchprof, "--status", tp_status] + job[i:]
witness_file = os.path.join(tmp, "witness.txt")
witness = subprocess.Popen(shlex.split(args.witness.replace("{out}", witness_file)), start_new_session=True) if args.witness else None
# Its own process group: the processes it starts end with it.
pipe = subprocess.Popen(pin_job + job, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)


def lines():
    try:
        with open(truth) as f:
            return sum(1 for _ in f)
    except FileNotFoundError:
        return 0


def ranks():
    """The job's processes with a rank in their environment (RANK=, as
    torchrun sets it)."""
    out = []
    for p in benchlib.tree(pipe.pid):
        try:
            with open(f"/proc/{p}/environ", "rb") as f:
                if any(v.startswith(b"RANK=") for v in f.read().split(b"\0")):
                    out.append(p)
        except OSError:
            pass
    return out


def proc_stat(pid):
    """One process's user and system CPU seconds so far, and its threads'
    context switches (voluntary and not); None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        switches = 0
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/status") as f:
                for line in f:
                    if line.startswith(("voluntary_ctxt_switches:", "nonvoluntary_ctxt_switches:")):
                        switches += int(line.split()[1])
    except OSError:
        return None
    return int(fields[11]) / tick, int(fields[12]) / tick, switches


def thread_times(pid):
    """One process's threads' (user, system) CPU seconds so far, summed by
    thread name (threads of one name, a pool's, together); {} once gone."""
    out = {}
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/stat") as f:
                head, _, rest = f.read().rpartition(")")
            fields = rest.split()
            comm = head.partition("(")[2]
            u, st = out.get(comm, (0.0, 0.0))
            out[comm] = (u + int(fields[11]) / tick, st + int(fields[12]) / tick)
    except OSError:
        return {}
    return out


def job_cpu():
    """The job's user and system CPU seconds so far, and its threads'
    context switches (all its threads and processes running now)."""
    user = sys_ = 0.0
    switches = 0
    for pid in benchlib.tree(pipe.pid):
        st = proc_stat(pid)
        if st:
            user, sys_, switches = user + st[0], sys_ + st[1], switches + st[2]
    return user, sys_, switches


def truth_proc():
    """The process that has the truth file open (the rank that logs it)."""
    want = os.path.realpath(truth)
    for pid in benchlib.tree(pipe.pid):
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                if os.readlink(f"/proc/{pid}/fd/{fd}") == want:
                    return pid
        except OSError:
            continue
    return None


def proc_cpu(pid):
    """(monotonic ns, CPU seconds, context switches) of one process so far."""
    now = time.monotonic_ns()
    st = proc_stat(pid) if pid is not None else None
    if not st:
        return now, float("nan"), float("nan")
    return now, st[0] + st[1], st[2]


def cpu_list(spec):
    """CPUs of a taskset list ("0-15,24"); empty: all of this machine's."""
    if not spec:
        return set(range(os.cpu_count()))
    out = set()
    for part in spec.split(","):
        a, _, b = part.partition("-")
        out |= set(range(int(a), int(b or a) + 1))
    return out


JOB_CPUS = cpu_list(args.job_cpus)


def job_steal():
    """(monotonic ns, seconds of steal so far summed over the job's CPUs):
    time the hypervisor ran something else while one of them wanted to
    run, which gpuprof (on CPUs of its own) cannot move."""
    return time.monotonic_ns(), benchlib.steal_ticks(JOB_CPUS) / tick


def children_cpu():
    r = os.times()
    return r.children_user + r.children_system


class Stop(Exception):
    pass


def stop(signum, frame):
    raise Stop


# A SIGTERM (timeout(1) running out) ends the alternation: the windows done
# are measured, and the job (its own session: timeout does not reach it)
# is killed rather than left running.
signal.signal(signal.SIGTERM, stop)
print(f"{windows} windows of {secs:g} s (off {off_secs:g} s), ~{(windows // 2) * (secs + 1) + (windows // 2 + 1) * off_secs:.0f} s once the job has trained 100 steps",
      file=sys.stderr, flush=True)
deadline = time.monotonic() + 120
while lines() < 100 and time.monotonic() < deadline and pipe.poll() is None:
    time.sleep(0.2)
if pipe.poll() is not None:
    sys.exit(f"the job exited ({pipe.returncode}) before it trained 100 steps: {' '.join(job)}")

spans = []  # (config or "off", start_ns, end_ns, job (user, sys) seconds, gpuprof cpu seconds, truth process samples)
ends = []  # each window's nominal end: an "on" window runs on while gpuprof detaches
steals = []  # each window's job_steal() at the start and end of its steady part
thread_samples = []  # each window's thread_times(truth process) at the same two instants
logger = truth_proc()


gp_windows = []  # per gpuprof window: what it says of itself (bench)
tp_windows = []  # per torchprof window: its start and stop
current = None  # the gpuprof running now, for a Stop to end


class Poller:
    """Sleeps in slices, reading a process's peak RSS (VmHWM) as it goes:
    the last value read before it exits is its peak. It also keeps the
    process's CPU time (user + system, all threads) at each read, so that
    a window's cost can be set beside what gpuprof was doing when."""
    def __init__(self, pid):
        self.pid, self.hwm, self.cpu = pid, None, []

    def read(self):
        if self.pid is not None:
            v = benchlib.vm_hwm_kib(self.pid)
            if v is not None:
                self.hwm = v
            try:
                with open(f"/proc/{self.pid}/stat") as f:
                    st = f.read().rsplit(")", 1)[1].split()
                self.cpu.append((time.monotonic_ns(), (int(st[11]) + int(st[12])) / os.sysconf("SC_CLK_TCK")))
            except (OSError, IndexError, ValueError):
                pass

    def until(self, t):
        while True:
            self.read()
            left = t - time.monotonic()
            if left <= 0:
                return
            time.sleep(min(left, 0.05))


def tp_lines():
    try:
        with open(tp_status) as f:
            return [l.split() for l in f]
    except OSError:
        return []


def tp_signal(sig, want, timeout):
    """Signal the job's process (torchprof.py) and wait for its status line
    of kind want: (the line's fields, or None by the timeout)."""
    n = len(tp_lines())
    os.kill(pipe.pid, sig)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and pipe.poll() is None:
        got = tp_lines()[n:]
        for l in got:
            if l[0] in (want, "error"):
                return l
        time.sleep(0.02)
    return None


def window(name, flags):
    global current
    secs_ = off_secs if flags is None else tp_secs if flags == ["@torchprof"] else secs
    t0, c0, g0 = time.monotonic_ns(), job_cpu(), children_cpu()
    r = None
    poll = Poller(None)
    gp = tp = None
    freeze = None
    if flags == ["@idle"]:
        r = subprocess.Popen(pin_gpuprof + ["sleep", str(secs_)])
    elif flags == ["@torchprof"]:
        tp = dict(index=len(spans), name=name, t0=t0)
        l = tp_signal(signal.SIGUSR1, "started", min(30, args.tp_timeout))
        tp["start_s"] = (int(l[2]) - t0) / 1e9 if l and l[0] == "started" else float("nan")
        if not l or l[0] != "started":
            print(f"{name}: torch.profiler did not start: {l}", file=sys.stderr, flush=True)
    elif flags is not None:
        target = ["--pid", str(pipe.pid)]
        if "@ranks" in flags:
            # The job's ranks alone, not its launcher or engines.
            target = [a for p in ranks() for a in ("--pid", str(p))]
            flags = [f for f in flags if f != "@ranks"]
        binary = next((f.removeprefix("@bin=") for f in flags if f.startswith("@bin=")), args.gpuprof)
        freeze = next((float(f.removeprefix("@freeze=")) for f in flags if f.startswith("@freeze=")), None)
        env = dict(f.removeprefix("@env=").split("=", 1) for f in flags if f.startswith("@env="))
        nice = [a for f in flags if f.startswith("@nice=") for a in ("nice", "-n", f.removeprefix("@nice="))]
        flags = [f for f in flags if not f.startswith(("@bin=", "@freeze=", "@env=", "@nice="))]
        # -d a backstop: the window ends it with a SIGINT at its nominal
        # end, so that the detach is timed from there.
        base = os.path.join(args.logs or tmp, f"w{len(spans) + 1:03d}-{name}")
        cmd = pin_gpuprof + nice + [binary, "attach"] + target + ["-d", f"{secs_ + 120:g}s", "-q", "--jsonl", base + ".jsonl"] + flags
        gp = dict(index=len(spans), name=name, t0=t0, jsonl=base + ".jsonl", out=base + ".out", log=base + ".log",
                  wall0=time.time())
        with open(base + ".out", "w") as out, open(base + ".log", "w") as log:
            r = subprocess.Popen(cmd, stdout=out, stderr=log, text=True, env=dict(os.environ, GPUPROF_LOG="debug", **env))
        current = r
        poll = Poller(r.pid)
    # The truth process's CPU and switches over the steady part of the
    # window: from --learn s in (an off window: 0.5 s) to 0.5 s before its end.
    samples, steal, threads = [], [], []
    if gp is not None and freeze is not None:
        poll.until(t0 / 1e9 + freeze)
        if r.poll() is None:
            r.send_signal(signal.SIGSTOP)
    for at in (LEARN if flags is not None else 0.5, secs_ - 0.5):
        poll.until(t0 / 1e9 + at)
        samples.append(proc_cpu(logger))
        steal.append(job_steal())
        threads.append(thread_times(logger) if logger is not None else {})
    steals.append(steal)
    thread_samples.append(threads[-2:])
    b = None
    if tp is not None:
        poll.until(t0 / 1e9 + secs_)
        tp["sent"] = time.monotonic_ns()
        l = tp_signal(signal.SIGUSR2, "stopped", args.tp_timeout)
        if l and l[0] == "stopped":
            # The window ends as the stop returns, its events counted.
            b = int(l[3])  # stopped T_SIGNAL T_STOPPED T_DONE EVENTS
            tp.update(stop_s=(b - tp["sent"]) / 1e9, stop_call_s=(int(l[2]) - tp["sent"]) / 1e9, events=int(l[4]))
        else:
            print(f"{name}: torch.profiler did not stop within {args.tp_timeout:g} s: {l}", file=sys.stderr, flush=True)
            tp.update(stop_s=float("nan"), stop_call_s=float("nan"), events=None)
    elif gp is not None:
        poll.until(t0 / 1e9 + secs_)
        gp["sigint"] = time.monotonic_ns()
        if r.poll() is None:
            if freeze is not None:
                r.send_signal(signal.SIGCONT)
            r.send_signal(signal.SIGINT)
        deadline = time.monotonic() + 60
        while r.poll() is None and time.monotonic() < deadline:
            poll.read()
            time.sleep(0.02)
        if r.poll() is None:
            r.kill()
        r.wait()
        current = None
        gp.update(exit=time.monotonic_ns(), rc=r.returncode, hwm_kib=poll.hwm,
                  cpu_series=[((t - t0) / 1e9, c) for t, c in poll.cpu])
        if r.returncode != 0:
            # Say why, and go on: one failed window is not the whole run.
            try:
                err = open(gp["log"], errors="replace").read()
            except OSError:
                err = ""
            print(f"{name}: exit {r.returncode}: {err.strip()[-400:]}", file=sys.stderr, flush=True)
    elif r is None:
        time.sleep(max(0.0, t0 / 1e9 + secs_ - time.monotonic_ns() / 1e9))
    else:
        _, err = r.communicate()
        if r.returncode != 0:
            print(f"{name}: exit {r.returncode}: {(err or '').strip()[-400:]}", file=sys.stderr, flush=True)
    c1 = job_cpu()
    b = b or time.monotonic_ns()
    spans.append((name, t0, b, (c1[0] - c0[0], c1[1] - c0[1], c1[2] - c0[2]), children_cpu() - g0, samples))
    if gp is not None:
        gp["cpu_s"] = spans[-1][4]
        gp_windows.append(gp)
    if tp is not None:
        tp_windows.append(tp)
    ends.append(t0 + int(secs_ * 1e9))
    print(f"window {len(spans)}/{windows} ({name}) done", file=sys.stderr, flush=True)


def alternation_s(group, tp):
    """What one alternation of group takes, at most: an off window before
    each on one, a torch.profiler window given --tp-reserve beyond its
    length, another on window 1 s for its attach and detach."""
    return len(group) * (off_secs + (tp_secs + args.tp_reserve if tp else secs + 1))


try:
    last = [c for c in configs if c[1] == ["@torchprof"]] if args.tp_last else []
    for group in ([c for c in configs if c not in last], last):
        for i in range(args.alternations if group else 0):
            # One torch.profiler alternation is kept room for: those after
            # it run as time allows, the timeout ending them.
            tp_left = alternation_s(last, True) + off_secs
            if args.until and group is not last and i > 0 and \
                    time.monotonic() + alternation_s(group, False) + tp_left > T_START + args.until:
                print(f"alternations {i + 1}-{args.alternations} of {', '.join(n for n, _ in group)} dropped: "
                      f"a torch.profiler window needs the {tp_left:.0f} s left", file=sys.stderr, flush=True)
                break
            for name, flags in group:
                window("off", None)
                window(name, flags)
    window("off", None)
except Stop:
    print(f"stopped after {len(spans)} of {windows} windows: measuring those", file=sys.stderr, flush=True)
    while spans and spans[-1][0] != "off":
        spans.pop()  # an "on" window is measured against the "off" after it
        ends.pop()
        steals.pop()
        thread_samples.pop()
    if current is not None and current.poll() is None:
        current.send_signal(signal.SIGINT)
        try:
            current.wait(10)
        except subprocess.TimeoutExpired:
            current.kill()
finally:
    for p in (pipe, witness):
        if p:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()

rows = [json.loads(l) for l in open(truth)]
witness_ends = []
if witness:
    with open(witness_file) as f:
        witness_ends = sorted(int(l.split()[0]) for l in f if l.strip())


def witness_period(a, b):
    """The witness's time a piece over [a, b) (ns), nan without one."""
    w = benchlib.step_rate(witness_ends[bisect.bisect_left(witness_ends, a):bisect.bisect_left(witness_ends, b)])
    return 1 / w if w > 0 else float("nan")


FIELDS = ("period", "step_time", "compute_time", "data_time", "dispatch_wait")


def field_medians(sel):
    """Medians of the truth's fields over a window's steps; period is the
    time from one step's start to the next's."""
    out = {}
    for f in FIELDS[1:]:
        xs = [r[f] for r in sel if isinstance(r.get(f), (int, float))]
        if xs:
            out[f] = statistics.median(xs)
    starts = sorted(r["t_start_ns"] for r in sel if "t_start_ns" in r)
    if len(starts) > 2:
        out["period"] = statistics.median(b - a for a, b in zip(starts, starts[1:])) / 1e9
    return out


def cpu_available(steal):
    """The share of the job's CPUs' time the hypervisor left them over a
    window's steady part (1 less their steal), nan where unknown."""
    (t0, s0), (t1, s1) = steal
    if t1 <= t0:
        return float("nan")
    return 1 - (s1 - s0) / ((t1 - t0) / 1e9 * len(JOB_CPUS))


def measure(skip_on):
    stats = []
    for (name, a, b, cpu, own, _), end, steal in zip(spans, ends, steals):
        # Up to the window's nominal end: an "on" window's gpuprof then
        # detaches, which is no steady state (it is reported apart).
        a, b = a + int((skip_on if name != "off" else 0.5) * 1e9), min(b, end) - 500_000_000
        sel = [r for r in rows if a <= r["t_end_ns"] < b]
        rate = benchlib.step_rate([r["t_end_ns"] for r in sel])
        st = statistics.median(r["step_time"] for r in sel) if sel else float("nan")
        compute = [r["compute_time"] for r in sel if isinstance(r.get("compute_time"), (int, float))]
        stats.append((name, rate, st, field_medians(sel), statistics.fmean(compute) if compute else float("nan"),
                      witness_period(a, b), cpu_available(steal)))
    return stats


def measure_full():
    """Each window from its start to its end (gpuprof's exit, the stop of
    torch.profiler returning): the steps from the last one ending before
    the start to the first one ending at or after the end, over the time
    between those two ends, so that a stall at either end (an attach, a
    stop's processing) counts in the window it falls in. measure()'s
    shape, the rate alone."""
    ends_ = sorted(r["t_end_ns"] for r in rows if "t_end_ns" in r)
    stats = []
    nan = float("nan")
    for (name, a, b, *_) in spans:
        i = bisect.bisect_left(ends_, a) - 1
        j = bisect.bisect_left(ends_, b)
        if j == len(ends_):
            j -= 1  # the last window: the job was ended with it
        rate = (j - i) / ((ends_[j] - ends_[i]) / 1e9) if i >= 0 and j < len(ends_) and j > i else nan
        stats.append((name, rate, nan, {}, nan, nan, nan))
    return stats


def on_off(stats, name, value):
    """Each of name's windows against the mean of the "off" windows on
    either side: (ratio, difference) of value(window), where all three
    have one."""
    out = []
    for i, x in enumerate(stats):
        if x[0] != name or i == 0 or i + 1 >= len(stats):
            continue
        v, l, r = value(x), value(stats[i - 1]), value(stats[i + 1])
        if v is None or l is None or r is None or l + r == 0:
            continue
        out.append((v / ((l + r) / 2), v - (l + r) / 2))
    return out


def field_ratios(stats, name, field):
    """Each on window's truth field median on/off, and the difference in
    seconds."""
    return on_off(stats, name, lambda w: w[3].get(field))


def ratios(stats, name, col):
    return [x for x, _ in on_off(stats, name, lambda w: w[col])]


def print_floor(stats, col, what):
    """The on/off statistic taken between "off" windows (each against its
    "off" neighbours two windows away): the run's noise floor."""
    offs = [x for x in stats if x[0] == "off"]
    null = [offs[i][col] / ((offs[i - 1][col] + offs[i + 1][col]) / 2) for i in range(1, len(offs) - 1)]
    null = [x for x in null if x == x]
    if len(null) >= 3:
        lo, hi = ci(null)
        print(f"  noise floor{what} (off vs off): median {pct(statistics.median(null))}, 95% CI {pct(lo)}..{pct(hi)}")
    return null


for (name, a, b, (user, sys_, switches), own, _), (_, rate, st, *_, avail) in zip(spans, measure(0.5)):
    wall = (b - a) / 1e9
    gp = f"  gpuprof cpu {own / wall * 100:5.1f}%" if name != "off" else ""
    print(f"{name:>10s} {rate:8.2f} steps/s  median step_time {st * 1e3:7.3f} ms  "
          f"job cpu user {user / wall:5.2f} sys {sys_ / wall:5.2f} cores  {switches / wall:8.0f} switches/s  "
          f"steal {(1 - avail) * 100:5.2f}%{gp}")
KIND = {n: ("idle" if f == ["@idle"] else "torchprof" if f == ["@torchprof"] else "gpuprof") for n, f in configs}
detach = [(b - end) / 1e9 for (name, a, b, *_), end in zip(spans, ends) if KIND.get(name) == "gpuprof"]
if detach:
    print(f"gpuprof exited {statistics.median(detach):.2f} s after an on window's end (median; max {max(detach):.2f} s): "
          f"its attach and detach, not measured")
saved = {}
bench = {"ratios": {}, "vs_idle": {}, "floor": {}, "kind": KIND, "seconds": secs, "off_seconds": off_secs}
steady_periods = []
for label, skip in (("whole", 0.5), ("steady", LEARN), ("full", 0)):
    if label != "full" and secs - skip < 1.5:
        continue
    stats = measure_full() if label == "full" else measure(skip)
    # Each window's period, mean compute time and witness period, for the
    # fits at equal compute time and witness speed (ovhstats.py).
    periods = [(w[0], 1 / w[1] if w[1] > 0 else float("nan"), w[4], w[5], w[6]) for w in stats]
    if label == "steady":
        steady_periods = periods
    for name, flags in configs:
        rr, sr = ratios(stats, name, 1), ratios(stats, name, 2)
        if not rr:
            continue  # stopped before its first window
        r, s = statistics.median(rr), statistics.median(sr)
        lo, hi = ci(rr)
        print(f"mode {args.mode} {name} [{label}]: step rate on/off {r:.4f} ({pct(r)}, 95% CI {pct(lo)}..{pct(hi)}, "
              f"mean {pct(statistics.mean(rr))}, n={len(rr)}); step_time on/off {s:.4f} ({pct(s)})")
        print(f"  each {' '.join(pct(x) for x in rr)}")
        bench["ratios"].setdefault(label, {})[name] = rr
        if label == "steady":
            # Where a slower step's time went: each field of the truth log
            # on/off, and by how much in ms (the period is the step rate's
            # inverse; step_time + the get and data phase make it up).
            parts = []
            for f in FIELDS:
                fr = field_ratios(stats, name, f)
                if len(fr) < 2:
                    continue
                xs = [x for x, _ in fr]
                flo, fhi = ci(xs)
                parts.append(f"{f} {pct(statistics.median(xs))} ({pct(flo)}..{pct(fhi)}, "
                             f"{statistics.median(d for _, d in fr) * 1e3:+.3f} ms)")
            if parts:
                print(f"  fields on/off: " + "; ".join(parts))
            saved[name] = {"rate": rr, "fields": {f: [x for x, _ in field_ratios(stats, name, f)] for f in FIELDS}}
            for col in COVARIATES:
                line = adjusted_line(f"  {name}", pairs(periods, name, col), col)
                if line:
                    print(line)
    if label == "steady":
        for col in COVARIATES:
            line = adjusted_line("  noise floor (off vs off)", floor_pairs(periods, col), col)
            if line:
                print(line)
        offs = [x for x in stats if x[0] == "off"]
        saved["@floor"] = {"rate": [offs[i][1] / ((offs[i - 1][1] + offs[i + 1][1]) / 2) for i in range(1, len(offs) - 1)]}
    # Against the @idle control: each alternation's on/off ratio over the
    # control's in the same alternation, which takes out whatever the
    # alternation itself does (a window that runs a command, the "steady"
    # part being the end of a window) along with drift.
    control = next((n for n, f in configs if f == ["@idle"]), None)
    if control:
        base = ratios(stats, control, 1)
        for name, flags in configs:
            if name == control:
                continue
            rel = [x / y for x, y in zip(ratios(stats, name, 1), base)]
            if not rel:
                continue
            lo, hi = ci(rel)
            bench["vs_idle"].setdefault(label, {})[name] = rel
            print(f"mode {args.mode} {name} vs {control} [{label}]: {pct(statistics.median(rel))} "
                  f"(95% CI {pct(lo)}..{pct(hi)}, mean {pct(statistics.mean(rel))}, n={len(rel)})")
    # The same statistic between "off" windows (each against its "off"
    # neighbours two windows away) is the noise floor of this run.
    bench["floor"][label] = print_floor(stats, 1, "")


def per_step():
    """Each window's truth process CPU ms and context switches per step it
    logged, over the steady part of the window."""
    out = []
    for name, a, b, cpu, own, samples in spans:
        (t0, c0, s0), (t1, c1, s1) = samples
        n = sum(1 for r in rows if t0 <= r["t_end_ns"] < t1)
        out.append((name, (c1 - c0) * 1e3 / n if n else float("nan"), (s1 - s0) / n if n else float("nan")))
    return out


def print_threads():
    """The truth process's CPU a step by thread name, user and system apart,
    each configuration's on windows against the off windows either side
    (ms a step, median over its windows). A uprobe's trap and BPF program
    are system time of the thread that hit it, and a thread spinning in a
    CUDA sync is user time: a thread's system time a step moves with the
    probes it pays for, and little with the job's pace."""
    per = []  # (name, {comm: (user ms, sys ms) a step})
    for (name, _, _, _, _, samples), pair in zip(spans, thread_samples):
        t0, t1 = samples[0][0], samples[1][0]
        n = sum(1 for r in rows if t0 <= r["t_end_ns"] < t1)
        a, b = pair if len(pair) == 2 else ({}, {})
        per.append((name, {c: ((b[c][0] - a[c][0]) * 1e3 / n, (b[c][1] - a[c][1]) * 1e3 / n) for c in b if c in a and n}))
    # The threads that take 0.05 ms a step or more in some window, busiest first.
    peak = {c: max(sum(d.get(c, (0, 0))) for _, d in per) for _, d0 in per for c in d0}
    comms = sorted((c for c in peak if peak[c] >= 0.05), key=lambda c: -peak[c])[:8]
    if not comms:
        return
    print("  by thread (ms a step on less off, median over windows; user, then system):")
    for name, flags in configs:
        for c in comms:
            parts = []
            for k, what in ((0, "user"), (1, "sys")):
                ds = []
                for i, (n, d) in enumerate(per):
                    if n != name or i == 0 or i + 1 >= len(per):
                        continue
                    l, r = per[i - 1][1].get(c), per[i + 1][1].get(c)
                    if c in d and l and r:
                        ds.append(d[c][k] - (l[k] + r[k]) / 2)
                if len(ds) >= 2:
                    lo, hi = ci(ds)
                    parts.append(f"{what} {statistics.median(ds):+.3f} ({lo:+.3f}..{hi:+.3f})")
            if parts:
                print(f"    {name} {c}: " + ", ".join(parts))


if logger is None:
    print(f"  no process of the job had {truth} open: its CPU a step is not measured")
elif LEARN < secs - 0.5:
    stats = per_step()
    print(f"the truth process (PID {logger}), steady part of each window:")
    for name, flags in configs:
        for col, what in ((1, "CPU a step"), (2, "context switches a step")):
            rr = [x for x in ratios(stats, name, col) if x == x]
            if not rr:
                continue
            lo, hi = ci(rr)
            print(f"  {name} {what} on/off {pct(statistics.median(rr))} (95% CI {pct(lo)}..{pct(hi)}, n={len(rr)}); "
                  f"each {' '.join(pct(x) for x in rr)}")
    for col, what in ((1, "CPU a step"), (2, "context switches a step")):
        print_floor(stats, col, f" of {what}")
    print("  " + "  ".join(f"{n} {c:.2f} ms {w:.0f} sw" for n, c, w in stats))
    print_threads()


def profile(name, slope=None, col=2, bin_s=1.0):
    """name's step rate in bins of bin_s from each of its windows' start,
    over the mean rate of the off windows either side, median over its
    windows: where in a window the cost is (the attach and learning, the
    sampled on phases, the steady state between them). With slope, each
    bin is taken at the off windows' covariate (col, as the fit's:
    ovhstats.py): a bin's rate moves ~4% with the job's drift, more than
    the cost of any one second."""
    stats = measure(0.5)
    bins = {}
    for i, (n, a, b, *_) in enumerate(spans):
        if n != name or i == 0 or i + 1 >= len(spans):
            continue
        l, r = stats[i - 1], stats[i + 1]
        off = (l[1] + r[1]) / 2
        off_cov = (l[col + 2] + r[col + 2]) / 2
        if not (off == off and off_cov == off_cov):
            continue
        sel = [r for r in rows if a <= r["t_end_ns"] < ends[i]]
        for k in range(int((ends[i] - a) / 1e9 / bin_s)):
            lo, hi = a + int(k * bin_s * 1e9), a + int((k + 1) * bin_s * 1e9)
            in_bin = [r for r in sel if lo <= r["t_end_ns"] < hi]
            rate = benchlib.step_rate([r["t_end_ns"] for r in in_bin])
            if rate != rate:
                continue
            x = rate / off
            if slope is not None:
                if col == 2:
                    cov = statistics.fmean(r.get("compute_time", off_cov) for r in in_bin)
                elif col == 3:
                    cov = witness_period(lo, hi)
                else:
                    cov = stats[i][col + 2]  # steal: sampled a window at a time
                # y = a + b x at the bin: its period ratio less b x.
                x = 1 / (1 / x - slope * (cov / off_cov - 1))
            if x == x:
                bins.setdefault(k, []).append(x)
    return [(k * bin_s, statistics.median(v), len(v)) for k, v in sorted(bins.items())]


for name, flags in configs:
    prof = profile(name)
    if prof:
        print(f"{name}: step rate on/off by second since attach (median over windows): " +
              " ".join(f"{t:.0f}s {pct(x)}" for t, x, _ in prof))
    for col, what in COVARIATES.items():
        f = fit(pairs(steady_periods, name, col))
        prof = profile(name, f[1], col) if f else None
        if prof:
            print(f"{name}: the same at equal {what} (slope {f[1]:.2f}): " +
                  " ".join(f"{t:.0f}s {pct(x)}" for t, x, _ in prof))
def gp_report():
    """What each gpuprof window says of itself, and its steps against the
    truth's; each torch.profiler window's start and stop. Into bench."""
    gps, pooled = [], {}
    for w in gp_windows:
        if w["index"] >= len(spans):
            continue  # stopped: not measured
        end_wall = w["wall0"] + (w["sigint"] - w["t0"]) / 1e9
        first, last, took = benchlib.log_times(w["log"], before=end_wall)
        ev = benchlib.events(w["out"])
        ours = benchlib.read_jsonl(w["jsonl"])
        cmp_, fp = benchlib.compare(rows, ours)
        for f in fp:
            pooled.setdefault(w["name"], {}).setdefault(f, []).extend(fp[f])
        wall = (w["exit"] - w["t0"]) / 1e9
        first_step = min((o["t_end_ns"] for o in ours), default=None)
        g = dict(name=w["name"], index=w["index"], rc=w["rc"], cpu_pct=100 * w["cpu_s"] / wall if wall > 0 else None,
                 rss_mib=w["hwm_kib"] / 1024 if w["hwm_kib"] else None,
                 attach_s=last - w["wall0"] if last else None,
                 first_attached_s=first - w["wall0"] if first else None,
                 first_step_s=(first_step - w["t0"]) / 1e9 if first_step else None,
                 detach_s=(w["exit"] - w["sigint"]) / 1e9, session_detach_s=took,
                 delivered=ev[0] if ev else None, lost=ev[1] if ev else None, compare=cmp_,
                 cpu_series=w.get("cpu_series"))
        gps.append(g)
        f = cmp_["fields"]
        fmt = lambda v, u="": "-" if v is None else f"{v:.2f}{u}"
        print(f"  gpuprof window {w['index'] + 1} ({w['name']}): exit {w['rc']}, cpu {fmt(g['cpu_pct'], '%')}, "
              f"peak RSS {fmt(g['rss_mib'], ' MiB')}, attach {fmt(g['attach_s'], ' s')} "
              f"(first step {fmt(g['first_step_s'], ' s')}), detach {fmt(g['detach_s'], ' s')} "
              f"(session {fmt(took, ' s')}), events {ev[0] if ev else '-'} delivered {ev[1] if ev else '-'} lost; "
              f"steps {cmp_['ours']}, matched {cmp_['matched']} of {cmp_['truth_in_span']} truth, one to one {cmp_['one_to_one']}; " +
              ", ".join(f"{k} err {v['abs_err_pct']:.1f}% (medians {v['med_diff_pct']:+.1f}%)" for k, v in f.items()))
    tps = [w for w in tp_windows if w["index"] < len(spans)]
    for w in tps:
        print(f"  torch.profiler window {w['index'] + 1} ({w['name']}): start {w['start_s']:.2f} s, "
              f"stop {w['stop_s']:.2f} s (the stop call {w['stop_call_s']:.2f} s), {w['events']} events")
    return dict(gpuprof=gps, torchprof=[{k: v for k, v in w.items() if k != "t0"} for w in tps],
                fields_pooled={n: benchlib.field_errors(fp) for n, fp in pooled.items()})


if gp_windows or tp_windows:
    print("each on window, as the profiler saw it:")
    bench.update(gp_report())
if args.save:
    with open(args.save, "w") as f:
        json.dump({"mode": args.mode, "bench": bench, "seconds": secs, "off_seconds": off_secs, "learn": LEARN, "configs": saved,
                   # Enough to measure the run again another way: each
                   # window's name, start, end and nominal end, and the
                   # end of each step logged.
                   "windows": [(n, a, b, e) for (n, a, b, *_), e in zip(spans, ends)],
                   # The steady part's (name, period, mean compute time,
                   # witness period, the job's CPUs' share left by the
                   # hypervisor) of each window, for overhead_pool.py.
                   "steady_periods": steady_periods,
                   "step_ends": [r["t_end_ns"] for r in rows if "t_end_ns" in r],
                   "step_compute": [r.get("compute_time") for r in rows if "t_end_ns" in r],
                   "witness_ends": witness_ends}, f)
