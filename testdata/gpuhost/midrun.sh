#!/usr/bin/env bash
# On the GPU host, for issue 29: attached mid-run, are torch's kernels
# named (their launches' call sites), and what does a CUDA-graph loop give?
#   OUT=$OUT bash testdata/gpuhost/midrun.sh
set -u
out=${OUT:?OUT: where the results go}
g=${GPUPROF:-bin/gpuprof}
w=shared/workloads
here=$(cd "$(dirname "$0")" && pwd)
work=/tmp/midrun
rm -rf "$work"; mkdir -p "$work"
waitlines() { for _ in $(seq 600); do [ -f "$1" ] && [ "$(wc -l <"$1")" -ge "$2" ] && return; sleep 0.1; done; }
{
date -u
# 1. the compute-bound pipeline, attached 12 s in (its kernels registered long before)
d=$work/spec; mkdir -p $d
PYTHONUNBUFFERED=1 python3 $w/spec_pipeline.py --mode compute --steps 3000 --truth $d/truth.jsonl >$d/job.log 2>&1 &
pid=$!
waitlines $d/truth.jsonl 300
echo "== spec compute, attached after step $(wc -l <$d/truth.jsonl)"
$g attach --pid $pid -d 8s --launch-duty 1 --batch-size 4 --jsonl $d/steps.jsonl -q >$d/summary.txt 2>$d/attach.log
kill $pid; wait $pid 2>/dev/null
sed -n '/most launched kernels/,/^bottleneck/p' $d/summary.txt
# 2. the HF Trainer, attached after step 30
d=$work/hf; mkdir -p $d
PYTHONUNBUFFERED=1 setsid python3 $here/shapes/hf_trainer.py --mode compute --truth $d/truth.jsonl >$d/job.log 2>&1 &
pid=$!
waitlines $d/truth.jsonl 30
echo "== hf compute, attached after step $(wc -l <$d/truth.jsonl)"
$g attach --pid $pid --children -d 8s --launch-duty 1 --jsonl $d/steps.jsonl -q >$d/summary.txt 2>$d/attach.log
kill -TERM -- -$pid 2>/dev/null; sleep 0.5; kill -KILL -- -$pid 2>/dev/null; wait $pid 2>/dev/null
sed -n '/most launched kernels/,/^bottleneck/p' $d/summary.txt
# 3. a CUDA-graph loop, attached after step 100
d=$work/graph; mkdir -p $d
PYTHONUNBUFFERED=1 python3 $here/graphloop.py --steps 100000 --truth $d/truth.jsonl >$d/job.log 2>&1 &
pid=$!
waitlines $d/truth.jsonl 100
echo "== graph loop, attached after step $(wc -l <$d/truth.jsonl)"
$g attach --pid $pid -d 8s --jsonl $d/steps.jsonl --record $d/trace.jsonl.gz -q >$d/summary.txt 2>$d/attach.log
kill $pid; wait $pid 2>/dev/null
grep -E '^gpuprof|^step boundary|step_time|compute_time|launches|^bottleneck' $d/summary.txt | head -12
sed -n '/most launched kernels/,/^bottleneck/p' $d/summary.txt | head -8
$g compare --truth $d/truth.jsonl --steps $d/steps.jsonl 2>&1 | head -8
tail -3 $d/job.log
} 2>&1 | tee "$out/midrun.txt"
tar -C /tmp -czf "$out/midrun.tgz" midrun
