#!/usr/bin/env bash
# On the GPU host, after costsplit.sh: the launch-bound loop's first 10 s
# of an attach and the HF Trainer split by flags, with the job, gpuprof
# and a CPU-speed witness (witness.c) each on CPUs of their own, so that
# the host's drift can be taken out (overhead.py --witness).
#   OUT=$OUT GPUPROF=bin/gpuprof bash testdata/gpuhost/costsplit2.sh
set -u
out=${OUT:?OUT: where the results go}
g=${GPUPROF:-bin/gpuprof}
res=/tmp/costsplit2; rm -rf $res; mkdir -p $res
py=$(command -v python3)
here=$(cd "$(dirname "$0")" && pwd)
{ date -u; lscpu; for c in 0 7 8 13 15; do echo "cpu$c siblings $(cat /sys/devices/system/cpu/cpu$c/topology/thread_siblings_list)"; done; } >$res/env.txt 2>&1
gcc -O2 -o /tmp/witness $here/witness.c
pin=(--job-cpus 0-7 --gpuprof-cpus 8-13 --witness "taskset -c 15 /tmp/witness {out}")
export GPUPROF_LOG=info
timeout -s TERM -k 20 235 $py testdata/gpuhost/overhead.py . $g launchbound 7 10 --off-seconds 4 --learn 3 "${pin[@]}" \
  --job "$py testdata/gpuhost/launchbound.py --out {out}" --truth truth.jsonl \
  --config gpuprof= --config idle=@idle \
  --save $res/launchbound.json --logs $res/launchbound-logs >$res/launchbound.txt 2>&1
timeout -s TERM -k 20 200 $py testdata/gpuhost/overhead.py . $g hf 3 8 --off-seconds 4 --learn 2.67 "${pin[@]}" \
  --job "$py testdata/gpuhost/shapes/hf_trainer.py --mode compute --truth {out}/truth.jsonl" --truth truth.jsonl \
  --config default= --config nonvml=--no-nvml --config nolaunch=--no-launches --config idle=@idle \
  --save $res/hf.json --logs $res/hf-logs >$res/hf.txt 2>&1
tar czf $out/costsplit2.tgz -C /tmp costsplit2
grep -h "^mode" $res/launchbound.txt $res/hf.txt | head -60
