// The CLI's client of corral's HTTP API: where the server is and which token to send come from
// CORRAL_SERVER / CORRAL_TOKEN, else ~/.config/corral/config ({"server": URL, "token": T}).
// Errors carry the server's problem+json detail and map HTTP statuses to StatusCodes.
#pragma once

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

class ApiClient {
 public:
  explicit ApiClient(ClientConfig config);
  ~ApiClient();

  Result<nlohmann::json> Get(const std::string& path);
  Result<nlohmann::json> Post(const std::string& path, const nlohmann::json& body);
  Result<nlohmann::json> Delete(const std::string& path);
  // A raw text GET (logs); `header_out` receives X-Corral-Log-Offset if present.
  Result<std::string> GetText(const std::string& path, int64_t* next_offset);

 private:
  std::unique_ptr<httplib::Client> http_;
  std::string token_;
};

}  // namespace corral::cli
