#include "core/checkpoint.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <new>
#include <set>
#include <stdexcept>

namespace pacer::worker {
namespace {

// File layout, all integers little-endian:
//   header (32 bytes)
//     0  magic "PACERCK1"
//     8  u32 format version (2; 1 is still read)
//     12 u32 CRC32 of the payload
//     16 u64 payload length in bytes
//     24 u32 CRC32 of header bytes 0..23
//     28 u32 reserved, 0
//   payload
//     u64 step, u32 rank, u32 world_size,
//     u32 length + job name, u32 length + plan fingerprint,
//     u32 length + run id (version 2 only; version 1 files have none),
//     u64 length + RNG state,
//     u32 buffer count, then per buffer: u32 length + name, u64 length + bytes
// The header CRC lets a cheap check (CheckpointVerification::kHeader) trust
// the payload length without reading the payload.
constexpr std::array<char, 8> kMagic = {'P', 'A', 'C', 'E', 'R', 'C', 'K', '1'};
constexpr uint32_t kFormatVersion = 2;
// Version 1 lacks the run id. Its files stay readable: a job whose workers
// were upgraded resumes from the checkpoints the old workers wrote.
constexpr uint32_t kOldestReadableFormatVersion = 1;
constexpr size_t kHeaderBytes = 32;
constexpr size_t kIoChunkBytes = size_t{1} << 20;
constexpr std::string_view kStepPrefix = "step-";
constexpr std::string_view kCheckpointSuffix = ".ckpt";
constexpr std::string_view kTempSuffix = ".tmp";

constexpr std::array<uint32_t, 256> MakeCrcTable() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1u) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    table[i] = c;
  }
  return table;
}
constexpr std::array<uint32_t, 256> kCrcTable = MakeCrcTable();

std::string ErrnoText(int err) { return std::strerror(err); }

Status IoError(const std::string& what, const std::string& path, int err) {
  return UnavailableError(what + " " + path + ": " + ErrnoText(err));
}

// What the operator does about `err` when it is a misconfigured checkpoint
// directory rather than a fault of the volume or the node; nullptr when it
// may be a fault. These recur on every restart and on every node, so
// retrying is useless, and the exit code of a retryable error (4, counted
// against the node) would get healthy nodes excluded:
//   ENOTDIR       the path runs through a regular file (/etc/passwd, /dev/null);
//   EACCES, EPERM this user may not search or write it (volume ownership,
//                 fsGroup, root_squash);
//   EROFS         the volume is mounted read-only (a readOnly mount, a
//                 ReadOnlyMany claim; a file system the kernel remounted
//                 read-only after errors needs a person as much);
//   ELOOP, ENAMETOOLONG  the path itself cannot be resolved.
// Everything else stays retryable: EIO, ESTALE, ETIMEDOUT, ENOTCONN (a
// network file system's hiccup), ENOSPC and EDQUOT (pruning or a resized
// volume may free space), EMFILE, ENFILE, ENOMEM (this process or node).
const char* DirectoryConfigFix(int err) {
  switch (err) {
    case ENOTDIR:
    case ELOOP:
    case ENAMETOOLONG:
      return "point --checkpoint-dir / PACER_CHECKPOINT_DIR at a directory";
    case EACCES:
    case EPERM:
      return "make the checkpoint volume writable by this user, or point --checkpoint-dir / "
             "PACER_CHECKPOINT_DIR at a directory that is";
    case EROFS:
      return "mount the checkpoint volume read-write, or point --checkpoint-dir / "
             "PACER_CHECKPOINT_DIR at a writable directory";
    default:
      return nullptr;
  }
}

// IoError for an operation on a checkpoint directory itself (listing,
// creating, creating a file in it), but InvalidArgument (exit 2, the
// TrainJob fails with this message) for the errors DirectoryConfigFix
// names. Not for reading a checkpoint file: there an error that is not
// Unavailable would count the file as corrupt, and a resume would fall back
// past it or declare data loss.
Status DirectoryError(const std::string& what, const std::string& path, int err) {
  if (const char* fix = DirectoryConfigFix(err)) {
    return InvalidArgumentError(what + " " + path + ": " + ErrnoText(err) + "; " + fix);
  }
  return IoError(what, path, err);
}

