#!/usr/bin/env python3
"""openb's GPU pods that were scheduled (6,203 in openb_pod_list_default.csv): the pod list less
CPU-only pods and pods without a scheduled_time, the workload of docs/elastic.md and of the
simulator's replay benchmark (docs/benchmarks.md, bench/macro.sh).

Usage: bench/openb_gpu_jobs.py POD_LIST.csv OUT.csv
"""
import csv
import sys


def write_openb_gpu_jobs(src, path):
    """Writes the scheduled GPU pods of the openb pod list `src` to `path`; returns their count."""
    count = 0
    with open(src) as f, open(path, "w", newline="") as out:
        reader = csv.DictReader(f)
        writer = csv.DictWriter(out, fieldnames=reader.fieldnames)
        writer.writeheader()
        for row in reader:
            if int(row["num_gpu"]) > 0 and row["scheduled_time"] != "":
                writer.writerow(row)
                count += 1
    return count


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__.strip())
    write_openb_gpu_jobs(sys.argv[1], sys.argv[2])
