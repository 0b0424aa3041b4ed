#!/usr/bin/env python3
"""Measurements of elastic jobs and least-lost-work preemption in `corral sim replay`
(docs/elastic.md explains every number this prints).

Usage:
    python3 bench/elastic.py [path/to/corral] [--traces DIR] [--only jct,lost,sweep]
                             [--work DIR] [--plots DIR]

Prints markdown tables, each with the exact commands that produced it. Deterministic (fixed
seeds, virtual time). Needs the public traces (../shared/traces, or --traces, or
$CORRAL_SHARED_TRACES) for openb and Philly; the two-project workload is generated with
`corral sim gen` as bench/policies.py does.

Parts:
  jct    rigid, elastic (F = 0.5, A = 0.8) and elastic + least lost work: mean and p95 JCT,
         allocation, lost GPU-hours, resizes on openb's GPU jobs (gen:5x8xV100) and on the
         Philly run-time workload (gen:24x8xA100). Target: >= 25% lower mean JCT than rigid at
         equal or better allocation.
  lost   the two-project flood with quotas and reclaim: GPU-hours lost to preemption with
         today's victim rule and with least lost work (target: >= 50% fewer).
  sweep  A in 0.5..1.0 against F in 0..1 on both JCT workloads; with --plots, the SVGs.
"""

import argparse
import json
import os
import shlex
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from openb_gpu_jobs import write_openb_gpu_jobs  # noqa: E402
from policies import Bench, flood_workload, sharing_file, table, fmt  # noqa: E402

# The model's settings for every run (docs/elastic.md, "Model").
COMMON = ["--pass-interval", "60", "--checkpoint-interval", "1800", "--resize-cost", "60",
          "--resize-interval", "300"]
ELASTIC = ["--elastic-share", "0.5", "--elastic-alpha", "0.8"]
LLW = ["--victims", "least-lost-work", "--checkpoint-grace", "60"]
CONFIGS = [
    ("rigid", []),
    ("elastic", ELASTIC),
    ("elastic + least lost work", ELASTIC + LLW),
]


def openb_gpu_jobs(b):
    """openb's GPU pods that were scheduled (6,203): the default list less CPU-only pods and
    pods without a scheduled_time."""
    src = b.trace_path("openb_pod_list_default.csv")
    if not src:
        return None
    path = os.path.join(b.work, "openb_gpu_jobs.csv")
    write_openb_gpu_jobs(src, path)
    return path


def jct_workloads(b):
    out = []
    openb = openb_gpu_jobs(b)
    if openb:
        out.append(("openb, 6,203 GPU jobs, 5x8 V100", "gen:5x8xV100", openb))
    else:
        print("(openb skipped: no openb_pod_list_default.csv in the traces folder)\n")
    philly = b.trace_path("philly_runtime.csv")
    if philly:
        ph = b.gen("philly4k.jsonl", "--jobs", "4000", "--seed", "1", "--templates-per-user",
                   "4", "--users", "20", "--projects", "4", "--runtimes", philly,
                   "--interarrival", "200")
        out.append(("Philly run times, 4,000 jobs, 24x8 A100", "gen:24x8xA100", ph))
    else:
        print("(Philly skipped: no philly_runtime.csv in the traces folder)\n")
    return out


def replay_all(b, nodes, trace, *flags):
    """Every result of one `corral sim replay -o json` (a sweep gives one per pair)."""
    out = b.sim("replay", "--nodes", nodes, "--trace", trace, "--no-frag", "-o", "json", *flags)
    return json.loads(out)["results"]


def command(b, nodes, trace, flags):
    return " ".join(shlex.quote(x) for x in
                    ["corral", "sim", "replay", "--nodes", nodes, "--trace", trace, "--no-frag",
                     *flags])


def row_of(label, r, base=None):
    lost_h = r["lost_gpu_s"] / 3600
    e = r["elastic"]
    gain = f"{100 * (1 - r['jct_s']['mean'] / base['jct_s']['mean']):.1f}%" if base else "-"
    return [label, fmt(r["jct_s"]["mean"]), fmt(r["jct_s"]["p95"]), gain,
            fmt(r["gpu_alloc_pct_mean"], 2), fmt(r["gpu_alloc_pct_arrivals"], 2),
            fmt(lost_h, 1), r["preemptions"], e["jobs"], e["grows"], e["shrinks"]]


HEADER = ["", "JCT mean (s)", "JCT p95 (s)", "mean JCT gain", "alloc % (makespan)",
          "alloc % (arrivals)", "lost GPU-h", "preemptions", "elastic jobs", "grows", "shrinks"]


