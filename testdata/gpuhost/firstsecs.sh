#!/usr/bin/env bash
# On the GPU host: where the first seconds of an attach cost the job, on
# the data pipeline and the HF Trainer, or the jobs JOBS names (issue 29). Each job alternates
# off windows of 4 s with on windows of 6 s of, in turn: gpuprof as it
# is; gpuprof frozen (SIGSTOP) at 0.6 s, its probes left in the job in
# their learning state (both CUDA layers, every launch counted, every
# Python wait probed) while its own threads do nothing; gpuprof with its
# Go runtime on one P (GOMAXPROCS=1: no parallel collector on the job's
# cores); gpuprof with launches not counted; and an idle control. Each
# gpuprof window keeps its CPU time as it went (overhead.py cpu_series),
# the runs save every step's end (--save), to be binned by 250 ms after.
#   OUT=$OUT GPUPROF=bin/gpuprof bash testdata/gpuhost/firstsecs.sh
set -u
out=${OUT:?OUT: where the results go}
g=${GPUPROF:-bin/gpuprof}
alt=${ALT:-4}
res=/tmp/firstsecs; rm -rf $res; mkdir -p $res
py=$(command -v python3)
{ date -u; uname -a; lscpu; for c in $(seq 0 15); do echo "cpu$c siblings $(cat /sys/devices/system/cpu/cpu$c/topology/thread_siblings_list 2>/dev/null)"; done; } >$res/env.txt 2>&1
# CONFIGS overrides the configurations (overhead.py --config flags).
if [ -n "${CONFIGS:-}" ]; then
  eval "configs=($CONFIGS)"
else
  configs=(--config default= --config frozen=@freeze=0.6 --config gmp1=@env=GOMAXPROCS=1 --config nolaunch=--no-launches --config idle=@idle)
fi
# JOBS picks the jobs, in order (default "data hf"); "launchbound" is the
# launch-bound loop (testdata/gpuhost/launchbound.py, ~66k launches/s):
#   JOBS=launchbound CONFIGS='--config default= --config nolaunch=--no-launches --config nocalls=--no-calls --config idle=@idle' ...
jobs=${JOBS:-data hf}
for job in $jobs; do
case $job in
launchbound)
timeout -s TERM -k 20 ${LB_S:-250} $py testdata/gpuhost/overhead.py . $g launchbound $alt 6 --off-seconds 4 --learn 3 \
  --job "$py testdata/gpuhost/launchbound.py --out {out}" --truth truth.jsonl \
  "${configs[@]}" --save $res/launchbound.json --logs $res/launchbound-logs >$res/launchbound.txt 2>&1
;;
data)
timeout -s TERM -k 20 ${DATA_S:-250} $py testdata/gpuhost/overhead.py . $g data $alt 6 --off-seconds 4 --learn 3 \
  --job "$py shared/workloads/spec_pipeline.py --mode data --steps 1000000 --truth {out}/truth.jsonl --start-delay 0" --truth truth.jsonl \
  "${configs[@]}" --save $res/data.json --logs $res/data-logs >$res/data.txt 2>&1
;;
hf)
timeout -s TERM -k 20 ${HF_S:-270} $py testdata/gpuhost/overhead.py . $g hf $alt 6 --off-seconds 4 --learn 3 \
  --job "$py testdata/gpuhost/shapes/hf_trainer.py --mode compute --truth {out}/truth.jsonl" --truth truth.jsonl \
  "${configs[@]}" --save $res/hf.json --logs $res/hf-logs >$res/hf.txt 2>&1
;;
*) echo "firstsecs.sh: JOBS: $job is not one of launchbound, data, hf" >&2; exit 2 ;;
esac
done
# gpuprof's own CPU profile of a 3 s attach to the data pipeline (PROFILE=1).
if [ -n "${PROFILE:-}" ]; then
  $py shared/workloads/spec_pipeline.py --mode data --steps 3000 --truth $res/prof-truth.jsonl --start-delay 0 >/dev/null 2>&1 &
  job=$!
  sleep 25
  GPUPROF_SELF_PROFILE=$res/prof GPUPROF_LOG=debug timeout 20 $g attach --pid $job -d 3s -q >$res/prof.out 2>$res/prof.log
  kill $job 2>/dev/null; wait $job 2>/dev/null
fi
tar czf $out/firstsecs.tgz -C /tmp firstsecs
for job in $jobs; do grep -h "by second since attach" $res/$job.txt; done | head -20
