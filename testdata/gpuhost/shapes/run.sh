#!/usr/bin/env bash
# On the GPU host: each loop shape of issue 25 (loops.py, hf_trainer.py,
# lightning_loop.py), attached after its tenth step with no flag naming
# the job's code (attach --children -d ATTACH_S), its trace recorded, then
# compared with the loop's own truth. One device call runs them all:
#
#   OUT=$OUT testdata/gpuhost/shapes/run.sh [RUN...]
#
# RUN is SCRIPT/MODE (sync/data, accum/infer, hf/compute, ...); default all.
# $OUT/shapes.tgz holds each run's truth, steps, trace, summary and log;
# $OUT/shapes.txt what it printed. GPUPROF is the binary (bin/gpuprof).
set -u
out=${OUT:?OUT: where the results go}
g=${GPUPROF:-bin/gpuprof}
here=$(cd "$(dirname "$0")" && pwd)
attach_s=${ATTACH_S:-12}
runs=${*:-sync/data sync/compute accum/data accum/compute accum/infer polled/infer polled/compute hf/data hf/compute lightning/data lightning/compute}
work=/tmp/shapes
rm -rf "$work"; mkdir -p "$work" "$out"
for run in $runs; do
	shape=${run%/*} mode=${run#*/} d=$work/${shape}-${mode}
	mkdir -p "$d"
	case $shape in
	hf) cmd=(python3 "$here/hf_trainer.py" --mode "$mode" --truth "$d/truth.jsonl") ;;
	lightning) cmd=(python3 "$here/lightning_loop.py" --mode "$mode" --truth "$d/truth.jsonl") ;;
	*) cmd=(python3 "$here/loops.py" --shape "$shape" --mode "$mode" --seconds 120 --truth "$d/truth.jsonl") ;;
	esac
	PYTHONUNBUFFERED=1 setsid "${cmd[@]}" >"$d/job.log" 2>&1 &
	pid=$!
	for _ in $(seq 600); do
		[ -f "$d/truth.jsonl" ] && [ "$(wc -l <"$d/truth.jsonl")" -ge 10 ] && break
		kill -0 $pid 2>/dev/null || break
		sleep 0.1
	done
	echo "== $run (pid $pid, attached after step $(wc -l <"$d/truth.jsonl" 2>/dev/null))"
	timeout $((attach_s + 30)) "$g" attach --pid "$pid" --children -d "${attach_s}s" --jsonl "$d/steps.jsonl" \
		--record "$d/trace.jsonl.gz" >"$d/summary.txt" 2>"$d/attach.log"
	echo "attach exit $?" >>"$d/attach.log"
	kill -TERM -- -$pid 2>/dev/null; sleep 0.5; kill -KILL -- -$pid 2>/dev/null; wait $pid 2>/dev/null
	"$g" compare --truth "$d/truth.jsonl" --steps "$d/steps.jsonl" 2>&1 | tee "$d/compare.txt"
	grep -A3 "^bottleneck" "$d/summary.txt" | head -4
	tail -3 "$d/job.log"
done 2>&1 | tee "$out/shapes.txt"
tar -C /tmp -czf "$out/shapes.tgz" shapes
