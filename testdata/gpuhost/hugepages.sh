#!/usr/bin/env bash
# On the GPU host: is the job's library text mapped with huge pages (PMD),
# and does an attach take that away? A uprobe copies the 4 KiB page it sits
# in; where the text around it was PMD-mapped, its 2 MiB region is mapped
# with 4 KiB pages from then on, and every call through it can take iTLB
# misses (README: overhead).
#
#   testdata/gpuhost/hugepages.sh WORKLOAD_DIR [GPUPROF]
#
# Prints, per library, FilePmdMapped before, during and after a data-mode
# attach, and the host's THP settings.
set -u
w=$1
g=${2:-bin/gpuprof}
echo "thp enabled: $(cat /sys/kernel/mm/transparent_hugepage/enabled)"
echo "thp shmem:   $(cat /sys/kernel/mm/transparent_hugepage/shmem_enabled 2>/dev/null)"
truth=$(mktemp)
python3 "$w/spec_pipeline.py" --mode data --steps 5000 --truth "$truth" --start-delay 0 >/dev/null 2>&1 &
pid=$!
for _ in $(seq 120); do
	[ "$(wc -l <"$truth")" -ge 100 ] && break
	sleep 0.5
done
pmd() {
	awk -v tag="$1" '/^[0-9a-f]+-[0-9a-f]+ /{f = $6}
		/^FilePmdMapped:/ {if (f ~ /(libcuda\.so|libcudart\.so|libpython3|bin\/python3|libc\.so|libtorch)/ && f !~ /lib-dynload/) s[f] += $2}
		END {for (k in s) printf "%-7s %8d kB  %s\n", tag, s[k], k}' "/proc/$pid/smaps" | sort -k3
}
pmd before
"$g" attach -q --pid "$pid" -d 8s >/dev/null 2>&1 &
sleep 5
pmd during
wait $!
pmd after
kill "$pid"
wait "$pid" 2>/dev/null
rm -f "$truth"
