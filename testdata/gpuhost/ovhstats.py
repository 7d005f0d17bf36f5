"""Statistics shared by overhead.py and overhead_pool.py.

The step rate of the two-rank job moves by ~3.5% from one window to the
next with gpuprof off (an engine sharing GPU 0 with rank 0; the ranks
joined by DDP's all-reduce), so a plain on/off ratio needs ~100 windows
to bound a 1% cost. Nearly all of that movement is the GPU's: the step's
compute time (CUDA events on the trainer's stream, in the truth log) moves
with it. gpuprof's costs are CPU time on the job's threads: the data
phase, the gets, the launches that run ahead of the GPU. So alongside the
plain ratio each on window's period is also compared with its off
neighbours' at equal compute time: a least-squares fit of

    period_on / period_off - 1  =  a + b * (compute_on / compute_off - 1)

over the windows, where a is gpuprof's cost at equal compute time (its
95% interval bootstrapped over windows) and b how the period follows the
compute time. The fit is given beside the compute time's own on/off
ratio: a cost that reached the GPU's work (a launch late enough to leave
the GPU idle) would show there, and the adjustment would not count it.
On the H200 pair one did: the GPU is ~60% busy, its work paced by the
threads that launch it, and compute time rose ~2% on/off.

So a second covariate is one gpuprof cannot move: a witness (witness.c)
doing fixed CPU work on a CPU of its own, whose period is the time the
host takes for that work. The host is a VM, and the autograd thread's CPU
time for the same work a step moved by 30% from window to window with
gpuprof off: the host's CPU speed is the likelier source of the job's
drift. The same fit, with the witness's period as x.

A third is the steal time of the job's own CPUs (/proc/stat): the time
the hypervisor ran something else while those CPUs had work. The witness
sees the host from one CPU apart; steal is charged where the job runs.
The fit is the same, with the share of the job's CPUs' time left to them
(1 less the steal) as x.
"""
import random
import statistics


def bootstrap(xs, stat=statistics.median, n=2000):
    """stat of n resamples of xs, sorted (seeded: a run's numbers repeat)."""
    rnd = random.Random(1)
    return sorted(stat(rnd.choices(xs, k=len(xs))) for _ in range(n))


def ci(xs, stat=statistics.median, n=2000):
    """95% bootstrap interval of stat(xs)."""
    vals = bootstrap(xs, stat, n)
    return vals[int(0.025 * n)], vals[int(0.975 * n)]


def pct(x):
    """A ratio as a signed percentage change."""
    return f"{100 * (x - 1):+.2f}%"


def _ok(w, col):
    return all(isinstance(v, float) and v == v and v > 0 for v in (w[1], w[col]))


def _against(w, l, r, col):
    return (w[1], w[col]), ((l[1] + r[1]) / 2, (l[col] + r[col]) / 2)


def pairs(windows, name, col=2):
    """Each of name's windows against the mean of the "off" windows on
    either side: ((period, covariate) of it, (period, covariate) of the off
    mean). windows: (name, period s, covariate...) in run order, col the
    covariate's index (2: mean compute time, 3: the witness's period, 4:
    the share of the job's CPUs' time the hypervisor left them); a
    window with either missing (nan or None) is left out."""
    out = []
    for i, w in enumerate(windows):
        if w[0] != name or i == 0 or i + 1 >= len(windows) or len(w) <= col:
            continue
        l, r = windows[i - 1], windows[i + 1]
        if l[0] == r[0] == "off" and _ok(w, col) and _ok(l, col) and _ok(r, col):
            out.append(_against(w, l, r, col))
    return out


def floor_pairs(windows, col=2):
    """The same for each "off" window against the "off" windows either
    side of it (two windows away): the estimator's noise floor."""
    offs = [w for w in windows if w[0] == "off" and len(w) > col and _ok(w, col)]
    return [_against(offs[i], offs[i - 1], offs[i + 1], col) for i in range(1, len(offs) - 1)]


def fit(ps):
    """Least squares of y = a + b x over the pairs, y the period's and x
    the covariate's relative change on/off (see the module's comment);
    (a, b), or None with fewer than three pairs or no spread in x."""
    if len(ps) < 3:
        return None
    ys = [p / po - 1 for (p, _), (po, _) in ps]
    xs = [c / co - 1 for (_, c), (_, co) in ps]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx == 0:
        return None
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    return my - b * mx, b


def adjusted(ps, n=2000):
    """gpuprof's cost at equal compute time as a step rate ratio on/off
    (1 / (1 + a)), its 95% bootstrap interval over the pairs, and the
    slope b; None where fit cannot."""
    f = fit(ps)
    if f is None:
        return None
    rnd = random.Random(1)
    boots = sorted(1 / (1 + g[0]) for g in (fit(rnd.choices(ps, k=len(ps))) for _ in range(n)) if g)
    return 1 / (1 + f[0]), (boots[int(0.025 * len(boots))], boots[int(0.975 * len(boots))]), f[1]


COVARIATES = {2: "compute time", 3: "witness speed", 4: "steal on the job's CPUs"}


def adjusted_line(label, ps, col=2):
    """One printed line for adjusted(ps), or None."""
    r = adjusted(ps)
    if r is None:
        return None
    rate, (lo, hi), b = r
    return f"{label}: step rate on/off at equal {COVARIATES[col]} {pct(rate)} (95% CI {pct(lo)}..{pct(hi)}, n={len(ps)}, slope {b:.2f})"
