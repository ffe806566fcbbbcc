#!/bin/bash
# For each run dir alternate.sh left under /tmp/ab/runs, oldest first: the variant, ops/s,
# p99 ms, the CPU the three nodes spent per record stored (process_cpu_seconds_total summed
# over the nodes at the run's end, over node 1's idemnode_records_completed; both count from
# the cluster's start, warm-up included), and node 1's compactions, read amplification and
# level-0 files at the end.
for d in $(ls -dtr /tmp/ab/runs/*/); do
  n=$(basename "$d" | cut -d- -f1)
  ops=$(awk -F'|' 'NR==3{print $4, $6}' "$d/table.md")
  cpu=$(cat "$d"/metrics-*node*.txt | awk '$1=="process_cpu_seconds_total"{s+=$2} END{print s}')
  rec=$(awk '$1=="idemnode_records_completed"{print $2}' "$d"/metrics-*node1.txt)
  extra=$(awk '$1=="idemnode_store_compactions_total"{c=$2}$1=="idemnode_store_read_amplification"{r=$2}$1=="idemnode_store_l0_files"{l=$2} END{printf "compactions %s readamp %s l0files %s", c, r, l}' "$d"/metrics-*node1.txt)
  echo "$n $ops cpu_us/rec $(echo "$cpu*1000000/$rec" | bc) $extra"
done
