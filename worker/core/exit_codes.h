// pacer-worker's process exit codes: the controller (and local mode) decide
// what to do next from them, so each cause has its own code. Documented in
// docs/worker.md. A supervising process exits with the code of the first
// rank that failed (or success when all succeeded), or with a sibling's cause
// when the first failure was its symptom (supervisor.h).
// Thread-safety: constants.
#ifndef PACER_WORKER_CORE_EXIT_CODES_H_
#define PACER_WORKER_CORE_EXIT_CODES_H_

namespace pacer::worker {

enum ExitCode : int {
  kExitSuccess = 0,            // all planned steps done
  kExitInternalError = 1,      // a bug or an unexpected error
  kExitInvalidConfig = 2,      // bad flags or environment (message names the variable)
  kExitRendezvousTimeout = 3,  // a peer never showed up at MASTER_ADDR:MASTER_PORT
  kExitCollectiveFailure = 4,  // a collective failed or timed out (a peer died)
  kExitOutOfMemory = 5,        // device or host allocation failed
  // SIGTERM/SIGINT, a clean stop: finished the step, checkpointed, stopped; or
  // stopped before training a step (nothing to save), or without a
  // checkpoint directory (nothing saved; the log says checkpoint=none).
  kExitStoppedAfterCheckpoint = 6,
  kExitCheckpointFailure = 7,  // a checkpoint could not be written or read
  kExitDataLoss = 8,           // checkpoints exist but none is usable: not starting fresh
  // The GPU failed (an uncorrectable ECC or NVLink error, an error the GPU
  // contained, a hardware exception): the node's fault, not the program's.
  kExitDeviceFault = 9,
};

// "success", "invalid-config", ... for logs and metrics.
inline const char* ExitCodeName(int code) {
  switch (code) {
    case kExitSuccess: return "success";
    case kExitInternalError: return "internal-error";
    case kExitInvalidConfig: return "invalid-config";
    case kExitRendezvousTimeout: return "rendezvous-timeout";
    case kExitCollectiveFailure: return "collective-failure";
    case kExitOutOfMemory: return "out-of-memory";
    case kExitStoppedAfterCheckpoint: return "stopped-after-checkpoint";
    case kExitCheckpointFailure: return "checkpoint-failure";
    case kExitDataLoss: return "data-loss";
    case kExitDeviceFault:
      return "device-fault";
    default: return "unknown";
  }
}

}  // namespace pacer::worker

#endif  // PACER_WORKER_CORE_EXIT_CODES_H_
