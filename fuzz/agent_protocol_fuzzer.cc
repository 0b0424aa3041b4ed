// Fuzzes the agent protocol's codec (protocol/agent_messages.h) on both sides: what the server
// reads from anyone holding the join token or a node token (a registration, a heartbeat's or a
// push's report), and what an agent reads from its server (the register and heartbeat answers,
// launch orders included). The input's first byte picks the message (its value modulo 4: 0 a
// registration, 1 a report, 2 a register answer, 3 a report answer); the rest is the body, read
// with ParseJson's limits for that side.
//
// What must hold, for any input: no crash, no uncaught exception, no leak, no ASan or UBSan
// report, and bounded time; and for a message the codec accepts, its encoding (ToJson) dumps,
// is accepted again and encodes the same (what one side sends, the other reads).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string_view>

#include "common/json_parse.h"
#include "protocol/agent_messages.h"

namespace {

namespace protocol = corral::protocol;

void Check(bool holds) {
  if (!holds) std::abort();
}

// `parse` accepted a message: its encoding is accepted again and encodes the same.
template <typename Message, typename Parse>
void CheckRoundTrip(const Message& message, Parse parse) {
  const nlohmann::json sent = protocol::ToJson(message);
  (void)sent.dump();
  auto read = parse(sent);
  Check(read.ok());
  Check(protocol::ToJson(*read) == sent);
}

// As the server's register route reads it: the version first, then the rest.
void Registration(const nlohmann::json& body) {
  auto version = protocol::ReadProtocolVersion(body);
  if (!version.ok()) return;
  (void)protocol::CheckAgentProtocolVersion(*version, "0.1.0", corral::Seconds(30));
  auto request = protocol::ParseRegisterRequest(body);
  if (request.ok()) CheckRoundTrip(*request, protocol::ParseRegisterRequest);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const int kind = data[0] % 4;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  const bool to_server = kind < 2;
  auto body = corral::ParseJson(text, to_server ? "request body" : "answer",
                                to_server ? corral::JsonLimits{} : corral::kServerAnswerLimits);
  if (!body.ok()) return 0;
  switch (kind) {
    case 0:
      Registration(*body);
      break;
    case 1:
      if (auto report = protocol::ParseReport(*body); report.ok()) {
        CheckRoundTrip(*report, protocol::ParseReport);
      }
      break;
    case 2:
      if (auto answer = protocol::ParseRegisterAnswer(*body); answer.ok()) {
        CheckRoundTrip(*answer, protocol::ParseRegisterAnswer);
      }
      break;
    case 3:
      if (auto answer = protocol::ParseReportAnswer(*body); answer.ok()) {
        CheckRoundTrip(*answer, protocol::ParseReportAnswer);
      }
      break;
  }
  return 0;
}
