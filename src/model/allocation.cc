#include "model/allocation.h"

#include <cstdint>
#include <nlohmann/json.hpp>
#include <set>

namespace corral::model {
namespace {

using nlohmann::json;

Status BadField(const std::string& field, const std::string& why) {
  return InvalidArgument("field '" + field + "': " + why);
}

bool IsPort(int port) { return port >= 1 && port <= 65535; }

// The member `name` of `object` (`field` names it in errors): an integer in [min, max].
Result<int64_t> IntIn(const json& object, const char* name, const std::string& field, int64_t min,
                      int64_t max) {
  auto it = object.find(name);
  if (it == object.end() || it->is_null()) return BadField(field, "is required");
  if (!it->is_number_integer()) return BadField(field, "must be an integer");
  const int64_t v = it->get<int64_t>();
  if (v < min || v > max) {
    return BadField(field, "must be " + std::to_string(min) + ".." + std::to_string(max) +
                               ", got " + std::to_string(v));
  }
  return v;
}

Result<std::string> StringOf(const json& object, const char* name, const std::string& field) {
  auto it = object.find(name);
  if (it == object.end() || it->is_null()) return BadField(field, "is required");
  if (!it->is_string()) return BadField(field, "must be a string");
  return it->get<std::string>();
}

// The optional object member `name`; null when absent.
Result<const json*> ObjectOf(const json& object, const char* name) {
  auto it = object.find(name);
  if (it == object.end() || it->is_null()) return nullptr;
  if (!it->is_object()) return BadField(name, "must be an object");
  return &*it;
}

Result<Allocation> Read(const json& j) {
  if (!j.is_object()) return InvalidArgument("must be a JSON object");
  constexpr int64_t kMaxInt = INT32_MAX;
  Allocation a;
  auto gpus = j.find("gpus");
  if (gpus == j.end() || gpus->is_null()) return BadField("gpus", "is required");
  if (!gpus->is_array()) return BadField("gpus", "must be an array");
  for (size_t i = 0; i < gpus->size(); ++i) {
    const std::string field = "gpus[" + std::to_string(i) + "]";
    const json& g = (*gpus)[i];
    if (!g.is_object()) return BadField(field, "must be an object");
    auto index = IntIn(g, "index", field + ".index", 0, kMaxInt);
    if (!index.ok()) return index.status();
    auto milli = IntIn(g, "milli", field + ".milli", 1, kWholeGpu.value());
    if (!milli.ok()) return milli.status();
    a.gpus.push_back({static_cast<int>(*index), MilliGpu(*milli)});
  }
  auto cpu = IntIn(j, "cpu_milli", "cpu_milli", 0, INT64_MAX);
  if (!cpu.ok()) return cpu.status();
  a.cpu = CpuMilli(*cpu);
  auto memory = IntIn(j, "memory_mib", "memory_mib", 0, INT64_MAX);
  if (!memory.ok()) return memory.status();
  a.memory = MemoryMib(*memory);

  auto session = ObjectOf(j, "session");
  if (!session.ok()) return session.status();
  if (*session != nullptr) {
    SessionEndpoint s;
    auto address = StringOf(**session, "address", "session.address");
    if (!address.ok()) return address.status();
    s.address = std::move(address).value();
    auto port = IntIn(**session, "port", "session.port", 1, 65535);
    if (!port.ok()) return port.status();
    s.port = static_cast<int>(*port);
    a.session = std::move(s);
  }

  auto rendezvous = ObjectOf(j, "rendezvous");
  if (!rendezvous.ok()) return rendezvous.status();
  if (*rendezvous != nullptr) {
    const json& r = **rendezvous;
    Rendezvous out;
    auto master = StringOf(r, "master_addr", "rendezvous.master_addr");
    if (!master.ok()) return master.status();
    out.master_addr = std::move(master).value();
    auto port = IntIn(r, "port", "rendezvous.port", 1, 65535);
    if (!port.ok()) return port.status();
    out.port = static_cast<int>(*port);
    auto hosts = r.find("hosts");
    if (hosts == r.end() || !hosts->is_array()) {
      return BadField("rendezvous.hosts", "must be an array of strings");
    }
    for (const json& h : *hosts) {
      if (!h.is_string()) return BadField("rendezvous.hosts", "must be an array of strings");
      out.hosts.push_back(h.get<std::string>());
    }
    a.rendezvous = std::move(out);
  }
  CORRAL_RETURN_IF_ERROR(Validate(a));
  return a;
}

}  // namespace

Status Validate(const Allocation& a) {
  std::set<int> seen;
  for (size_t i = 0; i < a.gpus.size(); ++i) {
    const std::string field = "gpus[" + std::to_string(i) + "]";
    const GpuShare& g = a.gpus[i];
    if (g.index < 0) return BadField(field + ".index", "must be >= 0");
    if (g.milli.value() < 1 || g.milli > kWholeGpu) {
      return BadField(field + ".milli", "must be 1..1000, got " + std::to_string(g.milli.value()));
    }
    if (!seen.insert(g.index).second) {
      return BadField(field + ".index", "GPU " + std::to_string(g.index) + " is listed twice");
    }
  }
  if (a.cpu.value() < 0) return BadField("cpu_milli", "must be >= 0");
  if (a.memory.value() < 0) return BadField("memory_mib", "must be >= 0");
  if (a.session) {
    if (a.session->address.empty()) return BadField("session.address", "must not be empty");
    if (!IsPort(a.session->port)) return BadField("session.port", "must be 1..65535");
  }
  if (a.rendezvous) {
    if (a.rendezvous->master_addr.empty()) {
      return BadField("rendezvous.master_addr", "must not be empty");
    }
    if (!IsPort(a.rendezvous->port)) return BadField("rendezvous.port", "must be 1..65535");
    if (a.rendezvous->hosts.empty()) return BadField("rendezvous.hosts", "must not be empty");
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
  Result<Allocation> a = Read(j);
  if (!a.ok()) return InvalidArgument("allocation: " + a.status().message());
  return a;
}

}  // namespace corral::model
