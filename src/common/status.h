// Errors as values: Status for operations without a result, Result<T> for those with one.
// Exceptions never cross a module boundary; a Status message names what is wrong (the field,
// the file and line) so that the user can fix it without reading code.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <variant>

#include "common/units.h"

namespace corral {

enum class StatusCode {
  kOk,
  kInvalidArgument,  // bad input: a spec, a flag, a trace line
  kNotFound,
  kAlreadyExists,
  kFailedPrecondition,  // the request is valid but the state does not allow it
  kUnauthenticated,     // no or an unknown credential
  kPermissionDenied,    // a known caller who may not do this
  kResourceExhausted,
  // Not done, and nothing was done: this server cannot serve it now (it is no longer the
  // leader: its write was fenced). Safe to send again, to another server or later.
  kUnavailable,
  kIoError,
  kInternal,
};

// Returns the snake_case name of a code ("invalid_argument"), stable for JSON and logs.
const char* StatusCodeName(StatusCode code);

class Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return {}; }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "invalid_argument: jobs.jsonl:12: field 'gpus': must be >= 0".
  std::string ToString() const;

  // A refusal that may succeed later (a cap reached: ResourceExhausted) says after how long to
  // ask again; HTTP answers carry it as Retry-After. None: no such promise.
  std::optional<Seconds> retry_after() const { return retry_after_; }
  Status WithRetryAfter(Seconds after) && {
    retry_after_ = after;
    return std::move(*this);
  }
  // The same status (code, retry_after) with `prefix` before its message: context added on the
  // way up ("create user: " + ...) that keeps what a client is told to do.
  Status WithPrefix(const std::string& prefix) const {
    Status s = *this;
    s.message_ = prefix + message_;
    return s;
  }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
  std::optional<Seconds> retry_after_;
};

inline Status InvalidArgument(std::string message) {
  return {StatusCode::kInvalidArgument, std::move(message)};
}
inline Status NotFound(std::string message) { return {StatusCode::kNotFound, std::move(message)}; }
inline Status AlreadyExists(std::string message) {
  return {StatusCode::kAlreadyExists, std::move(message)};
}
inline Status FailedPrecondition(std::string message) {
  return {StatusCode::kFailedPrecondition, std::move(message)};
}
inline Status IoError(std::string message) { return {StatusCode::kIoError, std::move(message)}; }
inline Status Unauthenticated(std::string message) {
  return {StatusCode::kUnauthenticated, std::move(message)};
}
inline Status PermissionDenied(std::string message) {
  return {StatusCode::kPermissionDenied, std::move(message)};
}
// Not carried out at all, and safe to send again (see kUnavailable): ask again after
// `retry_after`, to this server or another.
inline Status Unavailable(std::string message, Seconds retry_after) {
  return Status(StatusCode::kUnavailable, std::move(message)).WithRetryAfter(retry_after);
}
// A cap reached that frees up with time: ask again after `retry_after`.
inline Status ResourceExhausted(std::string message, Seconds retry_after) {
  return Status(StatusCode::kResourceExhausted, std::move(message)).WithRetryAfter(retry_after);
}

// Either a value or a non-OK Status. Accessing value() of an error is a programming bug.
template <typename T>
class Result {
 public:
  Result(T value) : value_(std::move(value)) {}          // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) {}  // NOLINT: implicit by design

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }
  const T& value() const& { return *value_; }
  T& value() & { return *value_; }
  T&& value() && { return std::move(*value_); }
  const T& operator*() const& { return *value_; }
  T& operator*() & { return *value_; }
  const T* operator->() const { return &*value_; }
  T* operator->() { return &*value_; }

 private:
  std::optional<T> value_;
  Status status_;
};

}  // namespace corral

// Propagates a non-OK Status from an expression returning Status.
#define CORRAL_RETURN_IF_ERROR(expr)                 \
  do {                                               \
    ::corral::Status corral_status_ = (expr);        \
    if (!corral_status_.ok()) return corral_status_; \
  } while (0)
