// The limits a call gets (patience.hpp): learnt per kind of call and by its work, the layer's
// projections included (issue 36: a layer's first call got the forward's 1 s).
#include "attncheck/patience.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

namespace attncheck {
namespace {

using protocol::Request;

Request forward(int32_t T) {
  Request r{};
  r.header = {ATTNCHECK_F32, 0, 1, 2, 2, T, T, 16, 16, 0, -1, -1, 0, 0};
  return r;
}
Request layer(int32_t T, int32_t D) {
  Request r = forward(T);
  r.header.flags = protocol::kLayer;
  r.layer.D = D;
  return r;
}

TEST(Patience, TheFirstCallOfAKindGetsTheCeiling) {
  Patience patience(30, true, false);
  patience.record(forward(8), 0.01);
  EXPECT_TRUE(patience.for_call(forward(8)).learnt);
  EXPECT_EQ(patience.for_call(forward(8)).cpu, 1);  // the floor: ten times 0.01 s is less
  const CallLimits first_layer = patience.for_call(layer(8, 64));
  EXPECT_FALSE(first_layer.learnt);
  EXPECT_EQ(first_layer.cpu, 30);
  patience.new_child();
  EXPECT_FALSE(patience.for_call(forward(8)).learnt);
}

TEST(Patience, ALayersWorkCountsItsModelWidth) {
  Patience patience(30, true, false);
  patience.record(layer(8, 16), 0.5);
  EXPECT_EQ(patience.for_call(layer(8, 16)).cpu, 5);
  // The same attention with projections 32 times as wide: more than the square of no ratio at all.
  EXPECT_GT(patience.for_call(layer(8, 512)).cpu, 5);
}

TEST(Patience, AConfirmationIsFarMorePatientWithinTheCeiling) {
  Patience patience(30, true, false);
  const CallLimits again = patience.to_confirm({1, 3, 300, true});
  EXPECT_EQ(again.cpu, 2);
  EXPECT_EQ(again.blocked, 6);
  EXPECT_FALSE(again.learnt);
  EXPECT_EQ(patience.to_confirm({20, 20, 300, true}).cpu, 30);
}

TEST(Patience, FixedLimitsAreTheCeilingForEveryCall) {
  Patience patience(0.5, false, false);
  patience.record(forward(8), 0.01);
  const CallLimits limits = patience.for_call(forward(8));
  EXPECT_EQ(limits.cpu, 0.5);
  EXPECT_EQ(limits.blocked, 0.5);
  EXPECT_FALSE(limits.learnt);
}

// A child in a group of its own that spins, then one that sleeps: busy and working, then neither.
TEST(GroupWork, SeesAGroupWorkAndThenBlock) {
  for (const bool spins : {true, false}) {
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      setpgid(0, 0);
      for (volatile double sink = 0; spins;) sink = sink + 1;
      pause();
      _exit(0);
    }
    setpgid(child, child);
    usleep(300000);
    for (const bool leader_only : {false, true}) {
      const GroupWork work = group_work(child, leader_only);
      EXPECT_EQ(work.cpu > 0.05, spins) << work.cpu;
      EXPECT_EQ(work.busy, spins);
    }
    kill(child, SIGKILL);
    waitpid(child, nullptr, 0);
  }
}

}  // namespace
}  // namespace attncheck
