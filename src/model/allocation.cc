#include "model/allocation.h"

#include <cstdint>
#include <nlohmann/json.hpp>
#include <set>

#include "common/json_fields.h"

namespace corral::model {
namespace {

using nlohmann::json;

bool IsPort(int port) { return port >= 1 && port <= 65535; }

Result<Allocation> Read(const FieldReader& r) {
  constexpr int64_t kMaxInt = INT32_MAX;
  Allocation a;
  CORRAL_RETURN_IF_ERROR(
      r.Objects("gpus", true, kMaxGpusPerAllocation, [&](const FieldReader& g, size_t) -> Status {
        int64_t index = 0, milli = 0;
        CORRAL_RETURN_IF_ERROR(g.Int("index", true, index, 0, kMaxInt));
        CORRAL_RETURN_IF_ERROR(g.Int("milli", true, milli, 1, kWholeGpu.value()));
        a.gpus.push_back({static_cast<int>(index), MilliGpu(milli)});
        return Status::Ok();
      }));
  int64_t cpu = 0, memory = 0;
  CORRAL_RETURN_IF_ERROR(r.Int("cpu_milli", true, cpu, 0));
  CORRAL_RETURN_IF_ERROR(r.Int("memory_mib", true, memory, 0));
  a.cpu = CpuMilli(cpu);
  a.memory = MemoryMib(memory);
  CORRAL_RETURN_IF_ERROR(r.Object("session", false, [&](const FieldReader& s) -> Status {
    SessionEndpoint out;
    int64_t port = 0;
    CORRAL_RETURN_IF_ERROR(s.String("address", true, out.address));
    CORRAL_RETURN_IF_ERROR(s.Int("port", true, port, 1, 65535));
    out.port = static_cast<int>(port);
    a.session = std::move(out);
    return Status::Ok();
  }));
  CORRAL_RETURN_IF_ERROR(r.Object("rendezvous", false, [&](const FieldReader& v) -> Status {
    Rendezvous out;
    int64_t port = 0;
    CORRAL_RETURN_IF_ERROR(v.String("master_addr", true, out.master_addr));
    CORRAL_RETURN_IF_ERROR(v.Int("port", true, port, 1, 65535));
    out.port = static_cast<int>(port);
    CORRAL_RETURN_IF_ERROR(v.Strings("hosts", true, out.hosts));
    a.rendezvous = std::move(out);
    return Status::Ok();
  }));
  CORRAL_RETURN_IF_ERROR(r.Within(Validate(a)));
  return a;
}

}  // namespace

Status Validate(const Allocation& a, std::string_view field_prefix) {
  auto bad = [&](const std::string& field, const std::string& why) {
    return InvalidArgument("field '" + std::string(field_prefix) + field + "': " + why);
  };
  std::set<int> seen;
  for (size_t i = 0; i < a.gpus.size(); ++i) {
    const std::string field = "gpus[" + std::to_string(i) + "]";
    const GpuShare& g = a.gpus[i];
    if (g.index < 0) return bad(field + ".index", "must be >= 0");
    if (g.milli.value() < 1 || g.milli > kWholeGpu) {
      return bad(field + ".milli", "must be in 1..1000, got " + std::to_string(g.milli.value()));
    }
    if (!seen.insert(g.index).second) {
      return bad(field + ".index", "GPU " + std::to_string(g.index) + " is listed twice");
    }
  }
  if (a.cpu.value() < 0) return bad("cpu_milli", "must be >= 0");
  if (a.memory.value() < 0) return bad("memory_mib", "must be >= 0");
  if (a.session) {
    if (a.session->address.empty()) return bad("session.address", "must not be empty");
    if (!IsPort(a.session->port)) return bad("session.port", "must be in 1..65535");
  }
  if (a.rendezvous) {
    if (a.rendezvous->master_addr.empty()) {
      return bad("rendezvous.master_addr", "must not be empty");
    }
    if (!IsPort(a.rendezvous->port)) return bad("rendezvous.port", "must be in 1..65535");
    if (a.rendezvous->hosts.empty()) return bad("rendezvous.hosts", "must not be empty");
  }
  return Status::Ok();
}

json ToJson(const Allocation& a) {
  json gpus = json::array();
  for (const GpuShare& g : a.gpus) gpus.push_back({{"index", g.index}, {"milli", g.milli.value()}});
  json out = {
      {"gpus", std::move(gpus)}, {"cpu_milli", a.cpu.value()}, {"memory_mib", a.memory.value()}};
  if (a.session) out["session"] = {{"address", a.session->address}, {"port", a.session->port}};
  if (a.rendezvous) {
    out["rendezvous"] = {{"master_addr", a.rendezvous->master_addr},
                         {"port", a.rendezvous->port},
                         {"hosts", a.rendezvous->hosts}};
  }
  return out;
}

Result<Allocation> AllocationFromJson(const json& j) {
  Result<FieldReader> r = ReadObject(j, "allocation");
  if (!r.ok()) return r.status();
  return Read(*r);
}

}  // namespace corral::model