def part_jct(b):
    print("## JCT: rigid, elastic, elastic + least lost work\n")
    for label, nodes, trace in jct_workloads(b):
        for blocking in ("skip", "backfill"):
            rows, base, cmds = [], None, []
            for name, flags in CONFIGS:
                run_flags = [*COMMON, "--blocking", blocking, *flags]
                r = b.replay(nodes, trace, *run_flags)
                base = base or r
                rows.append(row_of(name, r, base if r is not base else None))
                cmds.append(command(b, nodes, os.path.basename(trace), run_flags))
            print(f"### {label}, FIFO, blocking {blocking}\n")
            print(table(HEADER, rows))
            print("\n```\n" + "\n".join(cmds) + "\n```\n")


def part_lost(b):
    print("## Lost work: two projects, quotas and reclaim\n")
    quotas = sharing_file(b, "quotas.yaml", "projects: {a: {gpus: 64}, b: {gpus: 64}}\n")
    configs = [
        ("today's rule (priority, over quota, newest)", []),
        ("least lost work, no grace", ["--victims", "least-lost-work"]),
        ("least lost work + 60 s grace", LLW),
        ("least lost work + 60 s grace + 300 s minimum run", LLW + ["--min-run", "300"]),
        ("elastic F=0.5, today's rule", ELASTIC),
        ("elastic F=0.5 + least lost work + grace", ELASTIC + LLW),
    ]
    totals = {name: [0.0, 0, 0.0] for name, _ in configs}
    for seed in (11, 21, 31):
        path, _ = flood_workload(b, seed)
        for name, flags in configs:
            r = b.replay("gen:16x8xA100", path, "--order", "fifo", "--sharing", quotas,
                         *COMMON, *flags)
            t = totals[name]
            t[0] += r["lost_gpu_s"] / 3600
            t[1] += r["preemptions"]
            t[2] += r["jct_s"]["mean"] / 3
    base = totals[configs[0][0]][0]
    rows = [[name, fmt(t[0], 1), t[1], f"{100 * (1 - t[0] / base):.1f}%" if base else "-",
             fmt(t[2])] for name, t in totals.items()]
    print(table(["", "lost GPU-h (3 seeds)", "preemptions", "fewer than today", "JCT mean (s)"],
                rows))
    print("\n```\n" + "\n".join(
        command(b, "gen:16x8xA100", "flood11.jsonl",
                ["--order", "fifo", "--sharing", "quotas.yaml", *COMMON, *flags])
        for _, flags in configs) + "\n```\n(seeds 11, 21, 31: flood21.jsonl, flood31.jsonl)\n")


def part_sweep(b, plots):
    print("## Sweep: A against F\n")
    alphas = "0.5,0.6,0.7,0.8,0.9,1.0"
    shares = "0,0.25,0.5,0.75,1.0"
    for label, nodes, trace in jct_workloads(b):
        flags = [*COMMON, "--elastic-alpha", alphas, "--elastic-share", shares]
        out_dir = None
        if plots:
            tag = "openb" if "openb" in label else "philly"
            out_dir = os.path.join(plots, tag)
            flags += ["--out", out_dir]
        results = replay_all(b, nodes, trace, *flags)
        by = {}
        for r in results:
            by[(r["elastic"]["alpha"], r["elastic"]["share"])] = r
        fs = sorted({k[1] for k in by})
        rows = []
        for a in sorted({k[0] for k in by}):
            rows.append([f"A={a}"] + [fmt(by[(a, f)]["jct_s"]["mean"]) + " / " +
                                      fmt(by[(a, f)]["gpu_alloc_pct_mean"], 1) for f in fs])
        print(f"### {label}: mean JCT (s) / allocation %\n")
        print(table([""] + [f"F={f}" for f in fs], rows))
        print("\n```\n" + command(b, nodes, os.path.basename(trace), flags) + "\n```\n")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--only", default="jct,lost,sweep")
    p.add_argument("corral", nargs="?", default=os.path.join(HERE, "..", "build", "corral"))
    traces = os.path.join(HERE, "..", "..", "shared", "traces")
    p.add_argument("--traces", default=os.environ.get("CORRAL_SHARED_TRACES", traces))
    p.add_argument("--work", help="keep the generated workloads in this folder")
    p.add_argument("--plots", help="write the sweep's SVGs under this folder")
    args = p.parse_args()
    plots = args.plots and os.path.abspath(args.plots)
    parts = {"jct": part_jct, "lost": part_lost, "sweep": lambda b: part_sweep(b, plots)}
    with tempfile.TemporaryDirectory() as tmp:
        os.makedirs(args.work or tmp, exist_ok=True)
        b = Bench(os.path.abspath(args.corral), args.traces, args.work or tmp)
        for name in args.only.split(","):
            parts[name](b)
        print(f"({b.runs} simulator runs, {b.wall:.1f} s of wall time)")


if __name__ == "__main__":
    sys.exit(main())