// The directory `path` is in: "." for a bare name, "/" for "/x".
std::string ParentDir(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

void PutU32(std::byte* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out[i] = static_cast<std::byte>((v >> (8 * i)) & 0xFFu);
}
void PutU64(std::byte* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<std::byte>((v >> (8 * i)) & 0xFFu);
}
uint32_t GetU32(const std::byte* in) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= std::to_integer<uint32_t>(in[i]) << (8 * i);
  return v;
}
uint64_t GetU64(const std::byte* in) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= std::to_integer<uint64_t>(in[i]) << (8 * i);
  return v;
}

std::span<const std::byte> AsBytes(std::string_view s) {
  return std::as_bytes(std::span<const char>(s.data(), s.size()));
}

std::string StepFileName(int64_t step) {
  char name[64];
  std::snprintf(name, sizeof(name), "step-%012lld.ckpt", static_cast<long long>(step));
  return name;
}

// The step of "step-<digits>.ckpt"; nullopt for any other name (".tmp" included).
std::optional<int64_t> ParseStepFileName(std::string_view name) {
  if (!name.starts_with(kStepPrefix) || !name.ends_with(kCheckpointSuffix)) return std::nullopt;
  std::string_view digits =
      name.substr(kStepPrefix.size(), name.size() - kStepPrefix.size() - kCheckpointSuffix.size());
  if (digits.empty()) return std::nullopt;
  int64_t step = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), step);
  if (ec != std::errc() || end != digits.data() + digits.size() || step < 0) return std::nullopt;
  return step;
}

int CloseFd(int fd) {
  int rc = ::close(fd);
  return rc == 0 || errno == EINTR ? 0 : -1;  // Linux closes the fd even on EINTR
}

Status FsyncPath(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return IoError("cannot open directory", path, errno);
  int rc = ::fsync(fd);
  int err = errno;
  CloseFd(fd);
  if (rc != 0) return IoError("cannot fsync directory", path, err);
  return Status::Ok();
}

// mkdir -p; fsyncs the parent of each directory it creates so the new entry
// survives a crash along with the checkpoint inside it.
Status MakeDirs(const std::string& path) {
  if (path.empty()) return InvalidArgumentError("empty checkpoint directory");
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return Status::Ok();
    return DirectoryError("cannot use checkpoint directory", path, ENOTDIR);
  }
  size_t slash = path.find_last_of('/');
  std::string parent = ParentDir(path);
  if (slash != std::string::npos && slash + 1 == path.size()) {
    return MakeDirs(path.substr(0, slash));  // trailing slash
  }
  if (parent != path) RETURN_IF_ERROR(MakeDirs(parent));
  if (::mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) {
    return DirectoryError("cannot create directory", path, errno);
  }
  return FsyncPath(parent);
}

// Buffered writer that also accumulates the CRC32 of everything written.
class PayloadWriter {
 public:
  PayloadWriter(int fd, const std::string& path) : fd_(fd), path_(path) {
    buffer_.reserve(kIoChunkBytes);
  }

  void Write(std::span<const std::byte> data) {
    if (!status_.ok()) return;
    crc_ = Crc32(data, crc_);
    bytes_ += data.size();
    if (buffer_.size() + data.size() > kIoChunkBytes) Flush();
    if (data.size() >= kIoChunkBytes) {
      WriteAll(data);  // big buffers skip the copy
    } else {
      buffer_.insert(buffer_.end(), data.begin(), data.end());
    }
  }
  void U32(uint32_t v) {
    std::byte b[4];
    PutU32(b, v);
    Write(b);
  }
  void U64(uint64_t v) {
    std::byte b[8];
    PutU64(b, v);
    Write(b);
  }
  void Str(std::string_view s) {
    U32(static_cast<uint32_t>(s.size()));
    Write(AsBytes(s));
  }
  void Blob(std::span<const std::byte> data) {
    U64(data.size());
    Write(data);
  }

  void Flush() {
    if (!status_.ok() || buffer_.empty()) return;
    WriteAll(buffer_);
    buffer_.clear();
  }

