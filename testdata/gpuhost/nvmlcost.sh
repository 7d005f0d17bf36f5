#!/usr/bin/env bash
# On the GPU host, after costsplit2.sh found the HF Trainer's steady cost
# with NVML on and none without: which part of the NVML reading it is
# (the round's rate, GPM), the same pinning as costsplit2.sh. CONFIGS
# replaces the configurations (overhead.py --config flags).
#   OUT=$OUT GPUPROF=bin/gpuprof bash testdata/gpuhost/nvmlcost.sh
set -u
out=${OUT:?OUT: where the results go}
g=${GPUPROF:-bin/gpuprof}
res=/tmp/nvmlcost; rm -rf $res; mkdir -p $res
py=$(command -v python3)
cfg=(--config default= --config nogpm="--nvml-gpm-interval 0" --config slow="--nvml-interval 1s" --config nonvml=--no-nvml)
[ -n "${CONFIGS:-}" ] && eval "cfg=($CONFIGS)"
timeout -s TERM -k 20 190 $py testdata/gpuhost/overhead.py . $g hf ${ALT:-2} 8 --off-seconds 4 --learn 2.67 \
  --job-cpus 0-7 --gpuprof-cpus 8-13 \
  --job "$py testdata/gpuhost/shapes/hf_trainer.py --mode compute --truth {out}/truth.jsonl" --truth truth.jsonl \
  "${cfg[@]}" \
  --save $res/hf.json --logs $res/hf-logs >$res/hf.txt 2>&1
tar czf $out/nvmlcost.tgz -C /tmp nvmlcost
grep -h "^mode" $res/hf.txt | grep -v "vs idle"
