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

TEST(RendezvousPorts, EachClusterSearchesFromItsOwnPlaceThenWrapsAround) {
  const int a = RendezvousPorts::SearchStartFor("2f6c1a0e-cluster-a");
  const int b = RendezvousPorts::SearchStartFor("93d0b7c4-cluster-b");
  EXPECT_EQ(a, RendezvousPorts::SearchStartFor("2f6c1a0e-cluster-a"));  // stable
  EXPECT_NE(a, b);  // two clusters on one host: their first jobs get other blocks
  for (int start : {a, b}) {
    EXPECT_GE(start, model::kFirstRendezvousPort);
    EXPECT_LE(start, model::kLastRendezvousPort);
    EXPECT_EQ((start - model::kFirstRendezvousPort) % RendezvousPorts::kSearchStep, 0);
  }
  // From near the end of the range, a block that does not fit there comes from the start.
  RendezvousPorts ports(model::kLastRendezvousPort - 3);
  EXPECT_EQ(*ports.Reserve(JobId(1), {"a"}, 4), model::kLastRendezvousPort - 3);
  EXPECT_EQ(*ports.Reserve(JobId(2), {"a"}, 2), model::kFirstRendezvousPort);
}

}  // namespace
}  // namespace corral::server
