#include "local/local_inventory.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <thread>

namespace pacer::controller {
namespace {

// "Model:           NVIDIA H100 80GB HBM3" -> "NVIDIA-H100-80GB-HBM3", the
// spelling of the GPU feature discovery label the catalog table maps.
std::string ModelOf(const std::filesystem::path& information) {
  std::ifstream in(information);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("Model:", 0) != 0) continue;
    std::string model = line.substr(6);
    model.erase(0, model.find_first_not_of(" \t"));
    model.erase(model.find_last_not_of(" \t\r") + 1);
    std::replace(model.begin(), model.end(), ' ', '-');
    return model;
  }
  return "";
}

double HostMemoryGb() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page_size = ::sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page_size <= 0) return 8;
  return static_cast<double>(pages) * static_cast<double>(page_size) / 1e9;
}

}  // namespace

LocalInventory::LocalInventory(const LocalInventoryOptions& options) {
  planner::NodePool pool;
  pool.nodes = 1;
  if (options.use_gpus) {
    std::error_code ec;
    std::map<std::string, int> by_type;
    for (const auto& entry : std::filesystem::directory_iterator(options.proc_nvidia_dir, ec)) {
      const std::optional<std::string> type =
          CatalogNameForProduct(ModelOf(entry.path() / "information"));
      if (type) ++by_type[*type];
    }
    if (!by_type.empty()) {
      // One type per machine in practice; take the most numerous.
      auto best =
          std::max_element(by_type.begin(), by_type.end(),
                           [](const auto& a, const auto& b) { return a.second < b.second; });
      const planner::GpuType* gpu = inventory_.inventory.catalog.Find(best->first);
      pool.name = "local-gpu";
      pool.gpu_type = best->first;
      pool.gpus_per_node = best->second;
      pool.free_gpus = best->second;
      pool.network_gbps_per_node = 100;
      pool.nvlink_gbps = gpu != nullptr ? gpu->nvlink_gbps : 0;
      uses_gpus_ = true;
    }
  }
  if (!uses_gpus_) {
    const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    const int devices = options.cpu_devices > 0 ? options.cpu_devices : std::min(cores, 4);
    planner::GpuType cpu;
    cpu.name = kCpuDeviceType;
    // The CPU backend runs fp32 GEMMs whatever the precision: one peak for all.
    cpu.bf16_tflops = cpu.fp16_tflops = cpu.tf32_tflops = cpu.fp32_tflops =
        options.cpu_tflops_per_device;
    cpu.memory_gb = HostMemoryGb() / devices;
    cpu.hbm_gbps = 10;
    cpu.nvlink_gbps = 0;
    inventory_.inventory.catalog.Upsert(cpu);
    pool.name = "local-cpu";
    pool.gpu_type = kCpuDeviceType;
    pool.gpus_per_node = devices;
    pool.free_gpus = devices;
    pool.network_gbps_per_node = 10;
  }
  inventory_.inventory.node_pools.push_back(pool);
  inventory_.nodes_by_pool[pool.name].push_back(
      PoolNode{"localhost", pool.gpus_per_node, pool.gpus_per_node});
}

std::string LocalInventory::Describe() const {
  const planner::NodePool& pool = inventory_.inventory.node_pools.front();
  return std::to_string(pool.gpus_per_node) + " x " + pool.gpu_type +
         (uses_gpus_ ? " (local GPUs)" : " (CPU devices: OpenBLAS + Gloo)");
}

}  // namespace pacer::controller
