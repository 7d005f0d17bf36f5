"""Medians and means of each run's fields, gpuprof's steps against the
loop's own truth, matched by step end (each truth step to the gpuprof step
ending nearest it, within a tenth of the step), as a Markdown table.

  python3 table.py SHAPES_DIR [STEPS_NAME]

SHAPES_DIR holds run.sh's folders (truth.jsonl, steps.jsonl or the file
STEPS_NAME, summary.txt).
"""
import bisect, json, os, statistics, sys

FIELDS = ["step_time", "data_time", "compute_time", "dispatch_wait"]


def rows(path):
    with open(path) as f:
        return [json.loads(l) for l in f if l.strip()]


def main():
    top = sys.argv[1]
    name = sys.argv[2] if len(sys.argv) > 2 else "steps.jsonl"
    print("| run | steps | matched | " + " | ".join(f"{f} truth / gpuprof median (mean diff)" for f in FIELDS) + " | verdict |")
    print("|---" * (len(FIELDS) + 4) + "|")
    for run in sorted(os.listdir(top)):
        d = os.path.join(top, run)
        if not os.path.exists(os.path.join(d, name)) or not os.path.getsize(os.path.join(d, "truth.jsonl")):
            continue
        truth, ours = rows(os.path.join(d, "truth.jsonl")), rows(os.path.join(d, name))
        ours.sort(key=lambda s: s["t_end_ns"])
        ends = [s["t_end_ns"] for s in ours]
        pairs, used = [], set()
        for t in truth:
            i = bisect.bisect_left(ends, t["t_end_ns"])
            best = min((j for j in (i - 1, i) if 0 <= j < len(ours)), key=lambda j: abs(ends[j] - t["t_end_ns"]), default=None)
            if best is None or best in used or abs(ends[best] - t["t_end_ns"]) > 0.1 * (t["t_end_ns"] - t["t_start_ns"]):
                continue
            used.add(best)
            pairs.append((t, ours[best]))
        pairs = pairs[5:]  # warm-up, as gpuprof compare
        cells = []
        for f in FIELDS:
            both = [(t[f], o[f]) for t, o in pairs if t.get(f) is not None and o.get(f) is not None]
            if not both:
                cells.append("-")
                continue
            tm, om = statistics.median(x for x, _ in both), statistics.median(y for _, y in both)
            ta, oa = statistics.mean(x for x, _ in both), statistics.mean(y for _, y in both)
            diff = lambda a, b: f"{100 * (b - a) / a:+.1f}%" if a else "n/a"
            cells.append(f"{tm * 1e3:.2f} / {om * 1e3:.2f} ms ({diff(ta, oa)})")
        verdict = ""
        summary = os.path.join(d, "summary.txt") if name == "steps.jsonl" else os.path.join(d, name[:-len(".jsonl")] + ".summary.txt")
        if os.path.exists(summary):
            for line in open(summary):
                if line.startswith("bottleneck:"):
                    verdict = line.split(":", 1)[1].strip()
                    break
        print(f"| {run} | {len(ours)} | {len(pairs) + 5} | " + " | ".join(cells) + f" | {verdict} |")


main()
