// Checkpoints: what a rank needs to resume training after a restart or a
// relaunch on a new plan without losing finished steps.
//
// Each rank writes its own files under `<dir>/rank-<R>/step-<012d>.ckpt`
// (`<dir>` is PACER_CHECKPOINT_DIR). A save writes `<name>.tmp`, fsyncs it,
// renames it over `<name>` and fsyncs the directory, so a crash at any moment
// leaves either the previous checkpoint set or the new one, never a file that
// looks complete but is not. Each file carries a magic, a format version and
// CRC32s of its header and payload; loading skips (with a warning on stderr
// naming the file) anything torn, truncated or corrupt and falls back to the
// next older file. The newest `keep` files (default 2) are kept: two, because
// a rank that dies while saving step N must still find step N-interval on
// every other rank (see NewestCommonStep).
//
// Units: steps are global optimizer steps completed (a checkpoint at step N
// resumes at step N, i.e. N steps are done); sizes are bytes. The model
// buffers of one checkpoint are bounded by kMaxCheckpointBufferBytes (64 GiB),
// a sanity bound that also stops a corrupt length field from allocating
// without limit.
//
// Thread-safety: a CheckpointStore holds no mutable state, but the files of a
// rank have one writer: do not Save from two threads or processes to the same
// rank directory. Loading may run concurrently with anything.
#ifndef PACER_WORKER_CORE_CHECKPOINT_H_
#define PACER_WORKER_CORE_CHECKPOINT_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "pacer/status.h"

namespace pacer::worker {

// 64 GiB: the sum of all buffer sizes in one checkpoint.
inline constexpr uint64_t kMaxCheckpointBufferBytes = uint64_t{64} << 30;

// OK when one rank's checkpoint buffers of `buffer_bytes` fit
// kMaxCheckpointBufferBytes, else kInvalidArgument naming the size and the
// ways out. The runner asks before the first step (StepBackend::
// CheckpointBufferBytes), so a plan whose shard cannot be checkpointed fails
// at start, not at its first checkpoint after hours of steps.
Status CheckCheckpointBufferBytes(uint64_t buffer_bytes);

// OK when Save can write under `dir`: it is a directory this process may
// write, or it does not exist yet and the nearest existing directory above
// it is one (Save creates the rest). A misconfigured path (a regular file on
// the way, no permission, a read-only volume) is kInvalidArgument naming the
// path and how to fix it; another I/O error is kUnavailable. Rank 0 asks
// before the first step, so a volume that can never hold a checkpoint fails
// the job at start (exit 2), not at its first checkpoint. Writes nothing.
Status CheckCheckpointDirectory(const std::string& dir);

// The number of newest checkpoints a store keeps per rank unless told otherwise.
// At least two: resuming falls back to the previous checkpoint when the
// newest is unreadable (resume_point.h), so one must exist.
inline constexpr int kDefaultCheckpointsKept = 2;
static_assert(kDefaultCheckpointsKept >= 2);

struct CheckpointState {
  int64_t step = 0;  // global steps completed; resume runs step `step` next (0-based)
  // The generator state, opaque to the store (e.g. four xoshiro256 words or a
  // serialized torch.Generator); the writer defines its encoding.
  std::vector<std::byte> rng_state;
  // Named model buffers (parameters, optimizer state), saved only when the
  // caller asks for them; empty otherwise. Names are unique by convention.
  std::vector<std::pair<std::string, std::vector<std::byte>>> buffers;

  // Metadata that lets a loader reject a checkpoint from another job or plan.
  std::string job_name;
  int rank = 0;
  int world_size = 1;
  std::string plan_fingerprint;  // identifies the plan that wrote it
  // Identifies the run that wrote it: one start of all the job's ranks, whose
  // files all carry the same id. Files of one step from different runs (a
  // run that was rolled back and the run after it) are not one checkpoint
  // (resume_point.h). Empty in files of format version 1.
  std::string run_id;

