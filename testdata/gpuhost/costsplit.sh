#!/usr/bin/env bash
# On the GPU host, for issue 29's open costs: where the HF Trainer's cost
# under gpuprof comes from (two builds in turn: GPUPROF and OLD, with
# gpuprof's own CPU and heap profiles and debug logs), and the launch-bound
# loop's first 10 s of an attach over more alternations than bench.py's;
# the data pipeline's first seconds with and without the Python wait probes.
#   OUT=$OUT GPUPROF=bin/gpuprof OLD=bin/gpuprof-old bash testdata/gpuhost/costsplit.sh
set -u
out=${OUT:?OUT: where the results go}
g=${GPUPROF:-bin/gpuprof}
old=${OLD:-$g}
res=/tmp/costsplit; rm -rf $res; mkdir -p $res
py=$(command -v python3)
{
date -u
lib=$(python3 -c 'import torch, os; print(os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cuda.so"))')
ls -la "$lib"
readelf -S --wide "$lib" | grep -E ' \.(symtab|strtab|dynsym|dynstr|rela\.dyn|rela\.plt) '
} >$res/env.txt 2>&1
export GPUPROF_LOG=debug GPUPROF_SELF_PROFILE=$res/self
timeout -s TERM -k 20 170 $py testdata/gpuhost/overhead.py . $g hf 3 8 --off-seconds 4 --learn 2.67 \
  --job "$py testdata/gpuhost/shapes/hf_trainer.py --mode compute --truth {out}/truth.jsonl" --truth truth.jsonl \
  --config new= --config old=@bin=$old --config idle=@idle \
  --save $res/hf.json --logs $res/hf-logs >$res/hf.txt 2>&1
unset GPUPROF_SELF_PROFILE
export GPUPROF_LOG=info
timeout -s TERM -k 20 110 $py testdata/gpuhost/overhead.py . $g data 3 8 --off-seconds 4 --learn 2.67 \
  --job "$py shared/workloads/spec_pipeline.py --mode data --steps 1000000 --truth {out}/truth.jsonl --start-delay 0" \
  --truth truth.jsonl --config stats=--probe-stats --config nopy=--no-python \
  --save $res/data.json --logs $res/data-logs >$res/data.txt 2>&1
timeout -s TERM -k 20 200 $py testdata/gpuhost/overhead.py . $g launchbound 6 10 --off-seconds 4 --learn 3 \
  --job "$py testdata/gpuhost/launchbound.py --out {out}" --truth truth.jsonl \
  --config gpuprof= --config idle=@idle \
  --save $res/launchbound.json --logs $res/launchbound-logs >$res/launchbound.txt 2>&1
tar czf $out/costsplit.tgz -C /tmp costsplit
tail -5 $res/hf.txt $res/data.txt $res/launchbound.txt
