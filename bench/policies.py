#!/usr/bin/env python3
"""Measurements of corral's queue orders, blocking modes, run-time estimates and project sharing,
replayed by `corral sim replay` (docs/policies.md explains every number this prints).

Usage:
    python3 bench/policies.py [path/to/corral] [--traces DIR] [--only jct,fair,backfill]
                              [--work DIR]

Prints markdown tables. Everything is deterministic (fixed seeds, virtual time): the same
binary gives the same numbers on any machine; only the wall times differ. Needs the public
traces (../shared/traces, or --traces, or $CORRAL_SHARED_TRACES) for the openb and Tiresias
parts; the synthetic parts generate their workloads with `corral sim gen`.

Parts:
  jct       mean JCT of FIFO, SJF (oracle), QSSF (oracle, predicted, none) and 2D-LAS under
            skip and backfill, on openb, Tiresias and a synthetic recurring workload; the
            targets: QSSF with predicted durations <= 1.2x SJF with oracle durations and
            <= 0.5x FIFO.
  fair      two projects of equal weight, one flooding the queue, the other arriving later
            with steady jobs: time for the late one to reach 90% of its entitlement, Jain's index
            under contention, GPU allocation against FIFO's (targets: within one median job
            duration, >= 0.95, >= 95%).
  backfill  GPU allocation and JCT with skip, strict and backfill.
  orders    the order table against oracle SRTF (issue 21, point 4): mean JCT, mean run time,
            mean delay (JCT - run time), delay / SRTF's, preemptions, on openb's 6,203 GPU
            pods (gen:5x8xV100, gen:4x8xV100) and the Philly run-time workload; Jain's index
            of each order on the two-project flood (target: a non-oracle order with delay
            <= 0.9x SRTF's and Jain >= 0.95).

Every table prints the mean run time beside it: JCT = delay + run time, and no order can go
below the run time.
"""

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from openb_gpu_jobs import write_openb_gpu_jobs  # noqa: E402


class Bench:
    def __init__(self, corral, traces, work):
        self.corral = corral
        self.traces = traces
        self.work = work
        self.runs = 0
        self.wall = 0.0

    def sim(self, *args):
        t0 = time.time()
        out = subprocess.run([self.corral, "sim", *args], check=True, capture_output=True,
                             text=True).stdout
        self.wall += time.time() - t0
        self.runs += 1
        return out

    def replay(self, nodes, trace, *flags):
        """The first result of `corral sim replay -o json` with these flags."""
        out = self.sim("replay", "--nodes", nodes, "--trace", trace, "--no-frag", "-o", "json",
                       *flags)
        return json.loads(out)["results"][0]

    def gen(self, name, *flags):
        path = os.path.join(self.work, name)
        self.sim("gen", "--out", path, *flags)
        return path

    def trace_path(self, name):
        path = os.path.join(self.traces, name)
        return path if os.path.exists(path) else None


