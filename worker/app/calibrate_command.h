// `pacer-worker calibrate`: measures this machine (GEMM throughput, memory
// bandwidth, all-reduce bus bandwidth), prints a table and writes the
// calibration JSON that `pacer plan --calibration FILE` reads
// (planner/calibration.h). GPU when one is visible (and the GPU backend was
// built), else CPU with OpenBLAS and Gloo.
// Thread-safety: runs once per process, from main().
#ifndef PACER_WORKER_APP_CALIBRATE_COMMAND_H_
#define PACER_WORKER_APP_CALIBRATE_COMMAND_H_

#include <ostream>
#include <string>

#include "core/worker_config.h"
#include "pacer/status.h"

namespace pacer::worker {

struct CalibrateFlags {
  Backend backend = Backend::kAuto;
  std::string gpu_type;     // catalog name the JSON entry is keyed by
  std::string output_path;  // calibration JSON; empty = print only
  int cpu_ranks = 2;        // Gloo all-reduce participants on CPU
  bool quick = false;       // fewer sizes and iterations (tests, smoke runs)
};

// Returns the process exit code (exit_codes.h).
int RunCalibrate(const CalibrateFlags& flags, std::ostream& out, std::ostream& err);

// Whether calibrate may key what the `resolved` backend measures by
// `gpu_type`: InvalidArgument (exit 2) when --backend `requested` was auto,
// no GPU was visible so it resolved to the CPU, and `gpu_type` is a GPU of
// the planner's catalog, whose entry would then carry the CPU's figures.
// An explicit --backend cpu is the caller's choice (RunCalibrate warns).
Status CheckCalibrationTarget(Backend requested, Backend resolved, const std::string& gpu_type);

}  // namespace pacer::worker

#endif  // PACER_WORKER_APP_CALIBRATE_COMMAND_H_
