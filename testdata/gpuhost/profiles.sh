#!/usr/bin/env bash
# One device call (issue 27): a Pyroscope server on the GPU host (the
# binary carried gzipped as bin/pyroscope.gz), spec_pipeline.py's data- and
# compute-bound modes profiled into it and read back (pyroquery.py), then
# the step rate A/B with profiling on against an idle control, on the
# compute-bound pipeline and on a launch-bound loop (launchbound.py):
#   OUT=DIR bash testdata/gpuhost/profiles.sh   (with shared/workloads/ from ../shared)
set -u
R=$OUT
OUT=/tmp/profiles-out # the results, tarred into $R at the end (the device tool brings back 8 files)
mkdir -p $OUT
w=shared/workloads
g=bin/gpuprof
url=http://127.0.0.1:4040
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
gunzip -c bin/pyroscope.gz >/tmp/pyroscope && chmod +x /tmp/pyroscope
bash testdata/pyroscope-server/start.sh /tmp/pyroscope /tmp/pyroscope-data -ingester.min-ready-duration=0s >"$OUT/pyroscope.log" 2>&1 &
for _ in $(seq 60); do curl -fs $url/ready >/dev/null && break; sleep 0.5; done
curl -s $url/ready
for mode in data compute; do
	PYTHONUNBUFFERED=1 python3 $w/spec_pipeline.py --mode $mode --steps 700 --truth "$OUT/truth-$mode.jsonl" \
		--start-delay 4 >"$OUT/pipeline-$mode.log" 2>&1 &
	pid=$!
	sleep 2.5
	$g attach --pid $pid --batch-size 4 --launch-duty 1 --jsonl "$OUT/steps-$mode.jsonl" --metrics-addr 127.0.0.1:9464 \
		--pyroscope $url --pyroscope-service spec-$mode --pyroscope-interval 5s >"$OUT/summary-$mode.txt" 2>"$OUT/attach-$mode.log"
	wait $pid
	sleep 1
	python3 testdata/gpuhost/pyroquery.py $url spec-$mode "$OUT/steps-$mode.jsonl" >"$OUT/pyro-$mode.json"
	echo "== $mode"; tail -4 "$OUT/summary-$mode.txt"
	python3 -c "
import json,sys
q=json.load(open('$OUT/pyro-$mode.json'))
for t,e in q['types'].items(): print(t, e['total'], e['by_phase'], e['by_wait_kind'])
print(q['steps'])"
done
echo "== overhead, compute-bound"
timeout 260 python3 testdata/gpuhost/overhead.py $w $g compute 6 8 --off-seconds 4 --learn 3 \
	--config idle=@idle --config profiles="--pyroscope $url --pyroscope-interval 5s" >"$OUT/overhead-compute.txt" 2>&1
tail -30 "$OUT/overhead-compute.txt"
echo "== overhead, launch-bound"
timeout 200 python3 testdata/gpuhost/overhead.py $w $g launchbound 4 8 --off-seconds 4 --learn 3 \
	--job "python3 testdata/gpuhost/launchbound.py --out {out}" --truth truth.jsonl \
	--config idle=@idle --config profiles="--pyroscope $url --pyroscope-interval 5s" >"$OUT/overhead-launch.txt" 2>&1
tail -30 "$OUT/overhead-launch.txt"
tar czf "$R/profiles.tgz" -C "$OUT" .
