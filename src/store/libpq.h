// libpq, loaded at run time: only a store opened on a PostgreSQL URL needs it, and linking it
// would load it (and the Kerberos, LDAP and TLS libraries it pulls in) into every `corral` call,
// the CLI's included. The table's types come from libpq-fe.h, so a signature that changes breaks
// the build rather than a call.
//
// Thread safety: LoadLibPq() may be called from any thread; the table it returns is immutable and
// lives until the process exits (the library is never unloaded).
#pragma once

#include <libpq-fe.h>

#include "common/status.h"

namespace corral::store {

// Every libpq function the PostgreSQL driver calls; one X(name) per function.
#define CORRAL_LIBPQ_FUNCTIONS(X) \
  X(PQclear)                      \
  X(PQcmdStatus)                  \
  X(PQcmdTuples)                  \
  X(PQconnectdbParams)            \
  X(PQenterPipelineMode)          \
  X(PQerrorMessage)               \
  X(PQexec)                       \
  X(PQexitPipelineMode)           \
  X(PQfinish)                     \
  X(PQgetResult)                  \
  X(PQgetisnull)                  \
  X(PQgetlength)                  \
  X(PQgetvalue)                   \
  X(PQnfields)                    \
  X(PQntuples)                    \
  X(PQpipelineSync)               \
  X(PQprepare)                    \
  X(PQreset)                      \
  X(PQresultErrorField)           \
  X(PQresultErrorMessage)         \
  X(PQresultStatus)               \
  X(PQsendQueryParams)            \
  X(PQsendQueryPrepared)          \
  X(PQsetClientEncoding)          \
  X(PQsetNoticeProcessor)         \
  X(PQstatus)                     \
  X(PQtransactionStatus)

// The functions, named as in libpq: `pq.PQexec(conn, sql)`.
struct LibPq {
#define CORRAL_LIBPQ_MEMBER(name) decltype(&::name) name = nullptr;
  CORRAL_LIBPQ_FUNCTIONS(CORRAL_LIBPQ_MEMBER)
#undef CORRAL_LIBPQ_MEMBER
};

// Loads libpq.so.5 on first call and resolves every function above. Later calls return the same
// table, or the same error (naming the library and what to install) when loading failed.
Result<const LibPq*> LoadLibPq();

}  // namespace corral::store
