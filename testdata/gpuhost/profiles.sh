#!/usr/bin/env bash
# Device calls for issue 27: a Pyroscope server on the GPU host (the
# binary carried gzipped as bin/pyroscope.gz), then
#   PART=profiles: spec_pipeline.py's data- and compute-bound modes
#     profiled into it and read back (pyroquery.py), then a first step-rate
#     A/B on the compute-bound loop and the launch-bound one;
#   PART=overhead: the step rate A/B alone, on the compute-bound loop
#     (computebound.py), ALT alternations, plain attach measured too,
#     ratios saved for overhead_pool.py.
# Each A/B alternates off windows with "on" windows that take an idle
# control (nothing attached) and profiling to Pyroscope in turn.
#   OUT=DIR PART=profiles|overhead [ALT=N] bash testdata/gpuhost/profiles.sh
# (with shared/workloads/ from ../shared, the binary as bin/gpuprof)
set -u
R=$OUT
OUT=/tmp/profiles-out # the results, tarred into $R at the end (the device tool brings back 8 files)
mkdir -p $OUT
w=shared/workloads
g=bin/gpuprof
url=http://127.0.0.1:4040
part=${PART:-profiles}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
uname -r
gunzip -c bin/pyroscope.gz >/tmp/pyroscope && chmod +x /tmp/pyroscope
bash testdata/pyroscope-server/start.sh /tmp/pyroscope /tmp/pyroscope-data -ingester.min-ready-duration=0s >"$OUT/pyroscope.log" 2>&1 &
for _ in $(seq 60); do curl -fs $url/ready >/dev/null && break; sleep 0.5; done
curl -s $url/ready
profiles="--pyroscope $url --pyroscope-interval 5s"
ab() { # name alternations seconds job timeout [more --config]
	timeout $5 python3 testdata/gpuhost/overhead.py $w $g $1 $2 $3 --off-seconds 4 --learn 3 \
		--gpuprof-cpus 14-15 --job-cpus 0-13 --job "$4" --truth truth.jsonl --save "$OUT/ratios-$1.json" \
		--config idle=@idle --config profiles="$profiles" "${@:6}" >"$OUT/overhead-$1.txt" 2>&1
	tail -40 "$OUT/overhead-$1.txt"
}
if [ "$part" = profiles ]; then
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
import json
q=json.load(open('$OUT/pyro-$mode.json'))
for t,e in q['types'].items(): print(t, e['total'], e['by_phase'], e['by_wait_kind'])
print(q['steps'])
print(json.dumps(q['step_thread']))"
	done
	echo "== overhead, compute-bound"
	ab compute ${ALT:-5} 8 "python3 testdata/gpuhost/computebound.py --out {out}" 200
	echo "== overhead, launch-bound"
	ab launch 3 8 "python3 testdata/gpuhost/launchbound.py --out {out}" 110
else
	echo "== overhead, compute-bound"
	# and plain attach (no profiles), to tell the profiles' cost from attaching's
	# (ATTACH=0 leaves that out, for more windows of the other two)
	more=(--config attach=)
	[ "${ATTACH:-1}" = 0 ] && more=()
	ab compute ${ALT:-12} 8 "python3 testdata/gpuhost/computebound.py --out {out}" 550 "${more[@]}"
fi
tar czf "$R/profiles-$part.tgz" -C "$OUT" .
