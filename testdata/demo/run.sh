#!/usr/bin/env bash
# make demo: start the demo trainer on the stand-in CUDA libraries, attach
# gpuprof to it while it runs, and print gpuprof's numbers beside the
# trainer's own log. Files land in demo-out/: the steps, the HTML report
# (report.html) and the Perfetto timeline (timeline.json).
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ "$(id -u)" != 0 ]; then
	echo "make demo: gpuprof loads eBPF programs and needs root: run sudo make demo" >&2
	exit 1
fi
out=demo-out
mkdir -p "$out"
rm -f "$out"/*.jsonl
testdata/build/demo-trainer --steps 400 --start-delay 0.5 --truth "$out/demo-truth.jsonl" >"$out/demo.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
echo "demo trainer running as PID $pid; attaching gpuprof until it exits"
bin/gpuprof attach --pid "$pid" --jsonl "$out/gpuprof-steps.jsonl" --html "$out/report.html" --trace "$out/timeline.json" |
	tee "$out/summary.txt"
wait "$pid"
trap - EXIT
echo
echo "gpuprof's steps against the demo's own log ($out/demo-truth.jsonl):"
bin/gpuprof compare --truth "$out/demo-truth.jsonl" --steps "$out/gpuprof-steps.jsonl"
