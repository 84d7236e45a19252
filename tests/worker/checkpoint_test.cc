#include "core/checkpoint.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pacer::worker {
namespace {

namespace fs = std::filesystem;

std::vector<std::byte> Bytes(std::string_view s) {
  std::vector<std::byte> out;
  for (char c : s) out.push_back(static_cast<std::byte>(c));
  return out;
}

CheckpointState StateAt(int64_t step, int rank = 0, int world_size = 1) {
  CheckpointState s;
  s.step = step;
  s.rank = rank;
  s.world_size = world_size;
  s.job_name = "llama-7b";
  s.plan_fingerprint = "tp2-pp1-dp4-z1-mb2-ga8";
  s.run_id = "3f2a9c0d11e4b5a7";
  s.rng_state = Bytes("rng-" + std::to_string(step));
  return s;
}

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "pacer-ckpt-XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { fs::remove_all(dir_); }

  static void Truncate(const std::string& path, uintmax_t bytes) { fs::resize_file(path, bytes); }

  static void FlipByte(const std::string& path, std::streamoff offset) {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(offset);
    char c = 0;
    f.get(c);
    f.seekp(offset);
    f.put(static_cast<char>(c ^ 0x5A));
  }

  std::string dir_;
};

TEST(Crc32Test, MatchesTheStandardCheckValue) {
  std::string_view check = "123456789";
  EXPECT_EQ(Crc32(std::as_bytes(std::span(check.data(), check.size()))), 0xCBF43926u);
  EXPECT_EQ(Crc32({}), 0u);
}

