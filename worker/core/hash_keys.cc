#include "core/hash_keys.h"

namespace pacer::worker {

namespace {
uint64_t SplitMix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}
}  // namespace

uint64_t HashKeys(uint64_t a, uint64_t b, uint64_t c, uint64_t d, uint64_t e) {
  return HashKeysFinish(HashKeysPrefix(a, b, c), d, e);
}

uint64_t HashKeysPrefix(uint64_t a, uint64_t b, uint64_t c) {
  return SplitMix(SplitMix(SplitMix(a) ^ b) ^ c);
}

uint64_t HashKeysFinish(uint64_t prefix, uint64_t d, uint64_t e) {
  return SplitMix(SplitMix(prefix ^ d) ^ e);
}

float UniformFromHash(uint64_t h) {
  // 24 random bits: exactly representable, so the value is the same everywhere.
  return static_cast<float>(h >> 40) * (2.0f / 16777216.0f) - 1.0f;
}

}  // namespace pacer::worker
