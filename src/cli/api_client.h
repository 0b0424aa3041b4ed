// The CLI's client of corral's HTTP API: where the server is and which token to send come from
// CORRAL_SERVER / CORRAL_TOKEN, else ~/.config/corral/config ({"server": URL, "token": T}).
// Errors carry the server's problem+json detail and map HTTP statuses to StatusCodes.
#pragma once

#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "common/status.h"

namespace httplib {
class Client;
}

namespace corral::cli {

struct ClientConfig {
  std::string server;   // http(s)://host:port
  std::string token;    // API token; never printed
  std::string ca_cert;  // PEM bundle to verify an https server with (CORRAL_CA_CERT)
};

// Path of the config file: $XDG_CONFIG_HOME/corral/config or ~/.config/corral/config.
std::string ConfigPath();
// Reads the config file, then applies the environment. Errors: no server configured.
Result<ClientConfig> LoadClientConfig();
// Writes the config file with mode 0600 (it holds a token).
Status SaveClientConfig(const ClientConfig& config);

// A successful answer as sent: the body and the response headers.
struct Reply {
  std::string body;
  std::map<std::string, std::string> headers;  // names in lower case

  // The header's value ("" when absent); `name` in any case.
  std::string Header(std::string name) const;
  // The body parsed as JSON; Internal when it is not JSON.
  Result<nlohmann::json> Json() const;
};

class ApiClient {
 public:
  explicit ApiClient(ClientConfig config);
  ~ApiClient();

  Result<nlohmann::json> Get(const std::string& path);
  Result<nlohmann::json> Post(const std::string& path, const nlohmann::json& body);
  Result<nlohmann::json> Put(const std::string& path, const nlohmann::json& body);
  Result<nlohmann::json> Delete(const std::string& path);
  // A GET whose headers matter too (paged lists, logs); the body may be text.
  Result<Reply> GetReply(const std::string& path);
  // The HTTP status of a GET of `path` (with the token), whatever it is; IoError when the server
  // cannot be reached.
  Result<int> GetStatus(const std::string& path);
  // The same for an absolute http(s) `url` on another origin of the server (the session
  // gateway), with the token and the same certificate check; redirects are not followed.
  Result<int> GetStatusAt(const std::string& url);

 private:
  std::unique_ptr<httplib::Client> http_;
  std::string token_;
  std::string ca_cert_;
};

}  // namespace corral::cli
