"""Pieces shared by overhead.py and bench.py: lining gpuprof's --jsonl steps
up with a job's truth log (as validate.Align and validate.Compare do, in
Go: `gpuprof compare`), and reading what gpuprof says of itself (its
summary's events lost, its debug log's attach and detach, its peak RSS),
and the job's and the host's CPU use from /proc.
"""
import bisect, collections, datetime, json, os, re, statistics

FIELDS = ("step_time", "data_time", "compute_time")


def read_jsonl(path):
    out = []
    try:
        with open(path) as f:
            for line in f:
                line = line.strip()
                if line:
                    try:
                        out.append(json.loads(line))
                    except ValueError:
                        pass  # a line cut by a kill
    except OSError:
        pass
    return out


# The job's own phases a step, from its truth log where it writes them:
# what a slow run spent its time on (the data pipeline's engines and its
# trainer share the host's memory and the GIL; pool is how full the
# sample pool stood, 512 at most, which throttles the engines).
PHASES = ("data_time", "compute_time", "dispatch_wait", "infer_batch_time", "pool")


def phase_medians(truth):
    """Median of each of PHASES the truth rows carry, times in ms."""
    out = {}
    for f in PHASES:
        xs = [r[f] for r in truth if isinstance(r.get(f), (int, float))]
        if xs:
            m = statistics.median(xs)
            out[f] = m if f == "pool" else 1e3 * m
    return out


def step_rate(ends):
    """Steps a second from their end times (ns, in order): the count of
    steps less one over the time from the first's end to the last's (nan
    with fewer than three): no rounding to whole steps."""
    return (len(ends) - 1) / ((ends[-1] - ends[0]) / 1e9) if len(ends) > 2 else float("nan")


def _within(truth, ours):
    """Our steps ending inside the truth's span (its first start to its last
    end, with half a step of slack), as validate.within."""
    starts = [t["t_start_ns"] for t in truth if t.get("t_start_ns")]
    if not truth or not starts:
        return ours
    first = min(starts)
    last = max(truth, key=lambda t: t["t_end_ns"])
    hi = last["t_end_ns"] + (last["t_end_ns"] - last.get("t_start_ns", last["t_end_ns"])) / 2
    return [o for o in ours if first <= o["t_end_ns"] <= hi]


def align(truth, ours):
    """(truth, ours) pairs: each of our steps with the unused truth step
    whose end is nearest to its end, within half that step's length
    (validate.Align); and whether the match is one to one (every step of
    ours matched, the truth steps matched consecutive)."""
    ours = _within(truth, sorted(ours, key=lambda o: o["t_end_ns"]))
    t = sorted(truth, key=lambda r: r["t_end_ns"])
    ends = [r["t_end_ns"] for r in t]
    used = [False] * len(t)
    out = []
    for o in ours:
        i = bisect.bisect_left(ends, o["t_end_ns"])
        best = None
        for j in (i - 1, i):
            if 0 <= j < len(t) and not used[j]:
                if best is None or abs(ends[j] - o["t_end_ns"]) < abs(ends[best] - o["t_end_ns"]):
                    best = j
        if best is None:
            continue
        s = t[best].get("t_start_ns", 0)
        length = ends[best] - s if 0 < s <= ends[best] else o["t_end_ns"] - o.get("t_start_ns", o["t_end_ns"])
        if abs(ends[best] - o["t_end_ns"]) <= length / 2:
            used[best] = True
            out.append((t[best], o))
    one = len(out) == len(ours) and len(out) > 0 and all(
        b[0].get("step", 0) == a[0].get("step", 0) + 1 for a, b in zip(out, out[1:]))
    return out, len(ours), one


def field_pairs(pairs, skip=5):
    """{field: [(truth, ours)]} over matched steps numbered skip or later."""
    out = {f: [] for f in FIELDS}
    for t, o in pairs:
        if t.get("step", skip) < skip:
            continue
        for f in FIELDS:
            a, b = t.get(f), o.get(f)
            if isinstance(a, (int, float)) and isinstance(b, (int, float)):
                out[f].append((a, b))
    return out


def field_errors(fp):
    """{field: {n, truth median, ours median, median |ours - truth| as % of
    the truth's median, the medians' difference as % of it}}."""
    out = {}
    for f, xs in fp.items():
        if not xs:
            continue
        mt = statistics.median(a for a, _ in xs)
        mo = statistics.median(b for _, b in xs)
        err = statistics.median(abs(b - a) for a, b in xs)
        out[f] = dict(n=len(xs), truth=mt, ours=mo,
                      abs_err_pct=100 * err / mt if mt > 0 else float("nan"),
                      med_diff_pct=100 * (mo - mt) / mt if mt > 0 else float("nan"))
    return out


def compare(truth, ours):
    """One run's or window's comparison: counts and field errors."""
    pairs, n, one = align(truth, ours)
    # The truth's steps from the first matched to the last: a step of
    # ours that merged two leaves one of them unmatched in there.
    lo = min((t["t_end_ns"] for t, _ in pairs), default=0)
    hi = max((t["t_end_ns"] for t, _ in pairs), default=-1)
    span = sum(1 for t in truth if lo <= t["t_end_ns"] <= hi)
    fp = field_pairs(pairs)
    return dict(ours=n, matched=len(pairs), one_to_one=one, truth_in_span=span,
                fields=field_errors(fp)), fp


