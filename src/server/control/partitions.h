// What a submitted job's `partition` and `qos` mean on this cluster (docs/batch.md,
// "Partitions and QoS"): the server's table (--partitions-file, protocol/api_partitions.h)
// applied to the spec at submission (Controller::Admit). Pure.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "protocol/api_partitions.h"
#include "protocol/job_spec.h"

namespace corral::server {

// Applies `table` to `spec`:
//  - partition: the named one, else the table's default one (none: nothing). Its gpu_models
//    become the job's when the job names none, and bound them when it does; its max_time_s
//    becomes the job's time limit when the job has none, and bounds it when it has one.
//  - qos: its priority becomes the job's when the job's is 0 (none given).
// A name the table lacks is InvalidArgument naming the field and the names there are; with no
// partitions (no QoS) in the table at all, a named one is dropped from the spec and the returned
// warnings say so ("partition 'gpu' ignored: this cluster defines no partitions"), so that a
// Slurm script with -p runs unchanged.
Result<std::vector<std::string>> ApplyPartitions(const protocol::PartitionTable& table,
                                                 protocol::JobSpec& spec);

}  // namespace corral::server
