// Which step backend a worker runs, and the factories for it.
// Thread-safety: pure apart from reading /proc; callable before fork.
#ifndef PACER_WORKER_APP_BACKEND_CHOICE_H_
#define PACER_WORKER_APP_BACKEND_CHOICE_H_

#include "core/runner.h"
#include "core/worker_config.h"
#include "pacer/status.h"

namespace pacer::worker {

// Whether this binary was built with the GPU backend.
bool GpuBackendBuilt();

// Whether an NVIDIA driver is loaded. Decided without touching CUDA, because
// the supervisor forks its ranks afterwards and CUDA does not survive fork.
bool NvidiaDriverPresent();

// kAuto -> GPU when built and a driver is present, else CPU. Asking for the
// GPU where there is none is InvalidArgument (PACER_BACKEND names the fix).
StatusOr<Backend> ResolveBackend(Backend requested);

BackendFactory FactoryFor(Backend backend);

}  // namespace pacer::worker

#endif  // PACER_WORKER_APP_BACKEND_CHOICE_H_
