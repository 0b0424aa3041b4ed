#include "server/control/rendezvous_ports.h"

#include <gtest/gtest.h>

namespace corral::server {
namespace {

TEST(RendezvousPorts, BlocksDoNotOverlapOnASharedNode) {
  RendezvousPorts ports;
  EXPECT_EQ(*ports.Reserve(JobId(1), {"a", "b"}, 2), model::kFirstRendezvousPort);
  // c shares nothing with job 1: the first block again.
  EXPECT_EQ(*ports.Reserve(JobId(2), {"c"}, 4), model::kFirstRendezvousPort);
  // b and c: past job 1's block on b and job 2's on c.
  EXPECT_EQ(*ports.Reserve(JobId(3), {"b", "c"}, 1), model::kFirstRendezvousPort + 4);
  EXPECT_EQ(ports.Reserve(JobId(3), {"d"}, 1).status().code(), StatusCode::kAlreadyExists);
  ports.Release(JobId(1));
  EXPECT_EQ(*ports.Reserve(JobId(4), {"a", "b"}, 2), model::kFirstRendezvousPort);
  ports.Release(JobId(99));  // holds nothing: no effect
}

TEST(RendezvousPorts, ExhaustionAndRestore) {
  RendezvousPorts ports;
  const int span = model::kLastRendezvousPort - model::kFirstRendezvousPort + 1;
  ASSERT_TRUE(ports.Restore(JobId(1), {"a"}, model::kFirstRendezvousPort + 1, span - 1).ok());
  EXPECT_EQ(ports.Reserve(JobId(2), {"a"}, 2).status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(*ports.Reserve(JobId(3), {"a"}, 1), model::kFirstRendezvousPort);  // the one left
  EXPECT_FALSE(ports.Restore(JobId(4), {"a"}, 80, 1).ok());
  EXPECT_FALSE(ports.Restore(JobId(1), {"b"}, model::kFirstRendezvousPort, 1).ok());
  EXPECT_EQ(ports.Restore(JobId(5), {"a"}, model::kFirstRendezvousPort + 5, 1).code(),
            StatusCode::kAlreadyExists);  // inside job 1's block on a
}

}  // namespace
}  // namespace corral::server
