#include "core/initial_weights.h"

#include <algorithm>
#include <system_error>
#include <thread>
#include <vector>

#include "core/hash_keys.h"

namespace pacer::worker {

UnsplitMap UnsplitMap::Rows(int64_t rank, int64_t local_rows, int64_t cols) {
  UnsplitMap m;
  m.kind_ = Kind::kRows;
  m.offset_ = rank * local_rows * cols;
  return m;
}

UnsplitMap UnsplitMap::Columns(std::initializer_list<int64_t> local_widths, int64_t ranks,
                               int64_t rank) {
  UnsplitMap m;
  m.kind_ = Kind::kColumns;
  m.width_ = 0;
  for (int64_t w : local_widths) {
    if (m.sections_ == static_cast<int>(m.widths_.size())) break;
    m.widths_[static_cast<size_t>(m.sections_++)] = w;
    m.width_ += w;
  }
  if (m.width_ <= 0) m.width_ = 1;
  m.ranks_ = ranks;
  m.rank_ = rank;
  return m;
}

void FillInitialWeights(uint64_t seed, uint64_t matrix, const UnsplitMap& map, float scale,
                        float* out, size_t n, unsigned threads) {
  const uint64_t prefix = HashKeysPrefix(seed, 0, matrix);
  const auto fill = [&](size_t lo, size_t hi) {
    for (size_t i = lo; i < hi; ++i) {
      out[i] = UniformFromHash(HashKeysFinish(prefix, map(i), 0x77)) * scale;
    }
  };
  constexpr size_t kMinChunk = size_t{1} << 18;
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  const size_t chunks = std::max<size_t>(1, std::min<size_t>(threads, n / kMinChunk));
  const size_t per = (n + chunks - 1) / chunks;
  std::vector<std::thread> helpers;
  size_t done_by_helpers = 0;  // chunks 1 .. done_by_helpers run on helpers
  for (size_t c = 1; c < chunks; ++c) {
    try {
      helpers.emplace_back(fill, c * per, std::min(n, (c + 1) * per));
      done_by_helpers = c;
    } catch (const std::system_error&) {
      break;  // no more threads: the calling thread does the rest
    }
  }
  fill(0, std::min(n, per));
  fill(std::min(n, (done_by_helpers + 1) * per), n);
  for (std::thread& t : helpers) t.join();
}

}  // namespace pacer::worker
