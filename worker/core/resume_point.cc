#include "core/resume_point.h"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <optional>
#include <utility>

#include "core/checkpoint.h"

namespace pacer::worker {
namespace {

// Why step `step` cannot be resumed from, or nullopt when every rank's file
// is usable. Reads every rank's whole file: the payload CRC is the only proof
// that the weights are intact.
StatusOr<std::optional<std::string>> WhyUnusable(const std::string& dir, int64_t step,
                                                  const ResumeRequirements& want) {
  const bool full = want.verification == CheckpointVerification::kFull || want.needs_same_plan;
  auto load = [&](int rank) {
    const CheckpointStore store(dir, rank);
    return full ? store.Load(step) : store.LoadIdentity(step);
  };
  StatusOr<CheckpointState> rank0 = load(0);
  if (!rank0.ok()) {
    if (rank0.status().code() == StatusCode::kUnavailable) return rank0.status();
    return std::optional<std::string>("rank 0: " + rank0.status().message());
  }
  const int world_size = rank0->world_size;
  const std::string run_id = rank0->run_id;
  if (world_size < 1) {
    return std::optional<std::string>("rank 0 records world size " + std::to_string(world_size));
  }
  for (int rank = 0; rank < world_size; ++rank) {
    StatusOr<CheckpointState> state = rank == 0 ? std::move(rank0) : load(rank);
    const std::string who = "rank " + std::to_string(rank) + ": ";
    if (!state.ok()) {
      if (state.status().code() == StatusCode::kUnavailable) return state.status();
      return std::optional<std::string>(who + state.status().message());
    }
    if (state->job_name != want.job_name) {
      return std::optional<std::string>(who + "written by job \"" + state->job_name +
                                        "\", not \"" + want.job_name + "\"");
    }
    if (state->world_size != world_size) {
      return std::optional<std::string>(who + "world size " + std::to_string(state->world_size) +
                                        ", rank 0 says " + std::to_string(world_size));
    }
    if (state->run_id != run_id) {
      // A run rolled back to an older step left this step's files, and the
      // run after it wrote the step again on only some ranks before it
      // ended: the files are halves of two different trainings.
      return std::optional<std::string>(who + "written by run \"" + state->run_id +
                                        "\", rank 0's by run \"" + run_id +
                                        "\" (a mix of two runs' checkpoints)");
    }
    if (want.needs_same_plan &&
        std::find(want.plan_fingerprints.begin(), want.plan_fingerprints.end(),
                  state->plan_fingerprint) == want.plan_fingerprints.end()) {
      return std::optional<std::string>(
          who + "written by plan \"" + state->plan_fingerprint + "\", the current plan is \"" +
          (want.plan_fingerprints.empty() ? std::string() : want.plan_fingerprints.front()) + "\"");
    }
    if (want.needs_same_plan && state->buffers.empty()) {
      // Written without --checkpoint-buffers: only its step counter is in
      // it. Resuming "from" it would restore nothing and fail in the
      // backend every restart, a crash loop instead of a clear data loss.
      return std::optional<std::string>(who +
                                        "holds no weights (written without --checkpoint-buffers)");
    }
  }
  return std::optional<std::string>();
}

// Rank directories other than rank 0's that hold checkpoints, as "rank-N"
// with their newest step; empty when none (or the directory cannot be read:
// the caller then takes it for a first run, as before).
std::vector<std::pair<std::string, int64_t>> OtherRanksCheckpoints(const std::string& dir) {
  std::vector<std::pair<std::string, int64_t>> found;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("rank-", 0) != 0 || name == "rank-0") continue;
    int rank = 0;
    const char* digits = name.data() + 5;
    const auto [end, parse_error] = std::from_chars(digits, name.data() + name.size(), rank);
    if (parse_error != std::errc() || end != name.data() + name.size() || rank < 1) continue;
    StatusOr<std::vector<int64_t>> steps = CheckpointStore(dir, rank).ListedSteps();
    if (steps.ok() && !steps->empty()) found.emplace_back(name, steps->front());
  }
  std::sort(found.begin(), found.end());
  return found;
}

}  // namespace

StatusOr<ResumeChoice> ChooseResumePoint(const std::string& dir, const ResumeRequirements& want) {
  ResumeChoice choice;
  ASSIGN_OR_RETURN(std::vector<int64_t> steps, CheckpointStore(dir, 0).ListedSteps());
  if (steps.empty()) {
    // Rank 0 holds none. A first run, unless other ranks hold some: rank 0's
    // were removed or lost, and a fresh start trained from step 0 without a
    // word while pruning the other ranks' (a data loss said as one).
    const std::vector<std::pair<std::string, int64_t>> others = OtherRanksCheckpoints(dir);
    if (others.empty()) return choice;  // kFresh: nothing was ever saved
    choice.outcome = ResumeChoice::Outcome::kNoUsable;
    std::string held;
    for (const auto& [name, newest] : others) {
      choice.newest_step = std::max(choice.newest_step, newest);
      if (!held.empty()) held += ", ";
      held += name + " up to step " + std::to_string(newest);
    }
    choice.rejected.push_back("rank 0 holds no checkpoint, but " + held +
                              " do: rank 0's were removed or lost");
    return choice;
  }
  choice.newest_step = steps.front();
  for (int64_t step : steps) {
    ASSIGN_OR_RETURN(std::optional<std::string> why, WhyUnusable(dir, step, want));
    if (!why) {
      choice.outcome = ResumeChoice::Outcome::kResume;
      choice.step = step;
      return choice;
    }
    choice.rejected.push_back("step " + std::to_string(step) + ": " + *why);
  }
  choice.outcome = ResumeChoice::Outcome::kNoUsable;
  return choice;
}

}  // namespace pacer::worker
