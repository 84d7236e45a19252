#include "core/resume_point.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <string>

#include "core/checkpoint.h"

namespace pacer::worker {
namespace {

namespace fs = std::filesystem;

constexpr char kJob[] = "llama-7b";
constexpr char kPlan[] = "t2 p1 v1 d4 H8";
constexpr char kEarlierPlan[] = "t2 p1 v1 d4";  // the same plan as an earlier worker wrote it

class ResumePointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "pacer-resume-XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Every rank of a `world_size` run saves `step` (keeping `keep` per rank).
  void SaveAll(int64_t step, int world_size, const std::string& plan = kPlan, int keep = 3) {
    for (int rank = 0; rank < world_size; ++rank) Save(step, rank, world_size, "run-a", plan, keep);
  }
  void Save(int64_t step, int rank, int world_size, const std::string& run_id,
            const std::string& plan = kPlan, int keep = 3) {
    CheckpointState s;
    s.step = step;
    s.rank = rank;
    s.world_size = world_size;
    s.job_name = kJob;
    s.plan_fingerprint = plan;
    s.run_id = run_id;
    if (with_buffers_) s.buffers = {{"w", std::vector<std::byte>(64, std::byte{7})}};
    ASSERT_TRUE(CheckpointStore(dir_, rank, keep).Save(s).ok());
  }
  void Truncate(int rank, int64_t step) {
    fs::resize_file(CheckpointStore(dir_, rank).PathForStep(step), 40);
  }
  ResumeChoice Choose(bool needs_same_plan = false) {
    auto choice = ChooseResumePoint(dir_, {kJob, {kPlan, kEarlierPlan}, needs_same_plan});
    EXPECT_TRUE(choice.ok()) << choice.status().ToString();
    return choice.ok() ? *choice : ResumeChoice{};
  }

