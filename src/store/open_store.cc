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
  std::unique_ptr<SqlConnection> conn;
  if (scheme == "sqlite") {
    std::string path = url.substr(scheme.size() + 1);
    // "sqlite:///abs/file.db" and "sqlite://rel.db" are read like "sqlite:/abs/..." and
    // "sqlite:rel.db", for those used to URL-style SQLite paths.
    if (path.rfind("//", 0) == 0) path = path.substr(2);
    if (path.empty()) {
      return InvalidArgument("store URL '" + shown + "': missing the database file (" + kExpected +
                             ")");
    }
    auto sqlite = SqliteConnection::Open(path);
    if (!sqlite.ok()) return sqlite.status();
    conn = std::move(sqlite).value();
  } else if (scheme == "postgres" || scheme == "postgresql") {
    auto pg = PostgresConnection::Open(url);
    if (!pg.ok()) return pg.status();
    conn = std::move(pg).value();
  } else if (scheme.empty()) {
    return InvalidArgument("store URL '" + shown + "' has no scheme; " + kExpected);
  } else {
    return InvalidArgument("store URL '" + shown + "': unknown scheme '" + std::string(scheme) +
                           "'; " + kExpected);
  }
  auto store = SqlStore::Create(std::move(conn), shown);
  if (!store.ok()) return store.status();
  return std::unique_ptr<Store>(std::move(store).value());
}

}  // namespace corral::store
