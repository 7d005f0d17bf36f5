#!/usr/bin/env bash
# One device call: spec_pipeline.py in its four modes, attached by the
# build before issue 26's changes (bin/gpuprof-before, 0beea8b) and by the
# build after (bin/gpuprof), each compared with the pipeline's own truth:
#   OUT=DIR bash testdata/gpuhost/before_after.sh  (with shared/workloads/ from ../shared)
set -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for b in before after; do
	g=bin/gpuprof; [ $b = before ] && g=bin/gpuprof-before
	GPUPROF=$g bash testdata/gpuhost/validate.sh shared/workloads "$OUT/$b" infer data compute balanced >"$OUT/$b.txt" 2>&1
	tail -60 "$OUT/$b.txt"
done
tar czf "$OUT/spec.tgz" -C "$OUT" before after before.txt after.txt
rm -rf "$OUT/before" "$OUT/after"
