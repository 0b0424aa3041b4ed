#include "protocol/api_partitions.h"

#include <nlohmann/json.hpp>
#include <set>

#include "common/json_fields.h"
#include "protocol/names.h"

namespace corral::protocol {
namespace {

constexpr size_t kMaxTableRows = 256;
constexpr int64_t kMaxPriority = 1000;  // a spec's priority bound (job_spec.h)

// The name of a row, unique in its list.
Status ReadRowName(const FieldReader& r, std::set<std::string>& seen, std::string& out) {
  CORRAL_RETURN_IF_ERROR(r.String("name", true, out));
  if (!IsValidName(NameKind::kProject, out)) {
    return r.Bad("name", "'" + out + "' is not a valid name (letters, digits, - and _)");
  }
  if (!seen.insert(out).second) return r.Bad("name", "'" + out + "' is given twice");
  return Status::Ok();
}

}  // namespace

nlohmann::json ToJson(const PartitionTable& table) {
  nlohmann::json partitions = nlohmann::json::array();
  for (const Partition& p : table.partitions) {
    partitions.push_back({{"name", p.name},
                          {"gpu_models", p.gpu_models},
                          {"max_time_s", p.max_time_s},
                          {"default", p.is_default},
                          {"description", p.description}});
  }
  nlohmann::json qos = nlohmann::json::array();
  for (const Qos& q : table.qos) {
    qos.push_back({{"name", q.name}, {"priority", q.priority}, {"description", q.description}});
  }
  return {{"partitions", partitions}, {"qos", qos}};
}

Result<PartitionTable> ParsePartitionTable(const nlohmann::json& json) {
  auto reader = ReadObject(json, "partitions");
  if (!reader.ok()) return reader.status();
  PartitionTable table;
  std::set<std::string> names;
  bool has_default = false;
  CORRAL_RETURN_IF_ERROR(reader->Objects(
      "partitions", false, kMaxTableRows, [&](const FieldReader& r, size_t) -> Status {
        Partition p;
        CORRAL_RETURN_IF_ERROR(ReadRowName(r, names, p.name));
        CORRAL_RETURN_IF_ERROR(r.Strings("gpu_models", false, p.gpu_models));
        CORRAL_RETURN_IF_ERROR(r.Int("max_time_s", false, p.max_time_s, 0, int64_t{1} << 40));
        CORRAL_RETURN_IF_ERROR(r.Bool("default", p.is_default));
        if (p.is_default && has_default) return r.Bad("default", "only one partition may be");
        has_default = has_default || p.is_default;
        CORRAL_RETURN_IF_ERROR(r.String("description", false, p.description));
        table.partitions.push_back(std::move(p));
        return Status::Ok();
      }));
  names.clear();
  CORRAL_RETURN_IF_ERROR(
      reader->Objects("qos", false, kMaxTableRows, [&](const FieldReader& r, size_t) -> Status {
        Qos q;
        CORRAL_RETURN_IF_ERROR(ReadRowName(r, names, q.name));
        int64_t priority = 0;
        CORRAL_RETURN_IF_ERROR(r.Int("priority", false, priority, -kMaxPriority, kMaxPriority));
        q.priority = static_cast<int>(priority);
        CORRAL_RETURN_IF_ERROR(r.String("description", false, q.description));
        table.qos.push_back(std::move(q));
        return Status::Ok();
      }));
  return table;
}

}  // namespace corral::protocol
