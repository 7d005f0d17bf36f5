#!/usr/bin/env bash
# On a host of two GPUs: run multi_pipeline.py's shapes, attach gpuprof,
# record the event traces, and compare each rank's steps with that rank's
# own log (gpuprof compare --rank).
#
#   testdata/gpuhost/validate_ranks.sh OUT_DIR [RUN...]
#
# RUNs: ddp (two DDP ranks, compute mode, attach --gpus all started first),
# slow (the same with rank 1 doing 8 ms more CPU work a step: the
# straggler), one (an engine and one trainer, --pid LAUNCHER --children),
# data (two DDP ranks, data mode). Traces and logs written here are what
# testdata/traces/h200x2-ranks replays in CI (TestReplayRanks).
# GPUPROF_FLAGS adds attach flags to every run (e.g. a --probe).
set -u
out=$1
shift
runs=${*:-ddp slow one data}
g=${GPUPROF:-bin/gpuprof}
p=testdata/gpuhost/multi_pipeline.py
mkdir -p "$out"
for run in $runs; do
	d=$out/$run
	mkdir -p "$d"
	case $run in
	ddp) flags="--ranks 2 --steps 500 --mode compute" attach="--gpus all" ;;
	slow) flags="--ranks 2 --steps 500 --mode compute --slow-rank 1 --slow-ms 8" attach="--gpus all" ;;
	one) flags="--ranks 1 --steps 500 --mode compute" attach="--children --pid" ;;
	data) flags="--ranks 2 --steps 200 --mode data" attach="--children --pid" ;;
	*) echo "unknown run $run" >&2; exit 2 ;;
	esac
	common="${GPUPROF_FLAGS:-} --batch-size 4 --probe-stats --jsonl $d/steps.jsonl --record $d/trace.jsonl.gz"
	if [ "$attach" = "--gpus all" ]; then
		# gpuprof first: it waits for the ranks to open their contexts.
		timeout 200 "$g" attach --gpus all $common >"$d/summary.txt" 2>"$d/attach.log" &
		ap=$!
		sleep 1
		PYTHONUNBUFFERED=1 timeout 180 python3 $p --out "$d" --start-delay 3 $flags >"$d/pipeline.log" 2>&1
		wait $ap
	else
		PYTHONUNBUFFERED=1 timeout 180 python3 $p --out "$d" --start-delay 10 $flags >"$d/pipeline.log" 2>&1 &
		lp=$!
		sleep 7 # torch imported, the models on their GPUs: attach during the start delay
		timeout 200 "$g" attach $attach $lp $common >"$d/summary.txt" 2>"$d/attach.log"
		wait $lp
	fi
	echo "==== $run ($flags)"
	grep -E "boundary|exited|WARN|error" "$d/attach.log" | head -8
	sed -n '/^job:/,/^job bottleneck/p' "$d/summary.txt"
	for t in "$d"/truth-rank*.jsonl; do
		r=${t##*rank}
		r=${r%.jsonl}
		echo "-- rank $r"
		"$g" compare --truth "$t" --steps "$d/steps.jsonl" --rank "$r"
	done
done