  Status status() const { return status_; }
  uint32_t crc() const { return crc_; }
  uint64_t bytes() const { return bytes_; }

 private:
  void WriteAll(std::span<const std::byte> data) {
    while (!data.empty() && status_.ok()) {
      ssize_t n = ::write(fd_, data.data(), data.size());
      if (n < 0) {
        if (errno == EINTR) continue;
        status_ = IoError("cannot write", path_, errno);
        return;
      }
      data = data.subspan(static_cast<size_t>(n));
    }
  }

  int fd_;
  const std::string& path_;
  std::vector<std::byte> buffer_;
  Status status_;
  uint32_t crc_ = 0;
  uint64_t bytes_ = 0;
};

// Reads a payload of known length, bounding every length field by what is
// left so that a corrupt length cannot allocate beyond the file size.
class PayloadReader {
 public:
  PayloadReader(int fd, uint64_t payload_bytes) : fd_(fd), remaining_(payload_bytes) {}

  // Each returns false (and sets error()) on a short file or a bad length.
  bool Read(std::span<std::byte> out) {
    if (out.size() > remaining_) return Fail("a length field points past the end of the file");
    size_t done = 0;
    while (done < out.size()) {
      ssize_t n = ::read(fd_, out.data() + done, out.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        io_error_ = true;
        return Fail(std::string("read failed: ") + ErrnoText(errno));
      }
      if (n == 0) return Fail("unexpected end of file");
      done += static_cast<size_t>(n);
    }
    crc_ = Crc32(out, crc_);
    remaining_ -= out.size();
    return true;
  }
  bool U32(uint32_t& v) {
    std::byte b[4];
    if (!Read(b)) return false;
    v = GetU32(b);
    return true;
  }
  bool U64(uint64_t& v) {
    std::byte b[8];
    if (!Read(b)) return false;
    v = GetU64(b);
    return true;
  }
  bool Str(std::string& s) {
    uint32_t n = 0;
    if (!U32(n)) return false;
    if (n > remaining_) return Fail("a string length points past the end of the file");
    if (!Allocate(s, n)) return false;
    return Read(std::as_writable_bytes(std::span<char>(s.data(), s.size())));
  }
  bool Blob(std::vector<std::byte>& out) {
    uint64_t n = 0;
    if (!U64(n)) return false;
    if (n > remaining_) return Fail("a buffer length points past the end of the file");
    if (!Allocate(out, n)) return false;
    return Read(out);
  }

  // The file's size bounds a length, but a sparse file's size is no proof
  // of its bytes: a corrupt length of 100 GiB passed that check and threw
  // std::bad_alloc out of the load (the rank exited 1) instead of the file
  // being skipped as corrupt.
  template <typename Container>
  bool Allocate(Container& out, uint64_t n) {
    try {
      out.resize(static_cast<size_t>(n));
      return true;
    } catch (const std::bad_alloc&) {
    } catch (const std::length_error&) {
    }
    return Fail("a length of " + std::to_string(n) +
                " bytes cannot be held in memory (a corrupt length field)");
  }

  uint64_t remaining() const { return remaining_; }
  uint32_t crc() const { return crc_; }
  const std::string& error() const { return error_; }
  // The failure was the read itself (EIO, EISDIR, ...), not the file's
  // contents: it says nothing about whether the checkpoint is good.
  bool io_error() const { return io_error_; }

 private:
  bool Fail(std::string why) {
    if (error_.empty()) error_ = std::move(why);
    return false;
  }

  int fd_;
  bool io_error_ = false;
  uint64_t remaining_;
  uint32_t crc_ = 0;
  std::string error_;
};

struct FileCloser {
  int fd;
  ~FileCloser() {
    if (fd >= 0) CloseFd(fd);
  }
};