// The bound a save enforces, and the runner before the first step: a 70B
// model's fp32 weights and Adam moments on one rank (1.1 TB) are refused
// with the size and the ways out, 64 GiB exactly is not.
TEST(CheckpointLimitTest, BuffersBeyondSixtyFourGibAreRefusedWithTheWayOut) {
  EXPECT_TRUE(CheckCheckpointBufferBytes(0).ok());
  EXPECT_TRUE(CheckCheckpointBufferBytes(kMaxCheckpointBufferBytes).ok());
  const Status over = CheckCheckpointBufferBytes(kMaxCheckpointBufferBytes + 1);
  EXPECT_EQ(over.code(), StatusCode::kInvalidArgument);
  const Status huge = CheckCheckpointBufferBytes(uint64_t{70'000'000'000} * 16);
  EXPECT_EQ(huge.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(huge.message().find("1043.1 GiB"), std::string::npos) << huge.message();
  EXPECT_NE(huge.message().find("ZeRO stage 1"), std::string::npos) << huge.message();
  EXPECT_NE(huge.message().find("without --checkpoint-buffers"), std::string::npos)
      << huge.message();
}

TEST(Crc32Test, CanBeFedInPieces) {
  std::string_view a = "12345", b = "6789";
  uint32_t crc = Crc32(std::as_bytes(std::span(a.data(), a.size())));
  crc = Crc32(std::as_bytes(std::span(b.data(), b.size())), crc);
  EXPECT_EQ(crc, 0xCBF43926u);
}

TEST_F(CheckpointTest, RoundTripsStepRngMetadataAndBuffers) {
  CheckpointStore store(dir_, 3);
  CheckpointState saved = StateAt(1200, 3, 8);
  saved.buffers.push_back({"layer0.weight", Bytes("\x01\x02\x03\x00\xff")});
  saved.buffers.push_back({"adam.exp_avg", std::vector<std::byte>(3 << 20, std::byte{0x7e})});
  saved.buffers.push_back({"empty", {}});
  ASSERT_TRUE(store.Save(saved).ok());
  EXPECT_TRUE(fs::exists(dir_ + "/rank-3/step-000000001200.ckpt"));
  EXPECT_EQ(store.PathForStep(1200), dir_ + "/rank-3/step-000000001200.ckpt");

  auto loaded = store.LoadNewest();
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  ASSERT_TRUE(loaded->has_value());
  EXPECT_EQ(**loaded, saved);

  auto by_step = store.Load(1200);
  ASSERT_TRUE(by_step.ok()) << by_step.status().ToString();
  EXPECT_EQ(*by_step, saved);
}

// `pacer run` asks whose checkpoint a file is, without the weights: it
// loaded every rank's buffers (gigabytes for a 7B model) into its own memory.
TEST_F(CheckpointTest, TheIdentityIsReadWithoutTheBuffersAndCheckedAsTheHeaderIs) {
  CheckpointStore store(dir_, 3);
  CheckpointState saved = StateAt(1200, 3, 8);
  saved.buffers.push_back({"adam.exp_avg", std::vector<std::byte>(3 << 20, std::byte{0x7e})});
  ASSERT_TRUE(store.Save(saved).ok());
  StatusOr<CheckpointState> identity = store.LoadIdentity(1200);
  ASSERT_TRUE(identity.ok()) << identity.status().ToString();
  EXPECT_EQ(identity->step, 1200);
  EXPECT_EQ(identity->rank, 3);
  EXPECT_EQ(identity->world_size, 8);
  EXPECT_EQ(identity->job_name, saved.job_name);
  EXPECT_EQ(identity->plan_fingerprint, saved.plan_fingerprint);
  EXPECT_EQ(identity->run_id, saved.run_id);
  EXPECT_TRUE(identity->buffers.empty());
  EXPECT_TRUE(identity->rng_state.empty());
  // Damage inside the weights is the full load's to find (kHeader's rule);
  // a truncated file is caught by both.
  FlipByte(store.PathForStep(1200), (3 << 20) / 2);
  EXPECT_TRUE(store.LoadIdentity(1200).ok());
  EXPECT_EQ(store.Load(1200).status().code(), StatusCode::kFailedPrecondition);
  Truncate(store.PathForStep(1200), 4000);
  EXPECT_EQ(store.LoadIdentity(1200).status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(store.LoadIdentity(1100).status().code(), StatusCode::kNotFound);
}

// A checkpoint file of format version 1 (before run ids), built byte by
// byte as that worker laid it out: little-endian fields, strings and blobs
// after their lengths.
struct V1File {
  std::vector<std::byte> payload;

  void U32(uint32_t v) {
    for (int i = 0; i < 4; ++i) payload.push_back(static_cast<std::byte>(v >> (8 * i)));
  }
  void U64(uint64_t v) {
    for (int i = 0; i < 8; ++i) payload.push_back(static_cast<std::byte>(v >> (8 * i)));
  }
  void Str(std::string_view text) {
    U32(static_cast<uint32_t>(text.size()));
    for (char c : text) payload.push_back(static_cast<std::byte>(c));
  }
  void Bytes(std::initializer_list<std::byte> bytes) { payload.insert(payload.end(), bytes); }
  // Step 600 of rank 1 of 2, job "llama-7b", plan "t1 p1 v1 d2".
  void Identity() {
    U64(600);
    U32(1);
    U32(2);
    Str("llama-7b");
    Str("t1 p1 v1 d2");
  }
  // Writes it as `store`'s step 600, the header claiming `payload_bytes`
  // (default: the payload's size) with the payload's CRC.
  void WriteAs(const CheckpointStore& store, std::optional<uint64_t> payload_bytes = {}) const {
    std::vector<std::byte> file(32);
    const std::string_view magic = "PACERCK1";
    std::memcpy(file.data(), magic.data(), magic.size());
    auto put = [&](size_t at, uint64_t v, int bytes) {
      for (int i = 0; i < bytes; ++i) file[at + i] = static_cast<std::byte>(v >> (8 * i));
    };
    put(8, 1, 4);  // format version 1
    put(12, Crc32(payload), 4);
    put(16, payload_bytes.value_or(payload.size()), 8);
    put(24, Crc32(std::span(file).first(24)), 4);
    file.insert(file.end(), payload.begin(), payload.end());
    fs::create_directories(store.rank_dir());
    std::ofstream out(store.PathForStep(600), std::ios::binary);
    out.write(reinterpret_cast<const char*>(file.data()),
              static_cast<std::streamsize>(file.size()));
  }
};

// A file of format version 1, written by a worker before run ids, byte by
// byte as that worker laid it out: a job whose workers were upgraded resumes
// from the checkpoints the old ones wrote.
TEST_F(CheckpointTest, AFormatVersionOneFileIsStillRead) {
  V1File v1;
  v1.Identity();
  v1.U64(3);  // the RNG state: a u64 length, then its bytes (no run id before it in v1)
  v1.Bytes({std::byte{1}, std::byte{2}, std::byte{3}});
  v1.U32(1);  // one buffer
  v1.Str("w");
  v1.U64(2);
  v1.Bytes({std::byte{9}, std::byte{8}});
  CheckpointStore store(dir_, 1);
  v1.WriteAs(store);

  auto loaded = store.Load(600);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(loaded->step, 600);
  EXPECT_EQ(loaded->world_size, 2);
  EXPECT_EQ(loaded->job_name, "llama-7b");
  EXPECT_EQ(loaded->plan_fingerprint, "t1 p1 v1 d2");
  EXPECT_EQ(loaded->run_id, "");
  EXPECT_EQ(loaded->rng_state, (std::vector<std::byte>{std::byte{1}, std::byte{2}, std::byte{3}}));
  ASSERT_EQ(loaded->buffers.size(), 1u);
  EXPECT_EQ(loaded->buffers[0].first, "w");
  EXPECT_EQ(loaded->buffers[0].second, (std::vector<std::byte>{std::byte{9}, std::byte{8}}));
}

// A length field past what memory holds, in a sparse file as long as it
// claims (so the file-size bound passes): std::bad_alloc escaped the load
// and the rank exited 1, where a corrupt file is skipped for an older one.
TEST_F(CheckpointTest, ALengthNoMemoryHoldsIsACorruptFileNotACrash) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "the sanitizers' allocators abort on an allocation past their limit instead of "
                  "throwing std::bad_alloc";
#endif
  constexpr uint64_t kHuge = uint64_t{1} << 43;  // 8 TiB of RNG state
  V1File v1;
  v1.Identity();
  v1.U64(kHuge);  // the RNG state's length
  const uint64_t claimed = v1.payload.size() + kHuge + 4;
  CheckpointStore store(dir_, 1);
  v1.WriteAs(store, claimed);
  std::error_code sparse;
  fs::resize_file(store.PathForStep(600), 32 + claimed, sparse);
  if (sparse) GTEST_SKIP() << "this file system holds no 8 TiB sparse file: " << sparse.message();

  StatusOr<CheckpointState> loaded = InternalError("not loaded");
  ASSERT_NO_THROW(loaded = store.Load(600));
  ASSERT_FALSE(loaded.ok());
  EXPECT_NE(loaded.status().message().find("cannot be held in memory"), std::string::npos)
      << loaded.status().ToString();
}

TEST_F(CheckpointTest, EmptyDirectoryHasNoCheckpoint) {
  CheckpointStore store(dir_ + "/never-created", 0);
  auto loaded = store.LoadNewest();
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_FALSE(loaded->has_value());
  auto missing = store.Load(5);
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
}

TEST_F(CheckpointTest, NewestWins) {
  CheckpointStore store(dir_, 0, /*keep=*/5);
  for (int64_t step : {100, 300, 200}) ASSERT_TRUE(store.Save(StateAt(step)).ok());
  auto loaded = store.LoadNewest();
  ASSERT_TRUE(loaded.ok());
  ASSERT_TRUE(loaded->has_value());
  // 200 was written last, so 300 belonged to a rolled-back run and is gone.
  EXPECT_EQ((*loaded)->step, 200);
  EXPECT_EQ((*loaded)->rng_state, Bytes("rng-200"));
}

TEST_F(CheckpointTest, SavingAStepAgainReplacesIt) {
  CheckpointStore store(dir_, 0);
  CheckpointState first = StateAt(50);
  CheckpointState second = StateAt(50);
  second.rng_state = Bytes("second");
  ASSERT_TRUE(store.Save(first).ok());
  ASSERT_TRUE(store.Save(second).ok());
  auto loaded = store.Load(50);
  ASSERT_TRUE(loaded.ok());
  EXPECT_EQ(loaded->rng_state, Bytes("second"));
}

TEST_F(CheckpointTest, TruncatedNewestIsSkippedWithAWarningNamingTheFile) {
  CheckpointStore store(dir_, 0);
  ASSERT_TRUE(store.Save(StateAt(10)).ok());
  CheckpointState newest = StateAt(20);
  newest.buffers.push_back({"w", std::vector<std::byte>(4096, std::byte{1})});
  ASSERT_TRUE(store.Save(newest).ok());
  Truncate(store.PathForStep(20), 2000);

  ::testing::internal::CaptureStderr();
  auto loaded = store.LoadNewest();
  std::string warnings = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(loaded.ok());
  ASSERT_TRUE(loaded->has_value());
  EXPECT_EQ((*loaded)->step, 10);
  EXPECT_NE(warnings.find(store.PathForStep(20)), std::string::npos) << warnings;
  EXPECT_NE(warnings.find("truncated"), std::string::npos) << warnings;
}

TEST_F(CheckpointTest, FileShorterThanTheHeaderIsSkipped) {
  CheckpointStore store(dir_, 0);
  ASSERT_TRUE(store.Save(StateAt(10)).ok());
  ASSERT_TRUE(store.Save(StateAt(20)).ok());
  Truncate(store.PathForStep(20), 7);
  ::testing::internal::CaptureStderr();
  auto loaded = store.LoadNewest();
  ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(loaded.ok());
  EXPECT_EQ((*loaded)->step, 10);
}

TEST_F(CheckpointTest, FlippedPayloadByteIsSkipped) {
  CheckpointStore store(dir_, 0);
  ASSERT_TRUE(store.Save(StateAt(10)).ok());
  ASSERT_TRUE(store.Save(StateAt(20)).ok());
  FlipByte(store.PathForStep(20), 40);  // inside the payload, past the 32-byte header

  ::testing::internal::CaptureStderr();
  auto loaded = store.LoadNewest();
  std::string warnings = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(loaded.ok());
  EXPECT_EQ((*loaded)->step, 10);
  EXPECT_NE(warnings.find("payload CRC32 mismatch"), std::string::npos) << warnings;

  auto corrupt = store.Load(20);
  EXPECT_EQ(corrupt.status().code(), StatusCode::kFailedPrecondition);
}

TEST_F(CheckpointTest, HeaderVerificationIsCheapButMissesPayloadDamage) {
  CheckpointStore store(dir_, 0);
  ASSERT_TRUE(store.Save(StateAt(10)).ok());
  ASSERT_TRUE(store.Save(StateAt(20)).ok());
  FlipByte(store.PathForStep(20), 40);
  ::testing::internal::CaptureStderr();
  auto full = store.ValidSteps(CheckpointVerification::kFull);
  auto header = store.ValidSteps(CheckpointVerification::kHeader);
  ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(full.ok());
  ASSERT_TRUE(header.ok());
  EXPECT_EQ(*full, (std::vector<int64_t>{10}));
  EXPECT_EQ(*header, (std::vector<int64_t>{20, 10}));

  Truncate(store.PathForStep(20), 50);  // truncation is caught by both
  ::testing::internal::CaptureStderr();
  header = store.ValidSteps(CheckpointVerification::kHeader);
  ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(*header, (std::vector<int64_t>{10}));
}

TEST_F(CheckpointTest, FlippedHeaderOrMagicIsSkipped) {
  CheckpointStore store(dir_, 0, /*keep=*/3);
  ASSERT_TRUE(store.Save(StateAt(10)).ok());
  ASSERT_TRUE(store.Save(StateAt(20)).ok());
  ASSERT_TRUE(store.Save(StateAt(30)).ok());
  FlipByte(store.PathForStep(30), 0);   // magic
  FlipByte(store.PathForStep(20), 17);  // payload length
  ::testing::internal::CaptureStderr();
  auto loaded = store.LoadNewest();
  std::string warnings = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(loaded.ok());
  EXPECT_EQ((*loaded)->step, 10);
  EXPECT_NE(warnings.find("bad magic"), std::string::npos) << warnings;
  EXPECT_NE(warnings.find("header CRC32 mismatch"), std::string::npos) << warnings;
}

TEST_F(CheckpointTest, TempLeftoverIsIgnoredAndCleanedByTheNextSave) {
  CheckpointStore store(dir_, 0);
  ASSERT_TRUE(store.Save(StateAt(10)).ok());
  ASSERT_TRUE(store.Save(StateAt(20)).ok());
  // A crash between write and rename leaves a complete-looking .tmp.
  const std::string leftover = store.PathForStep(20) + ".tmp";
  fs::rename(store.PathForStep(20), leftover);

  auto loaded = store.LoadNewest();
  ASSERT_TRUE(loaded.ok());
  EXPECT_EQ((*loaded)->step, 10);
  EXPECT_EQ(*store.ValidSteps(), (std::vector<int64_t>{10}));

  ASSERT_TRUE(store.Save(StateAt(20)).ok());
  EXPECT_FALSE(fs::exists(leftover));
}

// An old checkpoint that cannot be read for an I/O error (here a symlink
// to itself: open fails with ELOOP, which even root cannot open, where a
// permission error would not stop root) is neither counted as a kept
// fallback nor deleted: the error says nothing about the file. A corrupt
// one is deleted as before.
TEST_F(CheckpointTest, PruningKeepsACheckpointItCannotReadForAnIoError) {
  CheckpointStore store(dir_, 0, /*keep=*/2);
  ASSERT_TRUE(store.Save(StateAt(10)).ok());
  ASSERT_TRUE(store.Save(StateAt(20)).ok());
  const std::string unreadable = store.PathForStep(25);
  fs::create_symlink(unreadable, unreadable);
  ::testing::internal::CaptureStderr();
  ASSERT_TRUE(store.Save(StateAt(30)).ok());
  const std::string warnings = ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(fs::is_symlink(unreadable)) << "not deleted";
  EXPECT_NE(warnings.find("cannot check old checkpoint " + unreadable), std::string::npos)
      << warnings;
  // 30 and 20 are the two kept; 10 is pruned.
  EXPECT_EQ(*store.ValidSteps(), (std::vector<int64_t>{30, 20}));
  EXPECT_FALSE(fs::exists(store.PathForStep(10)));
}

// A read that fails (here EISDIR: a directory where the file should be,
// which root cannot be denied) is an I/O error, Unavailable, not a corrupt
// checkpoint (FailedPrecondition): pruning keeps it, and a resume reports
// the error instead of falling back past it as if it were bad.
TEST_F(CheckpointTest, AReadThatFailsIsAnIoErrorNotACorruptCheckpoint) {
  CheckpointStore store(dir_, 0, /*keep=*/2);
  ASSERT_TRUE(store.Save(StateAt(10)).ok());
  const std::string unreadable = store.PathForStep(20);
  fs::create_directory(unreadable);
  const auto loaded = store.Load(20);
  EXPECT_EQ(loaded.status().code(), StatusCode::kUnavailable) << loaded.status().ToString();
  EXPECT_NE(loaded.status().message().find("cannot read checkpoint " + unreadable),
            std::string::npos)
      << loaded.status().message();
  ::testing::internal::CaptureStderr();
  ASSERT_TRUE(store.Save(StateAt(30)).ok());
  const std::string warnings = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(warnings.find("cannot check old checkpoint " + unreadable), std::string::npos)
      << warnings;
  EXPECT_TRUE(fs::exists(store.PathForStep(10))) << "20 took no place: 30 and 10 are kept";
}

TEST_F(CheckpointTest, KeepsOnlyTheNewestK) {
  CheckpointStore two(dir_, 0);
  for (int64_t step = 1; step <= 5; ++step) ASSERT_TRUE(two.Save(StateAt(step)).ok());
  EXPECT_EQ(*two.ValidSteps(), (std::vector<int64_t>{5, 4}));
  int files = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator(two.rank_dir())) ++files;
  EXPECT_EQ(files, 2);

  CheckpointStore three(dir_, 1, /*keep=*/3);
  for (int64_t step = 1; step <= 5; ++step) ASSERT_TRUE(three.Save(StateAt(step, 1)).ok());
  EXPECT_EQ(*three.ValidSteps(), (std::vector<int64_t>{5, 4, 3}));
}

TEST_F(CheckpointTest, ACorruptOlderFileDoesNotTakeAPlaceOfTheKeptTwo) {
  CheckpointStore store(dir_, 0);
  ASSERT_TRUE(store.Save(StateAt(1)).ok());
  ASSERT_TRUE(store.Save(StateAt(2)).ok());
  Truncate(store.PathForStep(2), 10);
  ASSERT_TRUE(store.Save(StateAt(3)).ok());
  // Two good checkpoints remain, so a resume can fall back from step 3.
  EXPECT_EQ(*store.ValidSteps(), (std::vector<int64_t>{3, 1}));
  EXPECT_FALSE(fs::exists(store.PathForStep(2)));
}

TEST_F(CheckpointTest, CheckpointFromAnotherRankIsSkipped) {
  CheckpointStore rank0(dir_, 0), rank1(dir_, 1);
  ASSERT_TRUE(rank0.Save(StateAt(10, 0)).ok());
  ASSERT_TRUE(rank1.Save(StateAt(20, 1)).ok());
  fs::copy_file(rank1.PathForStep(20), rank0.PathForStep(20));
  ::testing::internal::CaptureStderr();
  auto loaded = rank0.LoadNewest();
  std::string warnings = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(loaded.ok());
  EXPECT_EQ((*loaded)->step, 10);
  EXPECT_NE(warnings.find("holds rank 1"), std::string::npos) << warnings;
}

TEST_F(CheckpointTest, NewestCommonStepIsTheNewestEveryRankHas) {
  constexpr int kWorld = 3;
  for (int rank = 0; rank < kWorld; ++rank) {
    CheckpointStore store(dir_, rank);
    ASSERT_TRUE(store.Save(StateAt(100, rank, kWorld)).ok());
    ASSERT_TRUE(store.Save(StateAt(200, rank, kWorld)).ok());
    // Rank 2 died before writing step 300.
    if (rank != 2) {
      ASSERT_TRUE(store.Save(StateAt(300, rank, kWorld)).ok());
    }
  }
  auto common = NewestCommonStep(dir_, kWorld);
  ASSERT_TRUE(common.ok()) << common.status().ToString();
  ASSERT_TRUE(common->has_value());
  EXPECT_EQ(**common, 200);

  // Ranks 0 and 1 alone (a smaller world) have 300.
  EXPECT_EQ(**NewestCommonStep(dir_, 2), 300);

  // A corrupt 200 on rank 1 moves everybody back to 100... which rank 0 and
  // 1 no longer keep (K = 2): no common step.
  CheckpointStore rank1(dir_, 1);
  Truncate(rank1.PathForStep(200), 40);
  ::testing::internal::CaptureStderr();
  common = NewestCommonStep(dir_, kWorld);
  ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(common.ok());
  EXPECT_FALSE(common->has_value());
}

TEST_F(CheckpointTest, NewestCommonStepWithAMissingRankIsNone) {
  ASSERT_TRUE(CheckpointStore(dir_, 0).Save(StateAt(100, 0, 2)).ok());
  auto common = NewestCommonStep(dir_, 2);
  ASSERT_TRUE(common.ok());
  EXPECT_FALSE(common->has_value());
  EXPECT_FALSE(NewestCommonStep(dir_, 0).ok());
}

TEST_F(CheckpointTest, UnwritableDirectoryIsAnErrorNamingThePath) {
  // A path under a regular file cannot be created, even by root (whom
  // permission bits would not stop).
  const std::string file = dir_ + "/not-a-directory";
  std::ofstream(file) << "x";
  CheckpointStore store(file + "/ckpt", 0);
  Status s = store.Save(StateAt(1));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find(file), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("Not a directory"), std::string::npos) << s.ToString();
}

// A checkpoint directory that is a regular file (/etc/passwd, /dev/null, a
// file the volume mount left) is a configuration error, not an I/O error:
// it was Unavailable, which the worker exits with 4 (a collective failure,
// counted against a healthy node); InvalidArgument exits 2 with the message,
// which says what to fix.
TEST_F(CheckpointTest, ADirectoryThatIsAFileIsAConfigurationErrorSayingWhatToFix) {
  const std::string file = dir_ + "/not-a-directory";
  std::ofstream(file) << "x";
  for (const std::string& path : {file, std::string("/dev/null")}) {
    CheckpointStore store(path, 0);
    const auto listed = store.ListedSteps();
    ASSERT_FALSE(listed.ok()) << path;
    EXPECT_EQ(listed.status().code(), StatusCode::kInvalidArgument) << listed.status().ToString();
    EXPECT_NE(listed.status().message().find("cannot list checkpoint directory " + path +
                                             "/rank-0: Not a directory"),
              std::string::npos)
        << listed.status().message();
    EXPECT_NE(listed.status().message().find(
                  "point --checkpoint-dir / PACER_CHECKPOINT_DIR at a directory"),
              std::string::npos)
        << listed.status().message();
    EXPECT_EQ(store.LoadNewest().status().code(), StatusCode::kInvalidArgument) << path;
  }
  // Saving into it: the same answer (it was FailedPrecondition, exit 7).
  const Status saved = CheckpointStore(file, 0).Save(StateAt(1));
  EXPECT_EQ(saved.code(), StatusCode::kInvalidArgument) << saved.ToString();
  EXPECT_NE(saved.message().find("PACER_CHECKPOINT_DIR"), std::string::npos) << saved.ToString();
}

// A checkpoint directory that is a symbolic link to nothing passed the
// start-up check (stat says only "no such file", as for a directory not yet
// made), then every save failed: mkdir cannot make it (EEXIST), exit 7, a
// relaunch into the same failure. It is a configuration error at start.
TEST_F(CheckpointTest, ADanglingSymbolicLinkIsAConfigurationErrorAtStart) {
  const std::string link = dir_ + "/dangling";
  fs::create_symlink(dir_ + "/nowhere/at/all", link);
  for (const std::string& path : {link, link + "/"}) {
    const Status checked = CheckCheckpointDirectory(path);
    EXPECT_EQ(checked.code(), StatusCode::kInvalidArgument) << checked.ToString();
    EXPECT_NE(checked.message().find(" is a symbolic link to " + dir_ +
                                     "/nowhere/at/all, which does not exist"),
              std::string::npos)
        << checked.message();
  }
  // A directory inside it that does not exist yet is the same link.
  EXPECT_EQ(CheckCheckpointDirectory(link + "/job").code(), StatusCode::kInvalidArgument);
  // A directory not made yet in a real one is fine (Save makes it).
  EXPECT_TRUE(CheckCheckpointDirectory(dir_ + "/not-yet").ok());
}

TEST_F(CheckpointTest, RejectsANegativeStepAndAnotherRanksState) {
  CheckpointStore store(dir_, 0);
  EXPECT_EQ(store.Save(StateAt(-1)).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(store.Save(StateAt(1, /*rank=*/4)).code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(fs::exists(store.rank_dir() + "/step-000000000001.ckpt"));
}

}  // namespace
}  // namespace pacer::worker
