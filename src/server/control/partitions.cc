#include "server/control/partitions.h"

#include <algorithm>

#include "common/duration.h"
#include "common/strings.h"

namespace corral::server {
namespace {

template <typename Row>
std::string NamesOf(const std::vector<Row>& rows) {
  std::vector<std::string> names;
  for (const Row& row : rows) names.push_back(row.name);
  return Join(names, ", ");
}

Status ApplyPartition(const protocol::Partition& p, protocol::JobSpec& spec) {
  std::vector<std::string>& models = spec.resources.gpu_models;
  if (!p.gpu_models.empty()) {
    if (models.empty()) {
      models = p.gpu_models;
    } else {
      for (const std::string& model : models) {
        if (std::find(p.gpu_models.begin(), p.gpu_models.end(), model) == p.gpu_models.end()) {
          return InvalidArgument("field 'resources.gpu_models': partition '" + p.name +
                                 "' has GPU models " + Join(p.gpu_models, ", ") + ", not '" +
                                 model + "'");
        }
      }
    }
  }
  if (p.max_time_s > 0) {
    if (spec.time_limit_s == 0) {
      spec.time_limit_s = p.max_time_s;
    } else if (spec.time_limit_s > p.max_time_s) {
      return InvalidArgument("field 'time_limit_s': partition '" + p.name + "' allows at most " +
                             FormatDuration(Seconds(p.max_time_s)) + ", asked " +
                             FormatDuration(Seconds(spec.time_limit_s)));
    }
  }
  return Status::Ok();
}

}  // namespace

Result<std::vector<std::string>> ApplyPartitions(const protocol::PartitionTable& table,
                                                 protocol::JobSpec& spec) {
  std::vector<std::string> warnings;
  if (!spec.partition.empty() && table.partitions.empty()) {
    warnings.push_back("partition '" + spec.partition +
                       "' ignored: this cluster defines no partitions");
    spec.partition.clear();
  }
  const protocol::Partition* partition = nullptr;
  for (const protocol::Partition& p : table.partitions) {
    if (spec.partition.empty() ? p.is_default : p.name == spec.partition) partition = &p;
  }
  if (!spec.partition.empty() && partition == nullptr) {
    return InvalidArgument("field 'partition': no partition '" + spec.partition +
                           "' here; there are: " + NamesOf(table.partitions));
  }
  if (partition != nullptr) {
    spec.partition = partition->name;
    CORRAL_RETURN_IF_ERROR(ApplyPartition(*partition, spec));
  }
  if (!spec.qos.empty() && table.qos.empty()) {
    warnings.push_back("qos '" + spec.qos + "' ignored: this cluster defines no QoS");
    spec.qos.clear();
  }
  if (!spec.qos.empty()) {
    auto q = std::find_if(table.qos.begin(), table.qos.end(),
                          [&](const protocol::Qos& row) { return row.name == spec.qos; });
    if (q == table.qos.end()) {
      return InvalidArgument("field 'qos': no QoS '" + spec.qos +
                             "' here; there are: " + NamesOf(table.qos));
    }
    if (spec.priority == 0) spec.priority = q->priority;
  }
  return warnings;
}

}  // namespace corral::server
