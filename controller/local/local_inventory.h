// Local mode's inventory: this machine as one node. With NVIDIA GPUs (read
// from /proc/driver/nvidia/gpus/*/information, no driver library needed) it
// is a pool of those GPUs that CUDA_VISIBLE_DEVICES leaves visible to the
// workers, under their catalog name; without, it is a pool of
// CPU "devices" of a GPU type named "CPU" added to the catalog, so the same
// planner sizes the job for the CPU backend (fp32 OpenBLAS GEMMs, Gloo over
// loopback).
//
// The CPU figures are deliberately plain defaults (per device: 0.02 TFLOP/s,
// host memory / devices, 10 GB/s memory bandwidth; 10 Gbit/s loopback): the
// re-plan loop corrects them with the measured/predicted ratio, which is the
// point of the exercise. Override with LocalInventoryOptions.
//
// Units: TFLOP/s, GB, Gbit/s as in the planner's catalog.
// Thread-safety: Current() is safe to call concurrently (the inventory is
// computed once, at construction).
#ifndef PACER_CONTROLLER_LOCAL_LOCAL_INVENTORY_H_
#define PACER_CONTROLLER_LOCAL_LOCAL_INVENTORY_H_

#include <optional>
#include <string>

#include "reconcile/interfaces.h"

namespace pacer::controller {

inline constexpr const char* kCpuDeviceType = "CPU";

struct LocalInventoryOptions {
  int cpu_devices = 0;  // 0 = min(cores, 4), at least 1
  double cpu_tflops_per_device = 0.02;
  std::string proc_nvidia_dir = "/proc/driver/nvidia/gpus";
  bool use_gpus = true;  // false = the CPU pool even when GPUs exist
  // CUDA_VISIBLE_DEVICES as the workers will see it (they inherit it);
  // nullopt = unset, every GPU. Indices count the GPUs in PCI bus order
  // (CUDA's order with CUDA_DEVICE_ORDER=PCI_BUS_ID, and on a machine of
  // one GPU model any order gives the same pool); `GPU-<uuid>` prefixes are
  // matched against each GPU's UUID. As CUDA does, the list ends at the
  // first entry that names no GPU (or one named before).
  std::optional<std::string> cuda_visible_devices;
};

class LocalInventory final : public InventorySource {
 public:
  explicit LocalInventory(const LocalInventoryOptions& options);
  StatusOr<ClusterInventory> Current() override { return inventory_; }
  bool uses_gpus() const { return uses_gpus_; }
  // The visible NVIDIA GPUs the catalog has no row for, as "2 x NVIDIA-L4"
  // (models joined by ", "); empty when there are none. They are not planned
  // for: without a catalog row there is no peak, memory or bandwidth.
  const std::string& uncataloged_gpus() const { return uncataloged_gpus_; }
  std::string Describe() const;  // "2 x CPU (local)" for the banner

 private:
  ClusterInventory inventory_;
  bool uses_gpus_ = false;
  std::string uncataloged_gpus_;
};

}  // namespace pacer::controller

#endif  // PACER_CONTROLLER_LOCAL_LOCAL_INVENTORY_H_
