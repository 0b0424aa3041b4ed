#include "agent/stop_file.h"

#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include "agent/file_io.h"

namespace corral::agent {

std::string StopFileJson(const StopRequest& request) {
  return nlohmann::json{{"reason", request.reason},
                        {"grace_s", request.grace.value()},
                        {"deadline", request.deadline.value()}}
      .dump();
}

Status WriteStopFile(const std::string& path, const StopRequest& request) {
  CORRAL_RETURN_IF_ERROR(WriteFileAtomic(path, StopFileJson(request) + "\n"));
  if (chmod(path.c_str(), 0440) != 0) return IoError("chmod " + path + ": " + ErrnoText(errno));
  return Status::Ok();
}

}  // namespace corral::agent
