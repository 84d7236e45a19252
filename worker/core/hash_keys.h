// The deterministic source of every synthetic input of a step (tokens,
// labels, initial weights): a splitmix64 chain over a few keys, so a value
// depends only on what it is (seed, step, rank, index), never on the order
// or the device that computes it. Thread-safety: pure functions.
#ifndef PACER_WORKER_CORE_HASH_KEYS_H_
#define PACER_WORKER_CORE_HASH_KEYS_H_

#include <cstdint>

namespace pacer::worker {

uint64_t HashKeys(uint64_t a, uint64_t b, uint64_t c = 0, uint64_t d = 0, uint64_t e = 0);
// HashKeys(a, b, c, d, e) == HashKeysFinish(HashKeysPrefix(a, b, c), d, e):
// for many values that share their first three keys, the prefix once and
// two mixing rounds per value instead of five.
uint64_t HashKeysPrefix(uint64_t a, uint64_t b, uint64_t c);
uint64_t HashKeysFinish(uint64_t prefix, uint64_t d, uint64_t e);
// Uniform in [-1, 1) from a hash (24 random bits: exact in fp32).
float UniformFromHash(uint64_t h);

}  // namespace pacer::worker

#endif  // PACER_WORKER_CORE_HASH_KEYS_H_