def jobs_of(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def write_jobs(path, jobs):
    with open(path, "w") as f:
        for j in jobs:
            f.write(json.dumps(j) + "\n")


def openb_gpu_jobs(b):
    """openb's GPU pods that were scheduled (6,203): the default list less CPU-only pods and
    pods without a scheduled_time."""
    src = b.trace_path("openb_pod_list_default.csv")
    if not src:
        return None
    path = os.path.join(b.work, "openb_gpu_jobs.csv")
    write_openb_gpu_jobs(src, path)
    return path


def philly_workload(b):
    """4,000 recurring jobs (20 users, 4 templates each) whose template run times are drawn from
    Microsoft's Philly cluster (the trace of the Helios paper's QSSF result); None without
    philly_runtime.csv."""
    philly = b.trace_path("philly_runtime.csv")
    if not philly:
        return None
    return b.gen("philly4k.jsonl", "--jobs", "4000", "--seed", "1", "--templates-per-user", "4",
                 "--users", "20", "--projects", "4", "--runtimes", philly, "--interarrival",
                 "200")


def gpu_seconds(job):
    r = job["resources"]
    milli = r["gpus"] * r.get("gpu_milli", 1000 if r["gpus"] else 0) * job.get("tasks", 1)
    return milli / 1000 * job["duration"]


def offered_load(jobs, capacity_gpus):
    """Offered GPU load over the arrival span, as a multiple of the cluster."""
    span = max(j["submit_time"] for j in jobs) - min(j["submit_time"] for j in jobs)
    return sum(gpu_seconds(j) for j in jobs) / max(1, span) / capacity_gpus


def table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for r in rows:
        out.append("| " + " | ".join(str(c) for c in r) + " |")
    return "\n".join(out)


def fmt(x, digits=0):
    return f"{x:,.{digits}f}"


def ratio(a, b):
    return f"{a / b:.2f}" if b else "-"


# --- Part 1: JCT by order and estimate ----------------------------------------------------------

# (label, order, estimate, extra flags); each runs under skip and under backfill.
JCT_CONFIGS = [
    ("FIFO", "fifo", "oracle", []),
    ("SJF, oracle", "sjf", "oracle", []),
    ("QSSF, oracle", "qssf", "oracle", []),
    ("QSSF, predicted", "qssf", "predicted", []),
    ("QSSF, none (1 h each)", "qssf", "none", []),
    ("2D-LAS, resume", "las", "oracle", ["--resume", "--pass-interval", "60"]),
]


def jct_workloads(b):
    """(label, nodes flag, trace, extra replay flags, capacity GPUs, trace jobs for the load)."""
    out = []
    openb = b.trace_path("openb_pod_list_default.csv")
    openb_nodes = b.trace_path("openb_node_list_gpu_node.csv")
    if openb and openb_nodes:
        for scale in ("0.01", "0.008"):
            out.append((f"openb default, {scale} of the nodes", openb_nodes, openb,
                        ["--scale-nodes", scale]))
    tiresias = b.trace_path("tiresias_60_job.csv")
    if tiresias:
        out.append(("Tiresias 60 jobs, 16x4 GPUs", "gen:16x4xV100", tiresias, []))
        out.append(("Tiresias 60 jobs, 3x4 GPUs", "gen:3x4xV100", tiresias, []))
    synth = b.gen("recurring4k.jsonl", "--jobs", "4000", "--seed", "1", "--templates-per-user",
                  "4", "--users", "20", "--projects", "4")
    out.append(("synthetic recurring, 4,000 jobs, 24x8 GPUs", "gen:24x8xA100", synth, []))
    out.append(("synthetic recurring, 4,000 jobs, 20x8 GPUs", "gen:20x8xA100", synth, []))
    ph = philly_workload(b)
    if ph:
        out.append(("synthetic recurring, Philly run times, 4,000 jobs, 24x8 GPUs",
                    "gen:24x8xA100", ph, []))
    synth20 = b.gen("recurring20k.jsonl", "--jobs", "20000", "--seed", "1",
                    "--templates-per-user", "4", "--users", "20", "--projects", "4",
                    "--interarrival", "75")
    out.append(("synthetic recurring, 20,000 jobs, 24x8 GPUs", "gen:24x8xA100", synth20, []))
    return out


def part_jct(b):
    print("## Mean JCT by queue order, estimate and blocking\n")
    summary = []
    for label, nodes, trace, flags in jct_workloads(b):
        rows = []
        res = {}
        for name, order, estimate, extra in JCT_CONFIGS:
            for blocking in ("skip", "backfill"):
                r = b.replay(nodes, trace, "--order", order, "--estimate", estimate,
                             "--blocking", blocking, *flags, *extra)
                res[(order, estimate, blocking)] = r
                rows.append([name, blocking, fmt(r["jct_s"]["mean"]), fmt(r["jct_s"]["p50"]),
                             fmt(r["jct_s"]["p95"]), fmt(r["delay_s_mean"]),
                             fmt(r["queue_s"]["mean"]),
                             fmt(r["gpu_alloc_pct_mean"], 1), fmt(r["makespan_s"]),
                             r["preemptions"], r["unfinished"]])
        first = res[("fifo", "oracle", "skip")]
        print(f"### {label}\n")
        print(f"{first['jobs']:,} jobs; FIFO/skip makespan {first['makespan_s']:,} s, "
              f"mean GPU allocation {first['gpu_alloc_pct_mean']:.1f}%; mean run time "
              f"{fmt(first['run_s_mean'])} s (delay = JCT - run time).\n")
        print(table(["order, estimate", "blocking", "JCT mean", "JCT p50", "JCT p95",
                     "delay mean", "queue mean", "GPU alloc %", "makespan", "preempt", "unfinished"], rows))
        print()
        fifo = first["jct_s"]["mean"]
        # JCT = delay + run time: no order can go below the mean run time.
        run_time = first["run_s_mean"]
        for blocking in ("skip", "backfill"):
            q = res[("qssf", "predicted", blocking)]["jct_s"]["mean"]
            summary.append([label, blocking, fmt(q),
                            ratio(q, res[("sjf", "oracle", blocking)]["jct_s"]["mean"]),
                            ratio(q, res[("sjf", "oracle", "skip")]["jct_s"]["mean"]),
                            ratio(q, res[("fifo", "oracle", blocking)]["jct_s"]["mean"]),
                            ratio(q, fifo),
                            ratio(res[("sjf", "oracle", blocking)]["jct_s"]["mean"], fifo),
                            ratio(run_time, fifo)])
    print("### QSSF with predicted durations against the targets\n")
    print(table(["workload", "QSSF blocking", "QSSF-predicted JCT", "/ SJF-oracle (same blocking)",
                 "/ SJF-oracle skip", "/ FIFO (same blocking)", "/ FIFO skip",
                 "SJF-oracle (same blocking) / FIFO skip", "no-queueing bound / FIFO skip"],
                summary))
    print("\nTargets: <= 1.2 against SJF with oracle durations, <= 0.5 against FIFO. The bound "
          "is the mean run time over FIFO's mean JCT: no order can do better.\n")


# --- Part 2: fair share under a flood -----------------------------------------------------------

FLOOD_NODES = "gen:16x8xA100"  # 128 GPUs
FLOOD_CAPACITY = 128
B_START = 3600


def flood_workload(b, seed):
    """Project a: 400 jobs in a ~400 s burst (about 17 h of the whole cluster). Project b, from
    t = 1 h: 300 jobs, one every 180 s on average (about 0.8 of the cluster for 15 h). Seeds
    seed (a) and seed + 1 (b)."""
    a = jobs_of(b.gen(f"flood_a{seed}.jsonl", "--jobs", "400", "--seed", str(seed), "--users",
                      "5", "--projects", "1", "--interarrival", "1"))
    later = jobs_of(b.gen(f"flood_b{seed}.jsonl", "--jobs", "300", "--seed", str(seed + 1),
                          "--users", "5", "--projects", "1", "--interarrival", "180"))
    jobs = []
    for project, part, offset in (("a", a, 0), ("b", later, B_START)):
        for j in part:
            j = dict(j)
            j["id"] = len(jobs)
            j["project"] = project
            j["user"] = project + "-" + j["user"]
            j["name"] = project + "-" + j["name"]
            j["submit_time"] += offset
            jobs.append(j)
    path = os.path.join(b.work, f"flood{seed}.jsonl")
    write_jobs(path, jobs)
    return path, jobs


def sharing_file(b, name, text):
    path = os.path.join(b.work, name)
    with open(path, "w") as f:
        f.write(text)
    return path


FLOOD_SEEDS = (11, 21, 31, 41, 51)


def fair_configs(b):
    half = FLOOD_CAPACITY // 2
    fast = sharing_file(b, "fast.yaml", "fair_share: {half_life_s: 3600}\n")
    quotas = sharing_file(b, "quotas.yaml",
                          f"projects: {{a: {{gpus: {half}}}, b: {{gpus: {half}}}}}\n")
    quotas_fast = sharing_file(
        b, "quotas_fast.yaml",
        f"projects: {{a: {{gpus: {half}}}, b: {{gpus: {half}}}}}\n"
        "fair_share: {half_life_s: 3600}\n")
    backfill = ["--blocking", "backfill"]
    return [
        ("FIFO", ["--order", "fifo"]),
        ("FIFO, backfill", ["--order", "fifo", *backfill]),
        ("fair share", ["--order", "fairshare"]),
        ("fair share, backfill", ["--order", "fairshare", *backfill]),
        ("fair share (half-life 1 h), backfill", ["--order", "fairshare", "--sharing", fast,
                                                  *backfill]),
        ("FIFO + quotas", ["--order", "fifo", "--sharing", quotas]),
        ("FIFO + quotas, pass every 1 s",
         ["--order", "fifo", "--sharing", quotas, "--pass-interval", "1"]),
        ("fair share + quotas", ["--order", "fairshare", "--sharing", quotas]),
        ("fair share + quotas, backfill", ["--order", "fairshare", "--sharing", quotas,
                                           *backfill]),
        ("fair share + quotas, backfill, resume",
         ["--order", "fairshare", "--sharing", quotas, *backfill, "--resume"]),
        ("fair share (1 h) + quotas, backfill",
         ["--order", "fairshare", "--sharing", quotas_fast, *backfill]),
    ]


def part_fair(b):
    print("## Fair share: one project floods the queue, another arrives later\n")
    configs = fair_configs(b)
    summary = {name: [] for name, _ in configs}
    for seed in FLOOD_SEEDS:
        path, jobs = flood_workload(b, seed)
        median = statistics.median(j["duration"] for j in jobs)
        rows = []
        fifo_alloc = None
        for name, flags in configs:
            r = b.replay(FLOOD_NODES, path, "--policy", "fgd", *flags)
            pa, pb = r["projects"][0], r["projects"][1]
            assert pa["project"] == "a" and pb["project"] == "b"
            if fifo_alloc is None:
                fifo_alloc = r["gpu_alloc_pct_arrivals"]
            t90 = pb["entitlement_90_s"]
            of_fifo = 100 * r["gpu_alloc_pct_arrivals"] / fifo_alloc
            summary[name].append((t90 / median if t90 is not None else float("inf"),
                                  r["fairness"]["jain_mean"], of_fifo,
                                  r["lost_gpu_s"] / max(1, r["gpu_s"]) * 100,
                                  pa["jct_s"]["mean"], pb["jct_s"]["mean"]))
            if seed != FLOOD_SEEDS[0]:
                continue
            rows.append([name, "never" if t90 is None else fmt(t90),
                         "-" if t90 is None else f"{t90 / median:.2f}",
                         f"{r['fairness']['jain_mean']:.3f}",
                         f"{pa['share_of_entitlement_mean']:.2f} / "
                         f"{pb['share_of_entitlement_mean']:.2f}",
                         fmt(r["fairness"]["contended_s"]),
                         f"{r['fairness']['gpu_alloc_pct_mean']:.1f}",
                         f"{r['gpu_alloc_pct_arrivals']:.1f}", f"{of_fifo:.1f}",
                         r["preemptions"], fmt(r["lost_gpu_s"] / 3600, 1),
                         fmt(pa["jct_s"]["mean"]), fmt(pb["jct_s"]["mean"]),
                         fmt(pb["queue_s"]["mean"])])
        if seed != FLOOD_SEEDS[0]:
            continue
        a_jobs = [j for j in jobs if j["project"] == "a"]
        b_jobs = [j for j in jobs if j["project"] == "b"]
        print(f"### Workload seed {seed}\n")
        print(f"{FLOOD_NODES} ({FLOOD_CAPACITY} GPUs). Project a: {len(a_jobs)} jobs submitted "
              f"within {a_jobs[-1]['submit_time']} s "
              f"({sum(map(gpu_seconds, a_jobs)) / 3600:,.0f} GPU-hours). Project b: "
              f"{len(b_jobs)} jobs from t = {B_START} s to {b_jobs[-1]['submit_time']:,} s "
              f"(offered load {offered_load(b_jobs, FLOOD_CAPACITY):.2f} of the cluster). "
              f"Median job duration {median:,.0f} s, mean run time "
              f"{statistics.mean(j['duration'] for j in jobs):,.0f} s. Equal weights; fair-share half-life 7 d "
              f"unless stated; quotas {FLOOD_CAPACITY // 2} GPUs each with reclaim; oracle "
              "estimates.\n")
        print(table(["configuration", "b: 90% of entitlement after (s)", "in median durations",
                     "Jain (contended)", "alloc/entitlement a / b", "contended s",
                     "GPU alloc % (contended)", "GPU alloc % (arrivals)", "% of FIFO's",
                     "preempt", "lost GPU-h", "a JCT mean", "b JCT mean", "b queue mean"],
                    rows))
        print()
    print(f"### Over {len(FLOOD_SEEDS)} workload seeds ({', '.join(map(str, FLOOD_SEEDS))})\n")
    rows = []
    for name, values in summary.items():
        t90 = sorted(v[0] for v in values)
        jain = [v[1] for v in values]
        alloc = [v[2] for v in values]
        lost = [v[3] for v in values]
        rows.append([name, f"{statistics.median(t90):.2f}", f"{t90[-1]:.2f}",
                     f"{statistics.mean(jain):.3f}", f"{min(jain):.3f}",
                     f"{statistics.mean(alloc):.1f}", f"{min(alloc):.1f}",
                     f"{statistics.mean(lost):.1f}",
                     fmt(statistics.mean(v[4] for v in values)),
                     fmt(statistics.mean(v[5] for v in values))])
    print(table(["configuration", "b to 90%: median (median durations)", "worst",
                 "Jain mean", "Jain worst", "GPU alloc % of FIFO's (arrivals): mean", "worst",
                 "lost % of GPU-s", "a JCT mean", "b JCT mean"], rows))
    print("\nTargets: b at 90% of its entitlement within one median job duration; Jain's index"
          " >= 0.95 under sustained contention; total GPU allocation >= 95% of FIFO's.\n")


# --- Part 3: backfill ---------------------------------------------------------------------------

def part_backfill(b):
    print("## Backfill: utilisation with skip, strict and backfill (FIFO order)\n")
    rows = []
    for label, nodes, trace, flags in jct_workloads(b):
        for blocking, estimate in (("skip", "oracle"), ("strict", "oracle"),
                                   ("backfill", "oracle"), ("backfill", "predicted"),
                                   ("backfill", "none")):
            r = b.replay(nodes, trace, "--order", "fifo", "--blocking", blocking, "--estimate",
                         estimate, *flags)
            rows.append([label, blocking, estimate if blocking == "backfill" else "-",
                         f"{r['gpu_alloc_pct_mean']:.2f}", fmt(r["jct_s"]["mean"]),
                         fmt(r["run_s_mean"]), fmt(r["delay_s_mean"]),
                         fmt(r["queue_s"]["p95"]), fmt(r["makespan_s"])])
    print(table(["workload", "blocking", "estimate", "GPU alloc % (makespan)", "JCT mean",
                 "run time mean", "delay mean", "queue p95", "makespan"], rows))
    print()


def gang_workload(b, seed):
    """A workload of distributed jobs: every job of 4 GPUs or more becomes a gang of 2-GPU
    tasks (as a torchrun job with 2 GPUs per process group would ask)."""
    path = b.gen(f"gangs{seed}.jsonl", "--jobs", "3000", "--seed", str(seed), "--gpu-mix",
                 "1:0.4,2:0.2,4:0.15,8:0.15,16:0.1", "--interarrival", "60")
    jobs = jobs_of(path)
    for j in jobs:
        total = j["resources"]["gpus"] * j["tasks"]
        if total >= 4:
            j["tasks"] = total // 2
            j["resources"].update(gpus=2, cpu_milli=2 * 16000, memory_mib=2 * 65536)
    write_jobs(path, jobs)
    return path


def part_topology(b):
    print("## Gang placement: together (fewest nodes, one rack) against each task alone\n")
    print("32 nodes of 8 GPUs in racks of 4 (`gen:32x8xA100@4`); jobs of 4+ GPUs are gangs of "
          "2-GPU tasks; FIFO, skip. Nodes per gang: distinct nodes at start, mean over gang "
          "starts.\n")
    rows = []
    for seed in (1, 2, 3):
        trace = gang_workload(b, seed)
        for policy in ("fgd", "bestfit"):
            for placement in ("together", "each-task"):
                r = b.replay("gen:32x8xA100@4", trace, "--policy", policy, "--gang-placement",
                             placement)
                g = r["gangs"]
                rows.append([seed, policy, placement, g["starts"], f"{g['nodes_mean']:.2f}",
                             f"{100 * g['one_rack'] / max(1, g['starts']):.1f}",
                             fmt(r["jct_s"]["mean"]), fmt(r["run_s_mean"]),
                             f"{r['gpu_alloc_pct_mean']:.2f}"])
    print(table(["seed", "policy", "placement", "gang starts", "nodes per gang", "one rack %",
                 "JCT mean", "run time mean", "GPU alloc %"], rows))
    print()


# --- Part 5: orders against oracle SRTF (issue 21, point 4) --------------------------------------

RESUME = ["--resume", "--pass-interval", "60"]
# (label, order, estimate, extra flags, oracle: uses the jobs' recorded run times)
ORDER_CONFIGS = [
    ("SRTF, oracle (reference)", "srtf", "oracle", RESUME, True),
    ("FIFO", "fifo", "oracle", [], False),
    ("SJF, oracle", "sjf", "oracle", [], True),
    ("SJF, oracle, backfill", "sjf", "oracle", ["--blocking", "backfill"], True),
    ("SRSF, oracle", "srsf", "oracle", RESUME, True),
    ("QSSF, predicted", "qssf", "predicted", [], False),
    ("QSSF, predicted, backfill", "qssf", "predicted", ["--blocking", "backfill"], False),
    ("2D-LAS (3,600 GPU-s)", "las", "oracle", RESUME, False),
    ("SRTF, predicted", "srtf", "predicted", RESUME, False),
    ("SRSF, predicted", "srsf", "predicted", RESUME, False),
    # Session 42: the same placement for the reference and the best non-oracle rows (session 41
    # found bestfit best for the predicted orders).
    ("SRTF, oracle, bestfit", "srtf", "oracle", [*RESUME, "--policy", "bestfit"], True),
    ("SRTF, predicted, bestfit", "srtf", "predicted", [*RESUME, "--policy", "bestfit"], False),
    ("SRSF, predicted, bestfit", "srsf", "predicted", [*RESUME, "--policy", "bestfit"], False),
    # Session 43: re-packing (running one-node jobs move, free under --resume, to make room for
    # a job that fits no node), for the reference and the best non-oracle rows.
    ("SRTF, oracle, re-packing", "srtf", "oracle", [*RESUME, "--repack"], True),
    ("SRTF, predicted, bestfit, re-packing", "srtf", "predicted",
     [*RESUME, "--policy", "bestfit", "--repack"], False),
    ("SRSF, predicted, bestfit, re-packing", "srsf", "predicted",
     [*RESUME, "--policy", "bestfit", "--repack"], False),
]


def order_workloads(b):
    out = []
    openb = openb_gpu_jobs(b)
    if openb:
        out.append(("openb, 6,203 GPU pods, 5x8 V100", "gen:5x8xV100", openb))
        out.append(("openb, 6,203 GPU pods, 4x8 V100", "gen:4x8xV100", openb))
    ph = philly_workload(b)
    if ph:
        out.append(("Philly run times, 4,000 jobs, 24x8 A100", "gen:24x8xA100", ph))
    return out


def flood_jain(b, flags):
    """Mean and worst Jain's index over the flood seeds (two projects of equal weight)."""
    jain = []
    policy = [] if "--policy" in flags else ["--policy", "fgd"]
    for seed in FLOOD_SEEDS:
        path, _ = flood_workload(b, seed)
        jain.append(b.replay(FLOOD_NODES, path, *policy, *flags)["fairness"]["jain_mean"])
    return statistics.mean(jain), min(jain)


def part_orders(b):
    print("## Queue orders against oracle SRTF (issue 21, point 4)\n")
    print("Delay = mean JCT - mean run time (completed jobs); SRTF with oracle run times, "
          "preemptive, preempted jobs resuming without loss, is the reference. Target: a "
          "non-oracle order with delay <= 0.9x SRTF's on each workload, and Jain's index >= "
          "0.95 on the two-project flood (mean over its five seeds). Placement fgd, blocking "
          "skip unless stated; preemptive orders run with `--resume --pass-interval 60`.\n")
    half = FLOOD_CAPACITY // 2
    quotas = sharing_file(b, "quotas.yaml",
                          f"projects: {{a: {{gpus: {half}}}, b: {{gpus: {half}}}}}\n")
    jain = {}
    for label, order, estimate, extra, _ in ORDER_CONFIGS:
        flags = ["--order", order, "--estimate", estimate, *extra]
        jain[label] = (flood_jain(b, flags), flood_jain(b, [*flags, "--sharing", quotas]))
    for label, nodes, trace in order_workloads(b):
        rows, srtf = [], None
        for name, order, estimate, extra, oracle in ORDER_CONFIGS:
            r = b.replay(nodes, trace, "--order", order, "--estimate", estimate, *extra)
            srtf = srtf or r
            delay = r["delay_s_mean"]
            rows.append([name, "yes" if oracle else "no", fmt(r["jct_s"]["mean"]),
                         fmt(r["run_s_mean"]), fmt(delay),
                         f"**{ratio(delay, srtf['delay_s_mean'])}**" if not oracle and
                         delay <= 0.9 * srtf["delay_s_mean"] else
                         ratio(delay, srtf["delay_s_mean"]),
                         fmt(r["jct_s"]["p95"]), r["preemptions"],
                         f"{jain[name][0][0]:.3f} / {jain[name][0][1]:.3f}",
                         f"{jain[name][1][0]:.3f} / {jain[name][1][1]:.3f}", r["unfinished"]])
        print(f"### {label}\n")
        print(f"{srtf['jobs']:,} jobs on `{nodes}`; mean run time {fmt(srtf['run_s_mean'])} s "
              f"(SRTF's GPU allocation over the arrivals: "
              f"{fmt(srtf['gpu_alloc_pct_arrivals'], 1)}%).\n")
        print(table(["order", "oracle", "JCT mean", "run time mean", "delay mean",
                     "delay / SRTF's", "JCT p95", "preemptions", "Jain flood: mean / worst",
                     f"Jain flood, quotas {half} + {half}: mean / worst", "unfinished"], rows))
        print("\n```\ncorral sim replay --nodes " + nodes + " --trace " +
              os.path.basename(trace) + " --no-frag --order srtf --resume --pass-interval 60"
              "\n```\n")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("corral", nargs="?", default=os.path.join(HERE, "..", "build", "corral"))
    p.add_argument("--traces", default=os.environ.get(
        "CORRAL_SHARED_TRACES", os.path.join(HERE, "..", "..", "shared", "traces")))
    p.add_argument("--only", default="jct,fair,backfill,topology,orders")
    p.add_argument("--work", help="keep the generated workloads in this folder (default: a "
                   "temporary one, removed at the end)")
    args = p.parse_args()
    parts = set(args.only.split(","))
    with tempfile.TemporaryDirectory() as tmp:
        work = args.work or tmp
        os.makedirs(work, exist_ok=True)
        b = Bench(os.path.abspath(args.corral), args.traces, work)
        print(f"corral: {args.corral}; traces: {args.traces}; machine: {os.cpu_count()} cores\n")
        if "jct" in parts:
            part_jct(b)
        if "fair" in parts:
            part_fair(b)
        if "backfill" in parts:
            part_backfill(b)
        if "topology" in parts:
            part_topology(b)
        if "orders" in parts:
            part_orders(b)
        print(f"({b.runs} simulator runs, {b.wall:.1f} s of wall time)")


if __name__ == "__main__":
    sys.exit(main())
