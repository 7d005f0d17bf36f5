#!/usr/bin/env bash
# On the GPU host: attach gpuprof to the workloads' spec_pipeline.py in each
# mode, record the event trace, and compare gpuprof's steps with the
# pipeline's own truth file.
#
#   testdata/gpuhost/validate.sh WORKLOAD_DIR OUT_DIR [MODES...]
#
# Traces and truth files written here are what testdata/traces/ replays in CI.
set -u
w=$1 out=$2
shift 2
modes=${*:-infer data compute balanced}
g=${GPUPROF:-bin/gpuprof}
mkdir -p "$out"
for mode in $modes; do
	case $mode in
	infer) steps=300 ;;
	*) steps=700 ;;
	esac
	PYTHONUNBUFFERED=1 python3 "$w/spec_pipeline.py" --mode "$mode" --steps "$steps" \
		--truth "$out/truth-$mode.jsonl" --start-delay 4 >"$out/pipeline-$mode.log" 2>&1 &
	pid=$!
	sleep 2.5 # torch imported and the models on the GPU: attach during the start delay
	"$g" probes --pid "$pid" >"$out/probes-$mode.txt" 2>&1
	"$g" attach --pid "$pid" --batch-size 4 --jsonl "$out/steps-$mode.jsonl" --record "$out/trace-$mode.jsonl.gz" \
		>"$out/summary-$mode.txt" 2>"$out/attach-$mode.log"
	echo "attach exit $?" >>"$out/attach-$mode.log"
	wait "$pid"
	echo "== $mode"
	"$g" compare --truth "$out/truth-$mode.jsonl" --steps "$out/steps-$mode.jsonl" | tee "$out/compare-$mode.txt"
	python3 "$w/summarize_truth.py" "$out/truth-$mode.jsonl" >"$out/truth-summary-$mode.txt"
done