  std::string dir_;
  bool with_buffers_ = true;  // false: as a worker without --checkpoint-buffers saves
};

// A checkpoint written without --checkpoint-buffers holds only the step
// counter. A worker restoring weights resumed from it, found no buffers to
// load, exited 1 and was restarted into the same failure forever.
TEST_F(ResumePointTest, RestoringWeightsSkipsCheckpointsWrittenWithout) {
  SaveAll(100, 2);
  with_buffers_ = false;
  SaveAll(200, 2);
  const ResumeChoice with = Choose(/*needs_same_plan=*/true);
  EXPECT_EQ(with.outcome, ResumeChoice::Outcome::kResume);
  EXPECT_EQ(with.step, 100);
  ASSERT_EQ(with.rejected.size(), 1u);
  EXPECT_EQ(with.rejected[0],
            "step 200: rank 0: holds no weights (written without --checkpoint-buffers)");
  EXPECT_EQ(Choose(/*needs_same_plan=*/false).step, 200);  // the step counter is all it needs

  fs::remove_all(dir_);
  SaveAll(300, 2);  // only checkpoints without weights: data loss, not a fresh start
  EXPECT_EQ(Choose(/*needs_same_plan=*/true).outcome, ResumeChoice::Outcome::kNoUsable);
}

TEST_F(ResumePointTest, NoCheckpointsIsAFreshStart) {
  const ResumeChoice choice = Choose();
  EXPECT_EQ(choice.outcome, ResumeChoice::Outcome::kFresh);
  EXPECT_EQ(choice.step, 0);
  EXPECT_EQ(choice.steps_lost(), 0);
}

TEST_F(ResumePointTest, TheNewestGoodCheckpointLosesNothing) {
  SaveAll(100, 2);
  SaveAll(200, 2);
  const ResumeChoice choice = Choose();
  EXPECT_EQ(choice.outcome, ResumeChoice::Outcome::kResume);
  EXPECT_EQ(choice.step, 200);
  EXPECT_EQ(choice.steps_lost(), 0);
  EXPECT_TRUE(choice.rejected.empty());
}

TEST_F(ResumePointTest, AnUnreadableNewestFallsBackToThePreviousAndCountsTheLoss) {
  SaveAll(100, 2);
  SaveAll(200, 2);
  Truncate(1, 200);  // one rank's newest file is torn
  const ResumeChoice choice = Choose();
  EXPECT_EQ(choice.outcome, ResumeChoice::Outcome::kResume);
  EXPECT_EQ(choice.step, 100);
  EXPECT_EQ(choice.newest_step, 200);
  EXPECT_EQ(choice.steps_lost(), 100);
  ASSERT_EQ(choice.rejected.size(), 1u);
  EXPECT_NE(choice.rejected[0].find("step 200: rank 1"), std::string::npos) << choice.rejected[0];
}

TEST_F(ResumePointTest, ACorruptRankZeroNewestFallsBackToo) {
  SaveAll(100, 1);
  SaveAll(200, 1);
  Truncate(0, 200);
  const ResumeChoice choice = Choose();
  EXPECT_EQ(choice.outcome, ResumeChoice::Outcome::kResume);
  EXPECT_EQ(choice.step, 100);
  EXPECT_EQ(choice.steps_lost(), 100);
}

TEST_F(ResumePointTest, CheckpointsNoneOfWhichIsUsableAreDataLossNotAFreshStart) {
  SaveAll(100, 2);
  SaveAll(200, 2);
  Truncate(0, 100);
  Truncate(1, 200);
  const ResumeChoice choice = Choose();
  EXPECT_EQ(choice.outcome, ResumeChoice::Outcome::kNoUsable);
  EXPECT_EQ(choice.newest_step, 200);
  EXPECT_EQ(choice.rejected.size(), 2u);
}

// Rank 0's checkpoints removed or lost while the other ranks' remain: it
// was taken for a first run (only rank 0's directory was listed), trained
// from step 0 without a word, and pruned the other ranks' checkpoints.
TEST_F(ResumePointTest, OtherRanksCheckpointsWithoutRankZerosAreDataLossNotAFreshStart) {
  SaveAll(100, 2);
  SaveAll(200, 2);
  fs::remove_all(fs::path(dir_) / "rank-0");
  const ResumeChoice choice = Choose();
  EXPECT_EQ(choice.outcome, ResumeChoice::Outcome::kNoUsable);
  EXPECT_EQ(choice.newest_step, 200);
  ASSERT_EQ(choice.rejected.size(), 1u);
  EXPECT_EQ(choice.rejected[0],
            "rank 0 holds no checkpoint, but rank-1 up to step 200 do: rank 0's were removed or "
            "lost");
  // An empty rank-0 directory is the same; other entries are not ranks.
  fs::create_directories(fs::path(dir_) / "rank-0");
  fs::create_directories(fs::path(dir_) / "rank-x");
  EXPECT_EQ(Choose().outcome, ResumeChoice::Outcome::kNoUsable);
}

TEST_F(ResumePointTest, ANewestFromAnotherPlanFallsBackWhenBuffersAreRestored) {
  SaveAll(100, 2);
  SaveAll(200, 2, "another plan");
  const ResumeChoice restoring = Choose(/*needs_same_plan=*/true);
  EXPECT_EQ(restoring.outcome, ResumeChoice::Outcome::kResume);
  EXPECT_EQ(restoring.step, 100);
  ASSERT_EQ(restoring.rejected.size(), 1u);
  EXPECT_NE(restoring.rejected[0].find("another plan"), std::string::npos);
  // Without buffers only the step counter carries over: any plan will do.
  EXPECT_EQ(Choose(/*needs_same_plan=*/false).step, 200);
}

// Any of the plan's accepted fingerprints will do (an earlier worker's
// spelling of the same plan, runner.h AcceptedPlanFingerprints).
TEST_F(ResumePointTest, ACheckpointWithAnAcceptedEarlierFingerprintIsRestored) {
  SaveAll(100, 2, kEarlierPlan);
  const ResumeChoice restoring = Choose(/*needs_same_plan=*/true);
  EXPECT_EQ(restoring.outcome, ResumeChoice::Outcome::kResume);
  EXPECT_EQ(restoring.step, 100);
  EXPECT_TRUE(restoring.rejected.empty());
}

// Run A saved step 300 on every rank but was rolled back to 200 (here: its
// step 300 counted as unusable elsewhere, e.g. a third rank's file was torn);
// run B trained on from 200 and saved step 300 on rank 0 only before it
// ended. Rank 1's step 300 is still run A's: the two files are halves of
// two different trainings, not one checkpoint.
TEST_F(ResumePointTest, FilesOfOneStepFromTwoRunsAreNotOneCheckpoint) {
  SaveAll(200, 2);
  SaveAll(300, 2);           // run A
  Save(300, 0, 2, "run-b");  // run B, only rank 0 got there
  const ResumeChoice choice = Choose();
  EXPECT_EQ(choice.outcome, ResumeChoice::Outcome::kResume);
  EXPECT_EQ(choice.step, 200);
  EXPECT_EQ(choice.steps_lost(), 100);
  ASSERT_EQ(choice.rejected.size(), 1u);
  EXPECT_NE(choice.rejected[0].find("step 300: rank 1: written by run \"run-a\", rank 0's by run "
                                    "\"run-b\""),
            std::string::npos)
      << choice.rejected[0];
  // Once run B has written the step on every rank it is one checkpoint again.
  Save(300, 1, 2, "run-b");
  EXPECT_EQ(Choose().step, 300);
}

TEST_F(ResumePointTest, ACheckpointOfAnotherJobIsNotUsed) {
  SaveAll(100, 1);
  auto choice = ChooseResumePoint(dir_, {"another-job", {kPlan}, false});
  ASSERT_TRUE(choice.ok());
  EXPECT_EQ(choice->outcome, ResumeChoice::Outcome::kNoUsable);
}

}  // namespace
}  // namespace pacer::worker
