// The query of GET /api/v1/jobs (docs/openapi.yaml; docs/control-plane.md, "Listing jobs"): its
// parameters read into a store listing, and the opaque page cursor. Not for use outside
// src/server/api/.
//
// The cursor is base64url (no padding) of "1:SORT:ORDER:KEY:ID": the encoding's version, the
// listing's sort and order, and the last row's sort key (empty for sort=id, and for a job
// without the start or end time it is sorted by) and id. Clients treat it as opaque; a cursor
// of another sort or order is refused, so that a page never silently restarts elsewhere.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"
#include "server/http/http_exchange.h"
#include "store/store.h"

namespace corral::server::api_internal {

// Limits on the parameters (each refused with a 400 naming it when exceeded).
constexpr int kDefaultJobPage = 100;         // jobs per page without ?limit
constexpr int kMaxJobPage = 1000;            // the largest ?limit
constexpr size_t kMaxListedNames = 100;      // values of ?user and of ?project
constexpr size_t kMaxFilterNameBytes = 253;  // one user or project name (node names' limit)
constexpr size_t kMaxNamePrefixBytes = 128;  // ?name (job names' limit)
constexpr size_t kMaxCursorBytes = 256;

// A listing as the request asks it.
struct JobListingRequest {
  store::JobFilter listing;   // filters, sort, direction, position (`after`) and limit
  bool all_projects = false;  // ?all=1: every job the caller may see, not only their own
};

// Reads ?user, ?project (comma-separated names), ?state (comma-separated states), ?name (a job
// name prefix), ?array (an array's id), ?since (RFC 3339 or Unix seconds), ?sort (id,
// submit_time, start_time, end_time, gpus; default id), ?order (asc, desc; default desc),
// ?limit (1..1000, default 100), ?cursor (a previous page's X-Corral-Next-Cursor), ?all, and the
// deprecated ?before (an id: the jobs below it, with sort=id and order=desc only, without a
// cursor). Errors: InvalidArgument naming the parameter ("field 'sort': ...").
Result<JobListingRequest> ParseJobListing(const HttpRequest& req);

// The cursor of the page that starts after `position` in a listing by `sort` and `direction`.
std::string EncodeJobCursor(store::JobSortKey sort, store::SortDirection direction,
                            const store::JobListPosition& position);
// The position a cursor holds; InvalidArgument naming "cursor" when it does not decode, or was
// made for another sort or order.
Result<store::JobListPosition> DecodeJobCursor(std::string_view cursor, store::JobSortKey sort,
                                               store::SortDirection direction);

// "2024-05-01T12:00:00Z" (RFC 3339: 'T' or 't', a fraction of a second, ignored, and 'Z' or an
// offset "+02:00") or Unix seconds ("1714564800") as Unix seconds; InvalidArgument naming
// `field` otherwise.
Result<Seconds> ParseTimeParam(std::string_view text, std::string_view field);

}  // namespace corral::server::api_internal
