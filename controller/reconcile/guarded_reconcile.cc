#include "reconcile/guarded_reconcile.h"

#include <exception>

namespace pacer::controller {

GuardedReconcileResult GuardedReconcile(
    const std::function<ReconcileResult(const std::string&)>& reconcile, const std::string& key) {
  GuardedReconcileResult out;
  std::string what;
  try {
    out.result = reconcile(key);
    return out;
  } catch (const std::exception& e) {
    what = e.what();
  } catch (...) {
    what = "an exception that is not a std::exception";
  }
  out.threw = true;
  out.result.status = InternalError("reconcile of TrainJob " + key + " threw: " + what +
                                    " (a controller bug; retrying with backoff)");
  return out;
}

}  // namespace pacer::controller
