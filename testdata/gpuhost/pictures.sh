#!/usr/bin/env bash
# On the GPU host, for issue 28: the pictures of real runs. Each job runs
# with gpuprof attached and every output on (--jsonl, --record, --html,
# --trace); then each is compared with the job's own log. Jobs:
#   spec/data, spec/compute: shared/workloads/spec_pipeline.py, attached
#     before its first step until it exits;
#   hf/data, hf/compute, lightning/data, lightning/compute: the Hugging
#     Face Trainer and a Lightning loop (shapes/), attached after their
#     tenth step for ATTACH_S;
#   top: gpuprof top on spec_pipeline.py --mode infer in tmux (where tmux
#     is installed), the screen captured, then q.
#   OUT=$OUT bash testdata/gpuhost/pictures.sh [JOB...]
# $OUT/pictures-JOB.tgz holds each job's files; $OUT/pictures.txt what it printed.
set -u
out=${OUT:?OUT: where the results go}
g=${GPUPROF:-bin/gpuprof}
w=shared/workloads
here=$(cd "$(dirname "$0")" && pwd)
attach_s=${ATTACH_S:-15}
jobs=${*:-spec/data spec/compute hf/data hf/compute top}
work=/tmp/pictures
rm -rf "$work"; mkdir -p "$work" "$out"
outputs() { echo --jsonl "$1/steps.jsonl" --record "$1/trace.jsonl.gz" --html "$1/report.html" --trace "$1/timeline.json"; }
{
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; uname -r; date -u
for job in $jobs; do
	kind=${job%/*} mode=${job#*/} d=$work/${kind}-${mode}
	mkdir -p "$d"
	case $kind in
	spec)
		PYTHONUNBUFFERED=1 python3 $w/spec_pipeline.py --mode "$mode" --steps 900 --truth "$d/truth.jsonl" \
			--start-delay 4 >"$d/job.log" 2>&1 &
		pid=$!
		sleep 2.5
		echo "== $job (pid $pid, attached before its first step)"
		timeout 120 "$g" attach --pid "$pid" --batch-size 4 $(outputs "$d") >"$d/summary.txt" 2>"$d/attach.log"
		echo "attach exit $?"
		wait $pid
		;;
	hf | lightning)
		script=$here/shapes/hf_trainer.py
		[ "$kind" = lightning ] && script=$here/shapes/lightning_loop.py
		PYTHONUNBUFFERED=1 setsid python3 "$script" --mode "$mode" --truth "$d/truth.jsonl" >"$d/job.log" 2>&1 &
		pid=$!
		for _ in $(seq 600); do
			[ -f "$d/truth.jsonl" ] && [ "$(wc -l <"$d/truth.jsonl")" -ge 10 ] && break
			kill -0 $pid 2>/dev/null || break
			sleep 0.1
		done
		echo "== $job (pid $pid, attached after step $(wc -l <"$d/truth.jsonl" 2>/dev/null))"
		timeout $((attach_s + 30)) "$g" attach --pid "$pid" --children -d "${attach_s}s" $(outputs "$d") >"$d/summary.txt" 2>"$d/attach.log"
		echo "attach exit $?"
		kill -TERM -- -$pid 2>/dev/null; sleep 0.5; kill -KILL -- -$pid 2>/dev/null; wait $pid 2>/dev/null
		;;
	top)
		if ! command -v tmux >/dev/null; then echo "== top: no tmux on this host"; continue; fi
		PYTHONUNBUFFERED=1 python3 $w/spec_pipeline.py --mode infer --steps 700 --truth "$d/truth.jsonl" \
			--start-delay 4 >"$d/job.log" 2>&1 &
		pid=$!
		sleep 2.5
		echo "== top (pid $pid)"
		# stdout on the pane: top falls back to the live line without a terminal
		tmux -L pictures new-session -d -s top -x 132 -y 44 "$g top --pid $pid --jsonl $d/steps.jsonl 2>$d/attach.log; echo EXITED \$?; sleep 60"
		sleep 14
		tmux -L pictures capture-pane -p -t top >"$d/screen-132x44.txt"
		tmux -L pictures resize-window -t top -x 90 -y 30; sleep 2
		tmux -L pictures capture-pane -p -t top >"$d/screen-90x30.txt"
		tmux -L pictures send-keys -t top q; sleep 4
		tmux -L pictures capture-pane -p -S -3000 -t top >"$d/summary.txt"
		tmux -L pictures kill-server
		cat "$d/screen-132x44.txt"
		wait $pid
		;;
	esac
	[ -s "$d/truth.jsonl" ] && "$g" compare --truth "$d/truth.jsonl" --steps "$d/steps.jsonl" 2>&1 | tail -8
	grep -A3 "^bottleneck" "$d/summary.txt" | head -4
	grep "^report:\|^timeline:" "$d/summary.txt"
	ls -la "$d" | awk '{print $5, $9}' | tail -n +2
done
} 2>&1 | tee "$out/pictures.txt"
for d in "$work"/*/; do # one file a job: the device tool brings back 8 of at most 16 MiB
	tar -C "$work" -czf "$out/pictures-$(basename "$d").tgz" "$(basename "$d")"
done