// Validates the checkpoint at `path` and, unless `state` is null (the
// kHeader verification, which does not read the payload), parses it into
// `*state`. `identity_only`: the kHeader verification, then only the fields
// that say whose checkpoint it is (step, rank, world size, job, plan, run):
// neither the generator state nor the buffers are read, nor the payload CRC.
// Errors: kFailedPrecondition saying why the file is invalid, kNotFound when
// it does not exist, kUnavailable when it cannot be opened.
Status ReadCheckpoint(const std::string& path, int64_t expected_step, int expected_rank,
                      CheckpointState* state, bool identity_only = false) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return NotFoundError("no checkpoint " + path);
    return IoError("cannot open checkpoint", path, errno);
  }
  FileCloser closer{fd};
  auto corrupt = [&](const std::string& why) -> Status {
    return FailedPreconditionError("invalid checkpoint " + path + ": " + why);
  };
  // What a reader's failure means: the file is bad, or it could not be read.
  auto failed = [&](const PayloadReader& reader) -> Status {
    if (reader.io_error())
      return UnavailableError("cannot read checkpoint " + path + ": " + reader.error());
    return corrupt(reader.error());
  };

  struct stat st {};
  if (::fstat(fd, &st) != 0) return IoError("cannot stat checkpoint", path, errno);
  uint64_t file_bytes = static_cast<uint64_t>(st.st_size);
  if (file_bytes < kHeaderBytes) {
    return corrupt("truncated: " + std::to_string(file_bytes) + " bytes, the header alone is " +
                   std::to_string(kHeaderBytes));
  }
  std::array<std::byte, kHeaderBytes> header{};
  PayloadReader header_reader(fd, kHeaderBytes);
  if (!header_reader.Read(header)) return failed(header_reader);
  if (std::memcmp(header.data(), kMagic.data(), kMagic.size()) != 0) {
    return corrupt("bad magic (not a Pacer checkpoint)");
  }
  if (GetU32(header.data() + 24) != Crc32(std::span(header).first(24))) {
    return corrupt("header CRC32 mismatch");
  }
  uint32_t version = GetU32(header.data() + 8);
  if (version < kOldestReadableFormatVersion || version > kFormatVersion) {
    return corrupt("unsupported format version " + std::to_string(version));
  }
  uint32_t payload_crc = GetU32(header.data() + 12);
  uint64_t payload_bytes = GetU64(header.data() + 16);
  if (file_bytes - kHeaderBytes != payload_bytes) {
    return corrupt("size " + std::to_string(file_bytes) + " bytes, the header says " +
                   std::to_string(kHeaderBytes + payload_bytes) + " (truncated or torn)");
  }
  if (state == nullptr) return Status::Ok();  // valid as far as the header goes

  *state = CheckpointState();
  PayloadReader in(fd, payload_bytes);
  uint64_t step = 0;
  uint32_t rank = 0, world_size = 0, buffer_count = 0;
  bool ok = in.U64(step) && in.U32(rank) && in.U32(world_size) && in.Str(state->job_name) &&
            in.Str(state->plan_fingerprint) && (version < 2 || in.Str(state->run_id));
  // The identity read, whether the file's name and directory agree with it.
  auto identity = [&]() -> Status {
    state->step = static_cast<int64_t>(step);
    state->rank = static_cast<int>(rank);
    state->world_size = static_cast<int>(world_size);
    if (state->step != expected_step) {
      return corrupt("holds step " + std::to_string(state->step) + ", its name says " +
                     std::to_string(expected_step));
    }
    if (state->rank != expected_rank) {  // copied from another rank's directory
      return corrupt("holds rank " + std::to_string(state->rank) + ", its directory says " +
                     std::to_string(expected_rank));
    }
    return Status::Ok();
  };
  if (identity_only) return ok ? identity() : failed(in);
  ok = ok && in.Blob(state->rng_state) && in.U32(buffer_count);
  uint64_t buffer_bytes = 0;
  for (uint32_t i = 0; ok && i < buffer_count; ++i) {
    std::pair<std::string, std::vector<std::byte>> buffer;
    ok = in.Str(buffer.first) && in.Blob(buffer.second);
    buffer_bytes += buffer.second.size();
    if (ok && buffer_bytes > kMaxCheckpointBufferBytes) {
      return corrupt("buffers exceed the 64 GiB limit");
    }
    if (ok) state->buffers.push_back(std::move(buffer));
  }
  if (!ok) return failed(in);
  if (in.remaining() != 0) return corrupt(std::to_string(in.remaining()) + " trailing bytes");
  if (in.crc() != payload_crc) return corrupt("payload CRC32 mismatch");
  return identity();
}

