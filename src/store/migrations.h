// Schema migrations: a versioned list of DDL scripts. A store records the versions it has applied
// in its schema_version table; opening it applies the newer ones, all in one transaction, and
// refuses a store whose schema is newer than the binary knows.
//
// A migration, once released, never changes: a new column or constraint is a new migration.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "store/sql_connection.h"

namespace corral::store {

// Which databases run a migration's DDL. Both record its version.
enum class MigrationOn {
  kBoth,
  kPostgresOnly,  // what only PostgreSQL needs (functions); SQLite runs nothing
};

struct Migration {
  int version = 0;  // 1, 2, 3, ... without gaps
  std::string description;
  // ';'-separated statements in the SQL both databases accept, except for "{id}", which becomes
  // the dialect's auto-increment primary key column (never reused ids on either).
  std::string ddl;
  // When not empty, what runs on SQLite instead of `ddl`: for the changes SQLite's ALTER TABLE
  // cannot make (a CHECK constraint), which it makes by rebuilding the table.
  std::string sqlite_ddl;
  MigrationOn on = MigrationOn::kBoth;
};

// corral's migrations, oldest first.
const std::vector<Migration>& StoreMigrations();

// Applies every migration of `migrations` newer than the database's schema version in one
// transaction (so a failure leaves the schema as it was), recording each in schema_version.
// FailedPrecondition when the database's version is newer than the newest of `migrations`.
// Concurrent callers on one database are serialised (SQLite: write lock; PostgreSQL: advisory
// lock), so two servers starting together migrate once.
Status ApplyMigrations(SqlConnection& conn, const std::vector<Migration>& migrations);

// The highest version recorded in schema_version; 0 for a database without one.
Result<int> SchemaVersion(SqlConnection& conn);

}  // namespace corral::store
