#!/usr/bin/env bash
# On the GPU host: what do native anchors cost a DDP rank? Runs
# multi_pipeline.py in compute mode and attaches in turn, ATTACH_S (default
# 15; 60 holds a launch on phase and the steady state around it) each with
# 10 s off between: the configurations given (NAME=FLAGS; @bin=PATH picks
# another binary), each with --probe-stats. Prints each window's median
# step time from the truth log and, per configuration, the text mapping of
# the interpreter (FilePmdMapped, AnonHugePages) in the truth process.
#
#   OUT=DIR testdata/gpuhost/anchorcost.sh NAME=FLAGS...
set -u
out=${OUT:?OUT: where the results go}
here=$(dirname "$0")
mkdir -p "$out"
job=$(mktemp -d)
python3 "$here/multi_pipeline.py" --out "$job" --mode compute --ranks 2 --steps 100000 >"$out/job.log" 2>&1 &
jpid=$!
for _ in $(seq 240); do
	kill -0 "$jpid" 2>/dev/null || break
	[ -f "$job/truth-rank0.jsonl" ] && [ "$(wc -l <"$job/truth-rank0.jsonl")" -ge 300 ] && break
	sleep 0.5
done
rank0=$(for p in /proc/[0-9]*; do ls -l "$p/fd" 2>/dev/null | grep -q "$job/truth-rank0.jsonl" && basename "$p"; done | head -1)
echo "job $jpid, rank 0 PID $rank0"
# Huge-page text in the rank, all mappings together.
maps() {
	awk -v tag="$1" '/^FilePmdMapped:/ {f += $2} /^AnonHugePages:/ {a += $2}
		END {printf "  %s: FilePmdMapped %d kB, AnonHugePages %d kB\n", tag, f, a}' "/proc/$rank0/smaps"
}
# The truth log's clock (CLOCK_MONOTONIC), not date's.
mono() { python3 -c 'import time; print(time.monotonic_ns())'; }
mark() { echo "$1 $(mono)" >>"$out/marks.txt"; }
# config NAME=FLAGS sets name, flags and g, the binary (@bin=PATH in FLAGS).
config() {
	name=${1%%=*}
	flags=${1#*=}
	g=bin/gpuprof
	if [[ $flags == *@bin=* ]]; then
		g=${flags##*@bin=}
		g=${g%% *}
		flags=${flags/@bin=$g/}
	fi
}
maps before
sleep 10
for c in "$@"; do
	config "$c"
	mark "on-$name"
	GPUPROF_LOG=DEBUG "$g" attach --pid "$jpid" -d "${ATTACH_S:-15}s" --probe-stats $flags >"$out/$name.out" 2>"$out/$name.log" &
	sleep 10
	echo "== $name ($g $flags)"
	maps during
	wait $!
	mark "off-$name"
	grep -A14 "BPF programs" "$out/$name.out"
	sleep 10
done
mark end
kill "$jpid"
sleep 2
pkill -f multi_pipeline.py
python3 - "$job/truth-rank0.jsonl" "$out/marks.txt" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
marks = [(l.split()[0], int(l.split()[1])) for l in open(sys.argv[2])]
prev = ("off-start", rows[0]["t_end_ns"])
for name, t in marks:
    st = [r["step_time"] + r["dispatch_wait"] for r in rows if prev[1] + 2e9 < r["t_end_ns"] <= t]
    ct = [r["compute_time"] for r in rows if prev[1] + 2e9 < r["t_end_ns"] <= t]
    if st:
        print(f"{prev[0]:>16}: {len(st):4d} steps, period median {statistics.median(st)*1e3:.3f} ms, compute {statistics.median(ct)*1e3:.3f} ms")
    prev = (name, t)
PY

# The interpreter alone: a CPU loop beside a thread waiting in a
# multiprocessing get (so that the anchors go in), its rate a half second.
cat >/tmp/pyloop.py <<'PY'
import multiprocessing as mp, sys, threading, time
q = mp.Queue()
threading.Thread(target=q.get, daemon=True).start()
end = time.monotonic() + float(sys.argv[2])
with open(sys.argv[1], "w") as out:
    while time.monotonic() < end:
        t, n = time.monotonic_ns(), 0
        while time.monotonic_ns() - t < 5e8:
            for i in range(1000):
                n += i * i % 7
        out.write(f"{t} {n}\n")
        out.flush()
PY
python3 /tmp/pyloop.py "$out/pyloop.txt" $((8 + 20 * $#)) &
lpid=$!
: >"$out/loopmarks.txt"
sleep 8
for c in "$@"; do
	config "$c"
	echo "on-$name $(mono)" >>"$out/loopmarks.txt"
	GPUPROF_LOG=DEBUG "$g" attach -q --pid "$lpid" -d 10s $flags >/dev/null 2>"$out/$name.loop.log"
	echo "off-$name $(mono)" >>"$out/loopmarks.txt"
	sleep 10
done
wait $lpid
tar -C "$out" --remove-files -czf "$out/logs.tgz" $(cd "$out" && ls | grep -v -e '^pyloop.txt$' -e 'marks.txt$')
python3 - "$out/pyloop.txt" "$out/loopmarks.txt" <<'PY'
import statistics, sys
rows = [tuple(map(int, l.split())) for l in open(sys.argv[1])]
marks = [(l.split()[0], int(l.split()[1])) for l in open(sys.argv[2])]
prev = ("off-start", rows[0][0])
for name, t in marks + [("end", rows[-1][0] + 1)]:
    n = [r[1] for r in rows if prev[1] + 1e9 < r[0] and r[0] + 5e8 <= t]
    if n:
        print(f"loop {prev[0]:>16}: {len(n):3d} half-seconds, median {statistics.median(n)} iterations")
    prev = (name, t)
PY