// Checkpoint steps present in `rank_dir` (valid or not), newest first, and
// the names of leftover temporary files. A missing directory has none.
struct DirListing {
  std::vector<int64_t> steps;
  std::vector<std::string> temp_files;
};
StatusOr<DirListing> ListRankDir(const std::string& rank_dir) {
  DirListing listing;
  DIR* d = ::opendir(rank_dir.c_str());
  if (d == nullptr) {
    if (errno == ENOENT) return listing;
    return DirectoryError("cannot list checkpoint directory", rank_dir, errno);
  }
  while (const dirent* entry = ::readdir(d)) {
    std::string_view name = entry->d_name;
    if (auto step = ParseStepFileName(name)) {
      listing.steps.push_back(*step);
    } else if (name.starts_with(kStepPrefix) && name.ends_with(kTempSuffix)) {
      listing.temp_files.emplace_back(name);
    }
  }
  ::closedir(d);
  std::sort(listing.steps.begin(), listing.steps.end(), std::greater<>());
  return listing;
}

void Warn(const std::string& message) {
  std::fprintf(stderr, "pacer-worker: warning: %s\n", message.c_str());
}

}  // namespace

uint32_t Crc32(std::span<const std::byte> data, uint32_t crc) {
  crc = ~crc;
  for (std::byte b : data) {
    crc = kCrcTable[(crc ^ std::to_integer<uint32_t>(b)) & 0xFFu] ^ (crc >> 8);
  }
  return ~crc;
}

Status CheckCheckpointDirectory(const std::string& dir) {
  if (dir.empty()) return InvalidArgumentError("empty checkpoint directory");
  std::string path = dir;
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  // Up to the nearest path that exists: `dir` itself, or the directory
  // Save will create it in.
  for (;;) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) {
      const int err = errno;
      if (err != ENOENT) return DirectoryError("cannot use checkpoint directory", dir, err);
      // A symbolic link to nothing: stat says ENOENT, but mkdir cannot make
      // the directory there (EEXIST), so every save failed (exit 7, a
      // relaunch into the same failure) after a start that passed this check.
      struct stat link {};
      if (::lstat(path.c_str(), &link) == 0 && S_ISLNK(link.st_mode)) {
        std::error_code ec;
        const std::string target = std::filesystem::read_symlink(path, ec).string();
        return InvalidArgumentError(
            "cannot use checkpoint directory " + dir + ": " + path + " is a symbolic link to " +
            (target.empty() ? "a path" : target) +
            ", which does not exist; create it, or point --checkpoint-dir / "
            "PACER_CHECKPOINT_DIR at a directory");
      }
      const std::string parent = ParentDir(path);
      if (parent == path) return IoError("cannot use checkpoint directory", dir, err);
      path = parent;
      continue;
    }
    if (!S_ISDIR(st.st_mode)) {
      return DirectoryError("cannot use checkpoint directory", path, ENOTDIR);
    }
    // access() and not a trial file: it names the reason (EACCES, EROFS)
    // without writing anything to a volume that may be fine. Root passes
    // any permission bits, but not a read-only mount.
    if (::access(path.c_str(), W_OK | X_OK) != 0) {
      const int err = errno;
      if (path == dir) return DirectoryError("cannot write checkpoint directory", path, err);
      return DirectoryError("cannot create checkpoint directory " + dir + " in", path, err);
    }
    return Status::Ok();
  }
}

CheckpointStore::CheckpointStore(std::string dir, int rank, int keep)
    : dir_(std::move(dir)),
      rank_(rank),
      keep_(std::max(keep, 1)),
      rank_dir_(dir_ + "/rank-" + std::to_string(rank)) {}

std::string CheckpointStore::PathForStep(int64_t step) const {
  return rank_dir_ + "/" + StepFileName(step);
}

Status CheckCheckpointBufferBytes(uint64_t buffer_bytes) {
  if (buffer_bytes <= kMaxCheckpointBufferBytes) return Status::Ok();
  char gib[32];
  std::snprintf(gib, sizeof gib, "%.1f", static_cast<double>(buffer_bytes) / (uint64_t{1} << 30));
  return InvalidArgumentError(
      std::string("--checkpoint-buffers: this rank's weights and optimizer state are ") + gib +
      " GiB (" + std::to_string(buffer_bytes) +
      " bytes), beyond a checkpoint's 64 GiB limit; shard them over more ranks (ZeRO stage 1 or "
      "more, tensor or pipeline parallelism) or checkpoint without --checkpoint-buffers");
}

