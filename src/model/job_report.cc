#include "model/job_report.h"

namespace corral::model {

bool IsMetricKey(std::string_view key) {
  if (key.empty() || key.size() > kMaxMetricKeyBytes) return false;
  for (char c : key) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '.' || c == ':' || c == '/' || c == '-';
    if (!ok) return false;
  }
  return true;
}

}  // namespace corral::model
