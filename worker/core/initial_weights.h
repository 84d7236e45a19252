// The initial weights of a rank's matrices, filled on the host: element i
// of a matrix is UniformFromHash(HashKeys(seed, 0, matrix, unsplit(i),
// 0x77)) x scale, where unsplit(i) is where the element lies in the matrix
// before tensor-parallel splitting (UnsplitMap), so the model does not
// depend on how it is split. Written for speed: a 7B model holds 6.7e9
// such elements, and the per-element work here is two of HashKeys' five
// mixing rounds (the first three depend only on the matrix) and integer
// arithmetic, spread over threads; when each element hashed five rounds
// and matched its matrix's name on one thread, the fill took about 41 s of
// the 43-50 s a 1.9e9-parameter run on an H100 node lasted (10 s after).
// Units: elements. Thread-safety: UnsplitMap is a value; FillInitialWeights
// starts and joins its own threads and touches only `out`.
#ifndef PACER_WORKER_CORE_INITIAL_WEIGHTS_H_
#define PACER_WORKER_CORE_INITIAL_WEIGHTS_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>

namespace pacer::worker {

// Where element i of a rank's share of a matrix lies in the unsplit (t = 1)
// matrix, row-major.
class UnsplitMap {
 public:
  // Not split: element i is element i.
  UnsplitMap() = default;
  // Split by rows of `cols`: `rank`'s `local_rows` rows follow rank x
  // local_rows of them.
  static UnsplitMap Rows(int64_t rank, int64_t local_rows, int64_t cols);
  // Split by columns, section by section (Megatron's layout: query, key and
  // value heads; SwiGLU's gate and up halves): each of the `ranks` ranks
  // holds `local_widths[k]` columns of section k; at most three sections.
  static UnsplitMap Columns(std::initializer_list<int64_t> local_widths, int64_t ranks,
                            int64_t rank);

  uint64_t operator()(size_t i) const {
    const auto e = static_cast<int64_t>(i);
    if (kind_ == Kind::kRows) return static_cast<uint64_t>(offset_ + e);
    if (kind_ == Kind::kSame) return static_cast<uint64_t>(e);
    const int64_t row = e / width_, col = e % width_;
    int64_t start = 0;
    for (int k = 0; k < sections_; ++k) {
      const int64_t w = widths_[static_cast<size_t>(k)];
      if (col < start + w)
        return static_cast<uint64_t>((row * width_ + start) * ranks_ + rank_ * w + (col - start));
      start += w;
    }
    return static_cast<uint64_t>(e);  // not reached: col < width
  }

 private:
  enum class Kind { kSame, kRows, kColumns };
  Kind kind_ = Kind::kSame;
  int64_t offset_ = 0;  // kRows
  std::array<int64_t, 3> widths_{};
  int sections_ = 0;
  int64_t width_ = 1, ranks_ = 1, rank_ = 0;  // kColumns
};

// out[i] = UniformFromHash(HashKeys(seed, 0, matrix, map(i), 0x77)) x scale
// for i < n, on up to `threads` threads (0: one per hardware thread); a
// chunk is at least 256 Ki elements, so small matrices stay on the calling
// thread. The result does not depend on the thread count.
void FillInitialWeights(uint64_t seed, uint64_t matrix, const UnsplitMap& map, float scale,
                        float* out, size_t n, unsigned threads = 0);

}  // namespace pacer::worker

#endif  // PACER_WORKER_CORE_INITIAL_WEIGHTS_H_