LOST = re.compile(r"events: (\d+) delivered, (\d+) lost")


def events(summary_path):
    """(delivered, lost) from gpuprof's summary; None where it has none."""
    try:
        with open(summary_path) as f:
            m = LOST.findall(f.read())
    except OSError:
        return None
    if not m:
        return None
    return sum(int(a) for a, _ in m), sum(int(b) for _, b in m)


TIME = re.compile(r"^time=(\S+) ")
TOOK = re.compile(r"took=([0-9.]+)(ns|µs|us|ms|s)\b")
UNIT = {"ns": 1e-9, "µs": 1e-6, "us": 1e-6, "ms": 1e-3, "s": 1.0}


def log_times(log_path, before=None):
    """From gpuprof's GPUPROF_LOG=debug log: the wall time (epoch s) of its
    first and last "attached" line (probes attached to a file of the
    process), those before `before` (epoch s) alone, and the session's
    own detach time (its "detached ... took=")."""
    first = last = took = None
    try:
        f = open(log_path, errors="replace")
    except OSError:
        return first, last, took
    with f:
        for line in f:
            m = TIME.match(line)
            if not m:
                continue
            try:
                t = datetime.datetime.fromisoformat(m.group(1).replace("Z", "+00:00")).timestamp()
            except ValueError:
                continue
            if " msg=attached " in line and (before is None or t < before):
                first = t if first is None else first
                last = t
            elif " msg=detached " in line:
                k = TOOK.search(line)
                if k:
                    took = float(k.group(1)) * UNIT[k.group(2)]
    return first, last, took


def vm_hwm_kib(pid):
    """A process's peak resident set (VmHWM, KiB); None once it is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def self_cpu(pid, tick):
    """A process's own user + system CPU seconds (not its children's)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / tick
    except (OSError, IndexError, ValueError):
        return None


def tree(pid):
    """pid and the processes under it."""
    out = [pid]
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as f:
                for child in f.read().split():
                    out += tree(int(child))
    except OSError:
        pass
    return out


def tree_usage(pids, tick):
    """The CPU seconds (user + system) and page faults (minor, major) so
    far of the processes pids, summed; a process gone counts nothing."""
    cpu, minflt, majflt = 0.0, 0, 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        cpu += (int(fields[11]) + int(fields[12])) / tick
        minflt, majflt = minflt + int(fields[7]), majflt + int(fields[9])
    return cpu, minflt, majflt


def steal_ticks(cpus=None):
    """The time (USER_HZ ticks) the hypervisor ran something else while
    one of these CPUs (None: any of this machine's) wanted to run, from
    /proc/stat: a run's noise that is the host's, which gpuprof cannot
    move."""
    total = 0
    with open("/proc/stat") as f:
        for line in f:
            head, *cols = line.split()
            if not head.startswith("cpu") or len(cols) < 8:
                continue
            n = head[3:]  # "": the line summing every CPU
            if (n == "") if cpus is None else (n.isdigit() and int(n) in cpus):
                total += int(cols[7])
    return total


POLICIES = {0: "normal", 1: "fifo", 2: "rr", 3: "batch", 5: "idle", 6: "deadline"}


def threads(pids):
    """Each thread of the processes pids: its name, scheduling policy,
    nice, allowed CPUs, NUMA memory nodes and context switches so far.
    What tells a run whose job was scheduled differently (a policy or an
    affinity inherited, threads crowding fewer CPUs) from one that was
    not."""
    out = []
    for pid in pids:
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tasks:
            base = f"/proc/{pid}/task/{tid}"
            try:
                with open(base + "/stat") as f:
                    head, rest = f.read().rsplit(")", 1)
                with open(base + "/status") as f:
                    status = dict(l.split(":", 1) for l in f.read().splitlines() if ":" in l)
            except OSError:
                continue
            fields = rest.split()
            out.append(dict(pid=pid, tid=int(tid), comm=head.split("(", 1)[1],
                            policy=POLICIES.get(int(fields[38]), fields[38]), nice=int(fields[16]),
                            cpu=int(fields[36]), cpus=status.get("Cpus_allowed_list", "").strip(),
                            mems=status.get("Mems_allowed_list", "").strip(),
                            vcsw=int(status.get("voluntary_ctxt_switches", 0)),
                            ncsw=int(status.get("nonvoluntary_ctxt_switches", 0))))
    return out


def threads_digest(ts):
    """threads' rows summed up: how many, their policies and allowed CPUs
    (each with a count) and their context switches."""
    count = lambda key: dict(sorted(collections.Counter(t[key] for t in ts).items()))
    return dict(threads=len(ts), policies=count("policy"), cpus=count("cpus"), mems=count("mems"),
                vcsw=sum(t["vcsw"] for t in ts), ncsw=sum(t["ncsw"] for t in ts),
                last_cpus=len({t["cpu"] for t in ts}))