Status CheckpointStore::Save(const CheckpointState& state) const {
  if (state.step < 0) {
    return InvalidArgumentError("checkpoint step must be >= 0, got " + std::to_string(state.step));
  }
  if (state.rank != rank_) {
    return InvalidArgumentError("checkpoint of rank " + std::to_string(state.rank) +
                                " given to the store of rank " + std::to_string(rank_));
  }
  uint64_t buffer_bytes = 0;
  for (const auto& [name, bytes] : state.buffers) buffer_bytes += bytes.size();
  RETURN_IF_ERROR(CheckCheckpointBufferBytes(buffer_bytes));

  RETURN_IF_ERROR(MakeDirs(rank_dir_));
  const std::string path = PathForStep(state.step);
  const std::string temp_path = path + std::string(kTempSuffix);
  int fd = ::open(temp_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return DirectoryError("cannot create checkpoint", temp_path, errno);

  auto fail = [&](Status s) {
    CloseFd(fd);
    ::unlink(temp_path.c_str());
    return s;
  };

  // The header goes last (with pwrite) because it holds the payload's CRC;
  // until then zeros stand in, which no reader accepts.
  std::array<std::byte, kHeaderBytes> header{};
  if (::pwrite(fd, header.data(), header.size(), 0) != static_cast<ssize_t>(header.size())) {
    return fail(IoError("cannot write", temp_path, errno));
  }
  if (::lseek(fd, static_cast<off_t>(kHeaderBytes), SEEK_SET) < 0) {
    return fail(IoError("cannot seek in", temp_path, errno));
  }
  PayloadWriter payload(fd, temp_path);
  payload.U64(static_cast<uint64_t>(state.step));
  payload.U32(static_cast<uint32_t>(state.rank));
  payload.U32(static_cast<uint32_t>(state.world_size));
  payload.Str(state.job_name);
  payload.Str(state.plan_fingerprint);
  payload.Str(state.run_id);
  payload.Blob(state.rng_state);
  payload.U32(static_cast<uint32_t>(state.buffers.size()));
  for (const auto& [name, bytes] : state.buffers) {
    payload.Str(name);
    payload.Blob(bytes);
  }
  payload.Flush();
  if (!payload.status().ok()) return fail(payload.status());

  std::memcpy(header.data(), kMagic.data(), kMagic.size());
  PutU32(header.data() + 8, kFormatVersion);
  PutU32(header.data() + 12, payload.crc());
  PutU64(header.data() + 16, payload.bytes());
  PutU32(header.data() + 24, Crc32(std::span(header).first(24)));
  if (::pwrite(fd, header.data(), header.size(), 0) != static_cast<ssize_t>(header.size())) {
    return fail(IoError("cannot write checkpoint header", temp_path, errno));
  }
  if (::fsync(fd) != 0) return fail(IoError("cannot fsync", temp_path, errno));
  if (::close(fd) != 0 && errno != EINTR) {
    int err = errno;
    ::unlink(temp_path.c_str());
    return IoError("cannot close", temp_path, err);
  }
  if (::rename(temp_path.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(temp_path.c_str());
    return IoError("cannot rename " + temp_path + " to", path, err);
  }
  RETURN_IF_ERROR(FsyncPath(rank_dir_));

  // Pruning failures only warn: the new checkpoint is durable, and failing
  // the save would stop training over a file that merely takes space.
  auto listing = ListRankDir(rank_dir_);
  if (!listing.ok()) {
    Warn("not pruning old checkpoints: " + listing.status().message());
    return Status::Ok();
  }
  int kept = 0;
  for (int64_t step : listing->steps) {
    // Newer files than the one just written belong to a run that was rolled
    // back to an older common step; resuming from them would skip work that
    // the other ranks redo.
    bool keep = step <= state.step && kept < keep_;
    // A torn or corrupt file must not take one of the `keep` places: then
    // the fallback a resume needs when the newest file goes bad is gone.
    if (keep && step != state.step) {
      const Status read = ReadCheckpoint(PathForStep(step), step, rank_, nullptr);
      if (read.code() == StatusCode::kUnavailable) {
        // An I/O error says nothing about the file, which may be the only
        // good fallback once the volume recovers: it takes no place, and it
        // is not deleted either.
        Warn("cannot check old checkpoint " + PathForStep(step) + " (" + read.message() +
             "); keeping it");
        continue;
      }
      keep = read.ok();
    }
    if (keep) {
      ++kept;
      continue;
    }
    std::string old_path = PathForStep(step);
    if (::unlink(old_path.c_str()) != 0 && errno != ENOENT) {
      Warn("cannot delete old checkpoint " + old_path + ": " + ErrnoText(errno));
    }
  }
  // This rank is the only writer, so any other .tmp is a crash's leftover.
  for (const std::string& name : listing->temp_files) {
    std::string temp = rank_dir_ + "/" + name;
    if (::unlink(temp.c_str()) != 0 && errno != ENOENT) {
      Warn("cannot delete leftover " + temp + ": " + ErrnoText(errno));
    }
  }
  return Status::Ok();
}

StatusOr<std::vector<int64_t>> CheckpointStore::ValidSteps(
    CheckpointVerification verification) const {
  ASSIGN_OR_RETURN(DirListing listing, ListRankDir(rank_dir_));
  std::vector<int64_t> valid;
  for (int64_t step : listing.steps) {
    CheckpointState state;
    Status read = ReadCheckpoint(PathForStep(step), step, rank_,
                                 verification == CheckpointVerification::kFull ? &state : nullptr);
    if (read.ok()) {
      valid.push_back(step);
    } else if (read.code() != StatusCode::kNotFound) {  // kNotFound: pruned meanwhile
      Warn("skipping checkpoint: " + read.message());
    }
  }
  return valid;
}

StatusOr<std::vector<int64_t>> CheckpointStore::ListedSteps() const {
  ASSIGN_OR_RETURN(DirListing listing, ListRankDir(rank_dir_));
  return std::move(listing.steps);
}

StatusOr<std::optional<CheckpointState>> CheckpointStore::LoadNewest() const {
  ASSIGN_OR_RETURN(DirListing listing, ListRankDir(rank_dir_));
  for (int64_t step : listing.steps) {
    CheckpointState state;
    Status read = ReadCheckpoint(PathForStep(step), step, rank_, &state);
    if (read.ok()) return std::optional<CheckpointState>(std::move(state));
    if (read.code() != StatusCode::kNotFound) Warn("skipping checkpoint: " + read.message());
  }
  return std::optional<CheckpointState>();
}

StatusOr<CheckpointState> CheckpointStore::Load(int64_t step) const {
  CheckpointState state;
  RETURN_IF_ERROR(ReadCheckpoint(PathForStep(step), step, rank_, &state));
  return state;
}

StatusOr<CheckpointState> CheckpointStore::LoadIdentity(int64_t step) const {
  CheckpointState state;
  RETURN_IF_ERROR(ReadCheckpoint(PathForStep(step), step, rank_, &state, /*identity_only=*/true));
  return state;
}

StatusOr<std::optional<int64_t>> NewestCommonStep(const std::string& dir, int world_size,
                                                  CheckpointVerification verification) {
  if (world_size < 1) {
    return InvalidArgumentError("world size must be >= 1, got " + std::to_string(world_size));
  }
  std::set<int64_t> common;
  for (int rank = 0; rank < world_size; ++rank) {
    ASSIGN_OR_RETURN(std::vector<int64_t> steps,
                     CheckpointStore(dir, rank).ValidSteps(verification));
    std::set<int64_t> mine(steps.begin(), steps.end());
    if (rank == 0) {
      common = std::move(mine);
    } else {
      std::erase_if(common, [&](int64_t s) { return !mine.contains(s); });
    }
    if (common.empty()) return std::optional<int64_t>();
  }
  return std::optional<int64_t>(*common.rbegin());
}

}  // namespace pacer::worker
