// Runs the reconcile scenarios in testdata/reconcile.scenario (format described at its top):
// one job's run at a time, and the nodes it runs on, fed reports, heartbeat omissions, node
// checks, preemptions and cancellations, with the exact decision the reconcile core
// (reconcile.h) must make at each step.
#include <gtest/gtest.h>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <map>
#include <sstream>

#include "server/control/reconcile.h"

namespace corral::server::reconcile {
namespace {

constexpr int64_t kFirstAllocation = 100;  // task I holds allocation 100 + I
constexpr int64_t kUnknownAllocation = 999;

// key=value words (a bare word maps to "").
std::map<std::string, std::string> Fields(std::istringstream& in) {
  std::map<std::string, std::string> out;
  std::string word;
  while (in >> word) {
    const size_t eq = word.find('=');
    out[word.substr(0, eq)] = eq == std::string::npos ? "" : word.substr(eq + 1);
  }
  return out;
}

std::string Rest(std::istringstream& in) {
  std::string rest;
  std::getline(in, rest);
  const size_t start = rest.find_first_not_of(' ');
  return start == std::string::npos ? "" : rest.substr(start);
}

std::string Trim(const std::string& s) {
  const size_t a = s.find_first_not_of(' '), b = s.find_last_not_of(' ');
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

// `text` as a whole number. A bad one fails the test (the SCOPED_TRACE around each line names
// it) and reads as 0: a typo in a scenario is reported, never thrown.
template <typename Int = int>
Int Number(const std::string& text) {
  Int value = 0;
  const char* end = text.data() + text.size();
  const auto [stop, error] = std::from_chars(text.data(), end, value);
  if (text.empty() || error != std::errc() || stop != end) {
    ADD_FAILURE() << "not a number: '" << text << "'";
    return 0;
  }
  return value;
}

// The next word of `in` as a number (a missing one fails the test as a bad one does).
template <typename Int = int>
Int NextNumber(std::istream& in) {
  std::string word;
  in >> word;
  return Number<Int>(word);
}

std::optional<int> IntField(const std::map<std::string, std::string>& f, const char* key) {
  auto it = f.find(key);
  return it == f.end() ? std::nullopt : std::optional<int>(Number(it->second));
}

// "0,2" -> {0, 2}; "" -> {}.
std::vector<int> Indices(const std::string& list) {
  std::vector<int> out;
  std::stringstream in(list);
  std::string index;
  while (std::getline(in, index, ',')) out.push_back(Number(index));
  return out;
}

std::vector<int> IndicesOf(const std::vector<const store::TaskRecord*>& tasks) {
  std::vector<int> out;
  for (const store::TaskRecord* t : tasks) out.push_back(t->task_index);
  return out;
}

protocol::ProcessState ProtocolState(const std::string& name) {
  static const std::map<std::string, protocol::ProcessState> kStates = {
      {"running", protocol::ProcessState::kRunning},
      {"exited", protocol::ProcessState::kExited},
      {"killed", protocol::ProcessState::kKilled},
      {"failed_to_start", protocol::ProcessState::kFailedToStart},
      {"lost", protocol::ProcessState::kLost}};
  auto it = kStates.find(name);
  EXPECT_NE(it, kStates.end()) << "unknown report state " << name;
  return it == kStates.end() ? protocol::ProcessState::kRunning : it->second;
}

std::optional<model::TaskEndCause> Cause(const std::map<std::string, std::string>& f) {
  auto it = f.find("cause");
  if (it == f.end()) return std::nullopt;
  auto cause = model::ParseTaskEndCause(it->second);
  EXPECT_TRUE(cause.ok()) << cause.status().message();
  return cause.ok() ? std::optional(*cause) : std::nullopt;
}

std::string VerdictName(RunVerdict v) {
  switch (v) {
    case RunVerdict::kGoOn:
      return "go-on";
    case RunVerdict::kStartRunning:
      return "start-running";
    case RunVerdict::kEnd:
      return "end";
    case RunVerdict::kRequeue:
      return "requeue";
  }
  return "?";
}

std::string PreemptVerdictName(PreemptVerdict v) {
  switch (v) {
    case PreemptVerdict::kRequeue:
      return "requeue";
    case PreemptVerdict::kStopGoesOn:
      return "stop-goes-on";
  }
  return "?";
}

std::string CancelVerdictName(CancelVerdict v) {
  switch (v) {
    case CancelVerdict::kEndNow:
      return "end-now";
    case CancelVerdict::kStopRun:
      return "stop-run";
  }
  return "?";
}

// One job's run and its nodes, changed step by step as the controller would apply each
// decision.
class RunScenario {
 public:
  void Job(std::map<std::string, std::string> f) {
    auto state = model::ParseJobState(f.count("state") ? f["state"] : "running");
    ASSERT_TRUE(state.ok()) << state.status().message();
    facts_.state = *state;
    if (f.count("launcher")) {
      auto launcher = model::ParseLauncher(f["launcher"]);
      ASSERT_TRUE(launcher.ok()) << launcher.status().message();
      facts_.launcher = *launcher;
    }
    facts_.max_restarts = IntField(f, "max_restarts").value_or(0);
    facts_.restarts = IntField(f, "restarts").value_or(0);
    facts_.preemptions = IntField(f, "preemptions").value_or(0);
    facts_.resizes = IntField(f, "resizes").value_or(0);
    facts_.elastic = f.count("elastic") > 0;
    facts_.resize_budget = IntField(f, "resize_budget").value_or(0);
    // As a restarted server reads a cancellation back from the store.
    if (f.count("cancel")) end_ = CancelRequested(end_, f["cancel"]);
  }

  void Task(int index, const std::string& state, std::map<std::string, std::string> f) {
    store::TaskRecord t;
    t.task_index = index;
    t.allocation_id = kFirstAllocation + index;
    t.generation = IntField(f, "gen").value_or(1);
    t.node = f.count("node") ? f["node"] : "n1";
    auto parsed = model::ParseTaskState(state);
    ASSERT_TRUE(parsed.ok()) << parsed.status().message();
    t.state = *parsed;
    t.exit_code = IntField(f, "exit");
    t.signal = IntField(f, "signal");
    t.end_cause = Cause(f);
    if (t.state != model::TaskState::kAssigned) t.start_time = Seconds(900);
    if (model::IsEnded(t.state)) t.end_time = Seconds(950);
    if (f.count("launched") || t.state != model::TaskState::kAssigned) {
      launched_.insert(t.allocation_id);
    }
    tasks_.push_back(t);
  }

  void Note(int index, const std::string& text) { notes_[kFirstAllocation + index] = text; }
  void Now(int64_t now) { now_ = Seconds(now); }

  void Report(const std::string& who, const std::string& state,
              std::map<std::string, std::string> f, const std::string& expected) {
    protocol::TaskStatus s;
    const int64_t alloc = who == "unknown" ? kUnknownAllocation : kFirstAllocation + Number(who);
    s.key = {protocol::AllocationId(alloc), IntField(f, "gen").value_or(1)};
    s.state = ProtocolState(state);
    s.exit_code = IntField(f, "exit");
    s.signal = IntField(f, "signal");
    s.end_cause = Cause(f);
    s.started_at = Seconds(IntField(f, "started").value_or(0));
    if (auto ended = IntField(f, "ended")) s.ended_at = Seconds(*ended);
    if (f.count("message")) s.message = f["message"];
    const std::string node = f.count("node") ? f["node"] : "n1";
    ReportDecision d = DecideReport(who == "unknown" ? nullptr : &tasks_, node, s, now_);
    std::istringstream want(expected);
    std::string action;
    want >> action;
    if (action == "kill") {
      ASSERT_EQ(d.action, ReportAction::kKill);
      EXPECT_EQ(d.kill_reason, Rest(want));
    } else if (action == "ignore") {
      EXPECT_EQ(d.action, ReportAction::kIgnore) << "kill reason: " << d.kill_reason;
    } else {
      ASSERT_EQ(action, "update");
      ASSERT_EQ(d.action, ReportAction::kUpdate) << "kill reason: " << d.kill_reason;
      if (d.note) notes_[alloc] = *d.note;
      Replace(d.updated);
    }
  }

  void TaskIs(int index, const std::string& state, std::map<std::string, std::string> f) {
    const store::TaskRecord* task = TaskAt(index);
    ASSERT_NE(task, nullptr);
    const store::TaskRecord& t = *task;
    EXPECT_EQ(model::ToString(t.state), state);
    if (f.count("exit")) EXPECT_EQ(t.exit_code, IntField(f, "exit"));
    if (f.count("start")) EXPECT_EQ(t.start_time, Seconds(*IntField(f, "start")));
    if (f.count("end")) EXPECT_EQ(t.end_time, Seconds(*IntField(f, "end")));
    if (f.count("cause")) EXPECT_EQ(t.end_cause, Cause(f));
  }

  void Unreported(int index, const std::string& expected) {
    const store::TaskRecord* task = TaskAt(index);
    ASSERT_NE(task, nullptr);
    const store::TaskRecord& t = *task;
    std::optional<store::TaskRecord> ended =
        DecideUnreported(t, launched_.count(t.allocation_id) > 0, end_.Stopping(), now_);
    if (expected == "none") {
      EXPECT_FALSE(ended.has_value());
      return;
    }
    ASSERT_TRUE(ended.has_value());
    EXPECT_EQ(model::ToString(ended->state), expected);
    EXPECT_EQ(ended->end_time, now_);
    Replace(*ended);
  }

  void LoseNode(const std::string& node, const std::string& reason) {
    NodeLoss loss = reconcile::LoseNode(end_, tasks_, node, reason, now_);
    for (const auto& t : loss.lost) Replace(t);
    end_ = loss.end;
  }

  void Evaluate(const std::string& expected) {
    RunDecision d = EvaluateRun(facts_, end_, {tasks_, launched_, notes_}, now_);
    std::istringstream want(expected);
    std::string verdict;
    want >> verdict;
    EXPECT_EQ(VerdictName(d.verdict), verdict);
    std::string word;
    std::vector<int> stop_expected;
    while (want >> word) {
      if (word.rfind("stop=", 0) == 0) {
        stop_expected = Indices(word.substr(5));
      } else {
        EXPECT_EQ(model::ToString(d.end_state), word);
      }
    }
    std::vector<int> stopped;
    for (const auto& t : d.stop) {
      stopped.push_back(t.task_index);
      EXPECT_EQ(t.state, model::TaskState::kKilled);
      EXPECT_EQ(t.end_time, now_);
      Replace(t);
    }
    EXPECT_EQ(stopped, stop_expected);
    end_ = d.end;
    reason_ = d.reason;
  }

  void Cancel(const std::string& reason, const std::string& expected) {
    const CancelVerdict verdict = DecideCancel(facts_.state);
    EXPECT_EQ(CancelVerdictName(verdict), expected);
    if (verdict == CancelVerdict::kStopRun) end_ = CancelRequested(end_, reason);
  }

  // Applied as the controller does: the killed tasks are stored, and a requeued job is pending
  // again with one more restart (its run is over; its tasks stay here to be looked at).
  void Preempt(const std::string& expected) {
    PreemptDecision d =
        reconcile::Preempt(end_, facts_.preemptions, {tasks_, launched_, notes_}, now_);
    std::istringstream want(expected);
    std::string verdict;
    want >> verdict;
    EXPECT_EQ(PreemptVerdictName(d.verdict), verdict);
    std::map<std::string, std::string> f = Fields(want);
    std::vector<int> waits;
    for (const auto& [node, alloc] : d.waits) {
      const int index = static_cast<int>(alloc - kFirstAllocation);
      const store::TaskRecord* task = TaskAt(index);
      ASSERT_NE(task, nullptr);
      EXPECT_EQ(node, task->node) << "task " << index << " waited for elsewhere";
      waits.push_back(index);
    }
    EXPECT_EQ(waits, Indices(f["wait"]));
    std::vector<int> killed;
    for (const auto& t : d.killed) {
      killed.push_back(t.task_index);
      EXPECT_EQ(t.state, model::TaskState::kKilled);
      EXPECT_EQ(t.end_time, now_);
      Replace(t);
    }
    EXPECT_EQ(killed, Indices(f["kill"]));
    EXPECT_EQ(d.preemptions, IntField(f, "preemptions").value_or(facts_.preemptions));
    if (d.verdict == PreemptVerdict::kRequeue) {
      facts_.state = model::JobState::kPending;
      ++facts_.restarts;
    }
    facts_.preemptions = d.preemptions;
  }

  void Node(const std::string& name, std::map<std::string, std::string> f) {
    NodeLiveness node{name, model::NodeState::kReady,
                      Seconds(IntField(f, "heartbeat").value_or(0))};
    if (f.count("state")) {
      auto state = model::ParseNodeState(f["state"]);
      ASSERT_TRUE(state.ok()) << state.status().message();
      node.state = *state;
    }
    nodes_.push_back(node);
  }

  // The nodes that timed out are marked (unreachable or lost); the run is fenced or kept on an
  // unreachable node, and loses its tasks on a lost one, when it has a live task there (the
  // jobs the controller finds on the node). Expected: "unreachable=n1,n2 lost=n3" or "none".
  void CheckNodes(std::map<std::string, std::string> f, const std::string& expected) {
    NodeTimings timings;
    timings.node_timeout = Seconds(IntField(f, "timeout").value_or(30));
    timings.give_up = Seconds(IntField(f, "give-up").value_or(3600));
    std::vector<std::string> unreachable, lost, reasons;
    for (const LostNode& timed_out : TimedOutNodes(nodes_, timings, now_)) {
      const bool give_up = timed_out.verdict == NodeVerdict::kGiveUp;
      (give_up ? lost : unreachable).push_back(timed_out.name);
      reasons.push_back(timed_out.reason);
      for (auto& n : nodes_) {
        if (n.name != timed_out.name) continue;
        if (give_up) n.state = model::NodeState::kLost;
        n.unreachable = true;
      }
      const bool holds = std::any_of(tasks_.begin(), tasks_.end(), [&](const auto& t) {
        return t.node == timed_out.name && !model::IsEnded(t.state);
      });
      if (!holds) continue;
      if (give_up) {
        LoseNode(timed_out.name, timed_out.reason);
      } else if (auto fenced = NodeUnreachable(facts_, end_, tasks_, timed_out.name,
                                               timed_out.reason, now_)) {
        for (const auto& t : fenced->lost) Replace(t);
        end_ = fenced->end;
        reasons.back() += " [fenced]";
      } else {
        reasons.back() += " [kept]";
      }
    }
    std::string got;
    if (!unreachable.empty()) got += "unreachable=" + Join(unreachable, ",");
    if (!lost.empty()) got += std::string(got.empty() ? "" : " ") + "lost=" + Join(lost, ",");
    EXPECT_EQ(got, expected == "none" ? "" : expected);
    reason_ = Join(reasons, "; ");
  }

  // CheckNodeTimings: "ok", or its error message.
  void Timings(std::map<std::string, std::string> f, const std::string& expected) {
    NodeTimings timings;
    timings.node_timeout = Seconds(IntField(f, "timeout").value_or(30));
    timings.fence_after = Seconds(IntField(f, "fence-after").value_or(10));
    timings.kill_grace = Seconds(IntField(f, "kill-grace").value_or(10));
    timings.give_up = Seconds(IntField(f, "give-up").value_or(3600));
    const Status s = CheckNodeTimings(timings);
    EXPECT_EQ(s.ok() ? "ok" : s.message(), expected);
  }

  // The launches are marked launched, as the controller does when it sends them.
  void Answer(const std::string& node, std::map<std::string, std::string> f,
              const std::string& expected) {
    std::set<int64_t> starting;
    for (int index : Indices(f["starting"])) starting.insert(kFirstAllocation + index);
    std::set<TaskOnNode> waits_for;
    if (f.count("held")) waits_for.insert({"n9", kUnknownAllocation});
    const NodeOrders orders = HeartbeatOrders(node, tasks_, end_, waits_for, starting);
    std::istringstream want(expected);
    std::map<std::string, std::string> w = Fields(want);
    EXPECT_EQ(IndicesOf(orders.launch), Indices(w["launch"]));
    EXPECT_EQ(IndicesOf(orders.stop), Indices(w["stop"]));
    for (const store::TaskRecord* t : orders.launch) launched_.insert(t->allocation_id);
    reason_ = orders.stop_reason;
  }

  const std::string& reason() const { return reason_; }

 private:
  // Task `index`, or a test failure (nullptr) when the scenario has no such task.
  const store::TaskRecord* TaskAt(int index) const {
    if (index >= 0 && static_cast<size_t>(index) < tasks_.size()) return &tasks_[index];
    ADD_FAILURE() << "no task " << index;
    return nullptr;
  }

  void Replace(const store::TaskRecord& updated) {
    for (auto& t : tasks_) {
      if (t.allocation_id == updated.allocation_id) t = updated;
    }
  }

  static std::string Join(const std::vector<std::string>& words, const std::string& separator) {
    std::string out;
    for (const auto& w : words) out += (out.empty() ? "" : separator) + w;
    return out;
  }

  RunFacts facts_;
  RunEnd end_;
  std::vector<NodeLiveness> nodes_;
  std::vector<store::TaskRecord> tasks_;
  std::set<int64_t> launched_;
  std::map<int64_t, std::string> notes_;
  Seconds now_{1000};
  std::string reason_;
};

TEST(ReconcileScenarios, AllScenariosHold) {
  std::ifstream file(CORRAL_RECONCILE_TESTDATA "/reconcile.scenario");
  ASSERT_TRUE(file) << "cannot open scenarios";
  std::unique_ptr<RunScenario> current;
  std::string name, line;
  int number = 0, scenarios = 0, decisions = 0;
  while (std::getline(file, line)) {
    ++number;
    if (line.empty() || line[0] == '#') continue;
    std::istringstream in(line);
    std::string verb;
    in >> verb;
    if (verb == "scenario") {
      in >> name;
      current = std::make_unique<RunScenario>();
      ++scenarios;
      continue;
    }
    ASSERT_TRUE(current) << "line " << number << ": no scenario started";
    SCOPED_TRACE(name + " line " + std::to_string(number) + ": " + line);
    std::string rest = Rest(in);
    const size_t arrow = rest.find("->");
    const std::string expected = arrow == std::string::npos ? "" : Trim(rest.substr(arrow + 2));
    std::istringstream args(arrow == std::string::npos ? rest : rest.substr(0, arrow));
    if (verb == "job") {
      current->Job(Fields(args));
    } else if (verb == "task" || verb == "task-is") {
      const int index = NextNumber(args);
      std::string state;
      args >> state;
      if (verb == "task") {
        current->Task(index, state, Fields(args));
      } else {
        current->TaskIs(index, state, Fields(args));
      }
    } else if (verb == "note") {
      const int index = NextNumber(args);
      current->Note(index, Rest(args));
    } else if (verb == "now") {
      current->Now(NextNumber<int64_t>(args));
    } else if (verb == "node") {
      std::string node;
      args >> node;
      current->Node(node, Fields(args));
    } else if (verb == "report") {
      ASSERT_NE(arrow, std::string::npos) << "report needs '->'";
      std::string who, state;
      args >> who >> state;
      current->Report(who, state, Fields(args), expected);
      ++decisions;
    } else if (verb == "unreported") {
      ASSERT_NE(arrow, std::string::npos) << "unreported needs '->'";
      current->Unreported(NextNumber(args), expected);
      ++decisions;
    } else if (verb == "lose-node") {
      std::string node;
      args >> node;
      current->LoseNode(node, Rest(args));
    } else if (verb == "check-nodes") {
      ASSERT_NE(arrow, std::string::npos) << "check-nodes needs '->'";
      current->CheckNodes(Fields(args), expected);
      ++decisions;
    } else if (verb == "timings") {
      ASSERT_NE(arrow, std::string::npos) << "timings needs '->'";
      current->Timings(Fields(args), expected);
      ++decisions;
    } else if (verb == "answer") {
      ASSERT_NE(arrow, std::string::npos) << "answer needs '->'";
      std::string node;
      args >> node;
      current->Answer(node, Fields(args), expected);
      ++decisions;
    } else if (verb == "preempt") {
      ASSERT_NE(arrow, std::string::npos) << "preempt needs '->'";
      current->Preempt(expected);
      ++decisions;
    } else if (verb == "cancel") {
      ASSERT_NE(arrow, std::string::npos) << "cancel needs '->'";
      current->Cancel(Trim(Rest(args)), expected);
      ++decisions;
    } else if (verb == "evaluate") {
      ASSERT_NE(arrow, std::string::npos) << "evaluate needs '->'";
      current->Evaluate(expected);
      ++decisions;
    } else if (verb == "reason") {
      EXPECT_EQ(current->reason(), rest);
    } else {
      FAIL() << "line " << number << ": unknown verb '" << verb << "'";
    }
  }
  EXPECT_GE(scenarios, 34);
  EXPECT_GE(decisions, 100);
}

}  // namespace
}  // namespace corral::server::reconcile
