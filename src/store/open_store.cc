// OpenStore: picks the driver by URL scheme.
#include "store/postgres_connection.h"
#include "store/sql_store.h"
#include "store/sqlite_connection.h"
#include "store/store.h"
#include "store/store_url.h"

namespace corral::store {
namespace {

constexpr char kExpected[] = "expected sqlite:PATH or postgres://USER@HOST:PORT/DATABASE";

}  // namespace

Result<std::unique_ptr<Store>> OpenStore(const std::string& url) {
  const std::string shown = RedactUrl(url);
  std::string_view scheme = UrlScheme(url);
  // Two connections: the store's, and the lease's (SqlStore::Create).
  std::unique_ptr<SqlConnection> conn, lease_conn;
  if (scheme == "sqlite") {
    const std::string path = SqlitePath(url);
    if (path.empty()) {
      return InvalidArgument("store URL '" + shown + "': missing the database file (" + kExpected +
                             ")");
    }
    for (auto* c : {&conn, &lease_conn}) {
      auto sqlite = SqliteConnection::Open(path);
      if (!sqlite.ok()) return sqlite.status();
      *c = std::move(sqlite).value();
    }
  } else if (scheme == "postgres" || scheme == "postgresql") {
    for (auto* c : {&conn, &lease_conn}) {
      auto pg = PostgresConnection::Open(url);
      if (!pg.ok()) return pg.status();
      *c = std::move(pg).value();
    }
  } else if (scheme.empty()) {
    return InvalidArgument("store URL '" + shown + "' has no scheme; " + kExpected);
  } else {
    return InvalidArgument("store URL '" + shown + "': unknown scheme '" + std::string(scheme) +
                           "'; " + kExpected);
  }
  auto store = SqlStore::Create(std::move(conn), std::move(lease_conn), shown);
  if (!store.ok()) return store.status();
  return std::unique_ptr<Store>(std::move(store).value());
}

}  // namespace corral::store
