// pacer-controller's manager (daemon/controller_manager.h) against the test
// API server: the start and stop of its reconcile workers.
#include "daemon/controller_manager.h"

#include <atomic>
#include <future>
#include <memory>
#include <thread>

#include "kube_test_env.h"

namespace pacer::controller {
namespace {

// The leader elector's thread starts the workers and runs the first
// scheduler pass before it starts them; a SIGTERM in that window (seen in
// CI under AddressSanitizer, where the pass is slow) stopped the workers
// before they existed, and the start then created threads nobody joined:
// std::terminate when the manager was destroyed.
TEST_F(KubeTest, AStopDuringTheFirstSchedulerPassJoinsEveryThreadTheStartCreates) {
  ManagerOptions options;
  options.kube = Config();
  options.bind_address = "127.0.0.1";
  options.metrics_port = 0;
  options.probe_port = 0;
  options.workers = 2;
  options.identity = "manager-test";
  ControllerManager* self = nullptr;
  std::atomic<bool> first{true};
  std::promise<void> in_first_pass;
  options.scheduler_pass_hook = [&] {
    if (!first.exchange(false)) return;
    in_first_pass.set_value();
    self->Wait();  // returns once Stop() has begun
  };
  auto manager = std::make_unique<ControllerManager>(options);
  self = manager.get();
  ASSERT_TRUE(manager->Start().ok());
  ASSERT_EQ(in_first_pass.get_future().wait_for(kWait), std::future_status::ready)
      << "the manager became the leader and ran its first scheduler pass";

  std::thread stopper([&] { manager->Stop(); });
  stopper.join();
  EXPECT_FALSE(manager->IsLeader());
  EXPECT_EQ(manager->Wait(), ControllerManager::Exit::kStopped);
  manager.reset();  // every thread joined, or std::terminate here
}

}  // namespace
}  // namespace pacer::controller
