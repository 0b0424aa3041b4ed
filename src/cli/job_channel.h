// What `corral job report` and `corral job checkpoint` need beyond the API client
// (docs/in-job.md): which job they speak for and with which token, and the report's body.
// Inside a job they need nothing else: its tasks get CORRAL_SERVER, CORRAL_JOB_ID and
// CORRAL_JOB_TOKEN; outside, `--job ID` and the user's token (CORRAL_TOKEN or the saved one).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cli/api_client.h"
#include "common/ids.h"
#include "common/status.h"

namespace corral::cli {

// The job of `--job` when given, else CORRAL_JOB_ID's; InvalidArgument when neither names one.
Result<JobId> ChannelJob(std::optional<int64_t> job_flag);

// Inside job `job` (CORRAL_JOB_ID names it and CORRAL_JOB_TOKEN is set), its job token replaces
// the configured one; anywhere else `config` is left as it is.
void UseJobToken(ClientConfig& config, JobId job);

// {"metrics": {...}} of KEY=VALUE items: a value that parses whole as a finite number is sent as
// a number, anything else as a string. InvalidArgument for an item without '=' or with an empty
// key; the server checks the rest (keys, sizes, counts), naming the field.
Result<nlohmann::json> ReportBody(const std::vector<std::string>& items);

}  // namespace corral::cli
