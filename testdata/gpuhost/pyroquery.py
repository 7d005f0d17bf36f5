"""Read back what a Pyroscope server holds of one service, through its
query API (no client library: the GPU host has none), and set it beside
the steps gpuprof wrote for the same run.

  python3 pyroquery.py URL SERVICE STEPS.jsonl > OUT.json

For each profile type: the total, the totals by phase and by wait_kind,
and the 40 function names with the most total value (a frame's value
counted once a stack). From the steps: the sums of their phases' fields.
"""
import json, sys, time, urllib.request

url, service, steps_path = sys.argv[1].rstrip("/"), sys.argv[2], sys.argv[3]
end = int(time.time() * 1000) + 60_000
start = end - 3_600_000


def call(method, body):
    req = urllib.request.Request(f"{url}/querier.v1.QuerierService/{method}", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.load(r)


def selector(**labels):
    parts = [f'service_name="{service}"'] + [f'{k}="{v}"' for k, v in labels.items()]
    return "{" + ",".join(parts) + "}"


def flame(type_id, **labels):
    return call("SelectMergeStacktraces", {"profile_typeID": type_id, "label_selector": selector(**labels),
                                           "start": start, "end": end, "format": 1}).get("flamegraph", {})


def totals_by_name(fg):
    """Each name's total: the sum over the flame graph's nodes of that name
    that have no ancestor of the same name (recursion counted once)."""
    names, levels = fg.get("names", []), fg.get("levels", [])
    out = {}
    # levels[i].values are quadruples (x offset delta, total, self, name index)
    spans = []  # per level: (start, end, name) of each node
    for li, lv in enumerate(levels):
        vals = [int(v) for v in lv.get("values", [])]
        x, row = 0, []
        for i in range(0, len(vals), 4):
            x += vals[i]
            total, name = vals[i + 1], names[vals[i + 3]]
            row.append((x, x + total, name))
            above = [n for lvl in spans for (a, b, n) in lvl if a <= x < b]
            if name not in above:
                out[name] = out.get(name, 0) + total
            x += total
        spans.append(row)
    return out


def label_values(name, type_id):
    r = call("LabelValues", {"name": name, "matchers": [selector()], "start": start, "end": end})
    return r.get("names", [])


result = {"service": service, "types": {}}
types = call("ProfileTypes", {"start": start, "end": end}).get("profileTypes", [])
for t in types:
    tid = t["ID"]
    fg = flame(tid)
    if not fg.get("total"):
        continue
    entry = {"total": int(fg["total"]), "by_phase": {}, "by_wait_kind": {}}
    for label, key in (("phase", "by_phase"), ("wait_kind", "by_wait_kind")):
        for v in label_values(label, tid):
            tot = int(flame(tid, **{label: v}).get("total", 0))
            if tot:
                entry[key][v] = tot
    names = totals_by_name(fg)
    entry["top_names"] = sorted(names.items(), key=lambda kv: -kv[1])[:40]
    result["types"][tid] = entry

sums = {}
n = 0
with open(steps_path) as f:
    for line in f:
        s = json.loads(line)
        n += 1
        for k in ("wall_time", "step_time", "data_time", "compute_time", "dispatch_wait", "sync_time", "copy_time",
                  "data_wait", "lock_wait", "gil_wait"):
            sums[k] = sums.get(k, 0.0) + float(s.get(k) or 0)
result["steps"] = {"n": n, "sums_s": sums}

# The step thread's time by phase: its waits (probed and off CPU) and its
# time on CPU outside them (on CPU inside a wait, a sync spinning, is
# labelled with the wait's kind); phases other than "other" are the step
# thread's alone. Beside it, the steps' phases: step_time leaves out
# dispatch_wait, and its compute is what data and sync leave.
CPU, WAIT = "process_cpu:cpu:nanoseconds:cpu:nanoseconds", "wait:wait:nanoseconds:wait:nanoseconds"
phases = ("dispatch_wait", "data", "sync", "compute")
wall = {}
for ph in phases:
    wall[ph] = int(flame(WAIT, phase=ph).get("total", 0)) + int(flame(CPU, phase=ph, wait_kind="").get("total", 0))
steps_ph = {"dispatch_wait": sums.get("dispatch_wait", 0) * 1e9, "data": sums.get("data_time", 0) * 1e9,
            "sync": sums.get("sync_time", 0) * 1e9}
steps_ph["compute"] = sums.get("step_time", 0) * 1e9 - steps_ph["data"] - steps_ph["sync"]
tw, ts = sum(wall.values()) or 1, sum(steps_ph.values()) or 1
result["step_thread"] = {
    "profiles_ns": wall, "steps_ns": steps_ph,
    "profiles_share": {k: round(v / tw, 4) for k, v in wall.items()},
    "steps_share": {k: round(v / ts, 4) for k, v in steps_ph.items()},
    "wait_by_kind_in_compute": {k: int(flame(WAIT, phase="compute", wait_kind=k).get("total", 0))
                                for k in label_values("wait_kind", WAIT)},
}
json.dump(result, sys.stdout, indent=1)
print()