  friend bool operator==(const CheckpointState&, const CheckpointState&) = default;
};

// How much of a checkpoint file is checked before it counts as valid.
enum class CheckpointVerification {
  kFull,    // header, size and the payload CRC32: reads the whole file
  kHeader,  // header CRC32 and the file size only: catches torn and truncated
            // files without reading the model buffers (cheap for big checkpoints)
};

class CheckpointStore {
 public:
  // `dir` is the job's checkpoint directory (created on the first Save);
  // `rank` selects `<dir>/rank-<rank>`. `keep` >= 1 newest files survive a save.
  CheckpointStore(std::string dir, int rank, int keep = kDefaultCheckpointsKept);

  // Writes `state` atomically as this rank's checkpoint of `state.step`
  // (replacing one of the same step), then deletes all but the newest `keep`
  // valid checkpoints (a corrupt older file does not count and is deleted)
  // and any leftover `.tmp` file. Errors name the path and the
  // errno text: kUnavailable for I/O failures (a full or unreachable volume
  // may recover), kInvalidArgument for a misconfigured directory (a regular
  // file on its path, no permission, a read-only volume: a retry fails the
  // same way), a negative step, a rank that does not match the store or
  // buffers beyond kMaxCheckpointBufferBytes.
  Status Save(const CheckpointState& state) const;

  // The newest valid checkpoint of this rank, or nullopt if there is none.
  // Invalid files are skipped with a warning on stderr. Errors only when the
  // directory exists but cannot be listed: kInvalidArgument when its path is
  // misconfigured (see Save), kUnavailable otherwise.
  StatusOr<std::optional<CheckpointState>> LoadNewest() const;

  // This rank's checkpoint of `step` (normally NewestCommonStep's answer).
  // kNotFound if there is no such file; kFailedPrecondition if it is corrupt.
  StatusOr<CheckpointState> Load(int64_t step) const;
  // The same file's identity only (step, rank, world size, job, plan, run;
  // no generator state, no buffers), checked as kHeader checks it: its
  // header CRC and size, not the payload CRC. For a reader that only asks
  // whose checkpoint it is (`pacer run`), without reading gigabytes of
  // weights into memory.
  StatusOr<CheckpointState> LoadIdentity(int64_t step) const;

  // Steps of this rank's valid checkpoints, newest first. Ranks that do not
  // share a volume agree on a resume step by exchanging these lists.
  StatusOr<std::vector<int64_t>> ValidSteps(
      CheckpointVerification verification = CheckpointVerification::kFull) const;

  // Steps of every checkpoint file of this rank, valid or not, newest first
  // (ChooseResumePoint reports the invalid ones instead of skipping them
  // silently).
  StatusOr<std::vector<int64_t>> ListedSteps() const;

  // `<dir>/rank-<R>`.
  const std::string& rank_dir() const { return rank_dir_; }
  // `<dir>/rank-<R>/step-<012d>.ckpt`.
  std::string PathForStep(int64_t step) const;

 private:
  std::string dir_;
  int rank_;
  int keep_;
  std::string rank_dir_;
};

// The newest step for which every rank in [0, world_size) has a valid
// checkpoint under `dir` (a volume all ranks see), or nullopt if there is
// none: all ranks must resume from the same step. `world_size` is the number
// of ranks that wrote the checkpoints; after a relaunch on a plan with another
// world size, pass the size recorded in the checkpoints
// (CheckpointState::world_size), not the new one.
StatusOr<std::optional<int64_t>> NewestCommonStep(
    const std::string& dir, int world_size,
    CheckpointVerification verification = CheckpointVerification::kFull);

// CRC-32 (IEEE 802.3, reflected polynomial 0xEDB88320, the zlib/PNG one).
// Feed it pieces by passing the previous result as `crc`; start with 0.
uint32_t Crc32(std::span<const std::byte> data, uint32_t crc = 0);

}  // namespace pacer::worker

#endif  // PACER_WORKER_CORE_CHECKPOINT_H_
