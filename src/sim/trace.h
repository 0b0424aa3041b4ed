// Workload traces for the simulator: readers for the public trace formats (Alibaba openb,
// Tiresias, Helios/Philly-style CSV), corral's native JSON Lines format for jobs and nodes, and
// the cluster sources the simulator starts from.
//
// Contracts common to every reader:
//  - Errors are values, never exceptions. A missing or unreadable file is an IoError naming the
//    path; bad content is InvalidArgument naming the file, the line and the field
//    ("pods.csv:12: field 'num_gpu': expected an integer, got 'x'").
//  - Every job read is checked with model::Validate and every node with model::Validate; their
//    errors get the "file:line: " prefix.
//  - Times and durations are whole seconds (decimal CSV times are rounded to the nearest second).
//  - Jobs keep file order. Their ids are 0..n-1 in file order unless the format carries numeric
//    ids (Tiresias job_id, JSON Lines "id"); then those are used and must be unique.
//  - A trace without users or projects gets user and project kDefaultUser / kDefaultProject.
//  - expected_duration is set to the recorded duration for the CSV formats (the trace's run time
//    is the perfect hint); JSON Lines carries it explicitly.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "common/units.h"
#include "model/job.h"
#include "model/node.h"

namespace corral::sim {

inline constexpr char kDefaultUser[] = "default";
inline constexpr char kDefaultProject[] = "default";

// One job of a workload and how long it runs once started (seconds, >= 0).
struct TraceJob {
  model::Job job;
  Seconds duration{0};
};

// A workload in file order (not necessarily sorted by submit time).
struct Trace {
  std::vector<TraceJob> jobs;
};

enum class TraceFormat { kOpenb, kTiresias, kHelios, kJsonl };

// "openb" | "tiresias" | "helios" | "jsonl"; InvalidArgument naming the accepted names otherwise.
Result<TraceFormat> ParseTraceFormat(std::string_view name);
// The inverse of ParseTraceFormat.
std::string_view TraceFormatName(TraceFormat format);
// A path ending in ".jsonl" is kJsonl; otherwise the CSV header decides (the columns each CSV
// reader requires). IoError if the file cannot be read; InvalidArgument if no format matches.
Result<TraceFormat> DetectTraceFormat(const std::string& path);

// How a job asking `total_gpus` GPUs is split into identical tasks of at most
// `max_gpus_per_task` GPUs each: ceil(total / max) tasks of total / tasks GPUs.
struct GangShape {
  int tasks = 1;
  int64_t gpus_per_task = 0;
};
// nullopt when the tasks cannot get equal whole GPUs (e.g. 9 GPUs, at most 8 per task) or when
// max_gpus_per_task < 1. total_gpus must be >= 0; 0 gives one task of 0 GPUs.
std::optional<GangShape> SplitIntoGang(int64_t total_gpus, int64_t max_gpus_per_task);

// `prefix` followed by `index` padded with zeros to at least `min_digits` digits: ("n", 7, 4) ->
// "n0007". Names of synthetic nodes, users and projects. index must be >= 0.
std::string NumberedName(std::string_view prefix, int64_t index, int min_digits);

// ---------------------------------------------------------------------------------------------
// Alibaba openb (cluster-trace-gpu-v2023)

// openb node list: sn,cpu_milli,memory_mib,gpu,model. One node per row, named by sn (names must be
// unique), with `gpu` GPUs of `model` in one NVLink domain and GPU memory 0 (the trace does not
// record it). Nodes with gpu == 0 are CPU-only (empty model, whatever the model column says);
// they are dropped when gpu_nodes_only.
Result<std::vector<model::Node>> ReadOpenbNodes(const std::string& path,
                                                bool gpu_nodes_only = true);

// openb pod list: name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,
// creation_time,deletion_time,scheduled_time. The multigpu files have only the first five
// columns; their pods get submit_time 0 and duration 0. One single-task job per pod:
//  - name = pod name; user and project kDefaultUser / kDefaultProject; ids 0..n-1.
//  - resources: gpus = num_gpu; cpu = cpu_milli; memory = memory_mib; gpu_models = gpu_spec split
//    on '|' (empty = any model). gpu_milli = 0 when num_gpu == 0, else min(gpu_milli, 1000), and
//    a gpu_milli of 0 with num_gpu >= 1 means whole GPUs (1000). (No pod of the published files
//    has num_gpu >= 1 with gpu_milli 0 or above 1000; the rules make such rows mean what the
//    trace documentation says: gpu_milli is a share only when it is below one GPU.)
//  - priority from qos: "LS" (latency-sensitive) and "Guaranteed" are 1; "BE", "Burstable",
//    empty or anything else 0. pod_phase is ignored: every pod is part of the workload.
//  - submit_time = creation_time; duration = deletion_time - scheduled_time, clamped at 0 when
//    negative. A pod never scheduled (empty scheduled_time, e.g. phase Pending) is taken to run
//    from creation to deletion: duration = deletion_time - creation_time.
Result<Trace> ReadOpenbPods(const std::string& path);

// ---------------------------------------------------------------------------------------------
// Tiresias (SymbioticLab/Tiresias simulator CSV)

// job_id,num_gpu,submit_time,iterations,model_name,duration,interval (iterations and interval are
// not used and may be absent). Ids = job_id (unique, >= 0); name = model_name; cpu and memory 0;
// gpu_milli 1000. A job asking more than max_gpus_per_task GPUs becomes a gang split by
// SplitIntoGang; InvalidArgument naming num_gpu when that is impossible, and when
// max_gpus_per_task < 1.
Result<Trace> ReadTiresias(const std::string& path, int max_gpus_per_task);

// ---------------------------------------------------------------------------------------------
// Helios / Philly-style CSV

// job_id,user,vc,gpu_num,cpu_num,node_num,submit_time,duration. gpu_num and cpu_num are totals over
// node_num nodes: tasks = max(node_num, 1); gpus per task = gpu_num / tasks (must divide, else an
// error naming gpu_num); cpu_milli per task = cpu_num * 1000 / tasks (rounded down); memory 0.
// name = job_id (which may be any text); ids 0..n-1; project = vc; an empty user or vc becomes
// kDefaultUser / kDefaultProject.
Result<Trace> ReadHelios(const std::string& path);

// ---------------------------------------------------------------------------------------------
// Native JSON Lines

// One JSON object per line; blank lines and lines whose first non-space character is '#' are
// skipped. Example:
// {"id":1,"name":"train","user":"alice","project":"vision","priority":0,"submit_time":0,
//  "duration":3600,"time_limit":7200,"expected_duration":3000,"tasks":2,
//  "resources":{"gpus":8,"gpu_milli":1000,"cpu_milli":32000,"memory_mib":65536,
//               "gpu_models":["A100-80GB"]}}
// Required: submit_time, duration, resources.gpus. Defaults: id = position among the jobs of the
// file (0..n-1), name "", user/project "default", priority 0, tasks 1, gpu_milli 1000 when
// gpus > 0 else 0, cpu_milli/memory_mib 0, gpu_models [] (any), time_limit and expected_duration
// unset. Numbers must be JSON integers. Ids must be unique. Unknown fields are errors (typo
// safety), inside "resources" too.
Result<Trace> ReadJsonl(const std::string& path);
// ReadJsonl's fast path: the job of one line that is in the subset of the format WriteJsonl
// and `corral sim gen` write, nullopt for any other line. The subset: one JSON object with no
// whitespace between tokens; known members only, each once, none null; strings of printable
// ASCII without escapes; integers without fraction, exponent or leading zero, of at most 18
// digits and within the format's ranges; submit_time, duration and resources.gpus present.
// ReadJsonl reads a line outside the subset with the general JSON parser, so errors and the
// reading of every other line are the general reader's; a line inside it gives the job the
// general reader gives. Neither model::Validate nor id uniqueness is checked here (ReadJsonl
// checks both on either path). Declared for its tests.
std::optional<TraceJob> ScanJsonlJob(std::string_view line, int64_t default_id);
// Writes `trace` in the format above, one job per line in trace order, every field explicit
// except unset time_limit / expected_duration and empty gpu_models. ReadJsonl of the output gives
// back the same trace. IoError if the file cannot be written.
Status WriteJsonl(const Trace& trace, const std::string& path);

// Reads `path` in `format`; max_gpus_per_task is used by kTiresias only.
Result<Trace> ReadTrace(const std::string& path, TraceFormat format, int max_gpus_per_task);

// Nodes in JSON Lines (same line rules as ReadJsonl):
// {"name":"n1","gpu_model":"A100-80GB","gpus":8,"gpu_memory_mib":81920,"cpu_milli":128000,
//  "memory_mib":1048576,"labels":{"rack":"r1"},"nvlink_domains":[0,0,0,0,1,1,1,1]}
// Required: name, gpus, cpu_milli, memory_mib (and gpu_model when gpus > 0). Defaults:
// gpu_model "", gpu_memory_mib 0 (every GPU of the node gets it), labels {}, nvlink_domains all 0
// (when given, exactly one entry per GPU). Names must be unique. Unknown fields are errors.
Result<std::vector<model::Node>> ReadNodesJsonl(const std::string& path);
// Writes nodes in the format above (nvlink_domains only when some domain is not 0). GPU UUIDs are
// not part of the format and are not written. InvalidArgument when the GPUs of a node have
// different memory sizes (the format has one per node); IoError if the file cannot be written.
Status WriteNodesJsonl(const std::vector<model::Node>& nodes, const std::string& path);

// ---------------------------------------------------------------------------------------------
// Cluster sources

// A synthetic cluster from "COUNTxGPUSxMODEL[,COUNTxGPUSxMODEL...]", e.g. "16x4xV100,2x8xA100-80GB"
// (MODEL is everything after the second 'x'). Nodes are named "n0000", "n0001", ... in spec
// order; each has GPUS GPUs of MODEL in one NVLink domain (GPU memory 0: unknown), CPU 16000 milli
// per GPU (at least 8000) and memory 65536 MiB per GPU (at least 65536). GPUS may be 0 for
// CPU-only nodes, written "COUNTx0xcpu". A part may end in "@PER_RACK": its nodes get rack
// labels "rack00", "rack01", ..., PER_RACK nodes to a rack (each such part starts a new rack).
// InvalidArgument quoting the bad part otherwise.
Result<std::vector<model::Node>> ParseNodeSpec(std::string_view spec);

// Nodes from "gen:SPEC" (ParseNodeSpec), a "*.jsonl" file (ReadNodesJsonl) or an openb node list
// CSV (ReadOpenbNodes, GPU nodes only).
Result<std::vector<model::Node>> LoadNodes(const std::string& source);

}  // namespace corral::sim
