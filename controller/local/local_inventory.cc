#include "local/local_inventory.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <thread>
#include <vector>

namespace pacer::controller {
namespace {

struct ProcGpu {
  std::string model;  // "NVIDIA-H100-80GB-HBM3"
  std::string uuid;   // "GPU-0a1b..."
};

std::string Trimmed(std::string text) {
  text.erase(0, text.find_first_not_of(" \t"));
  text.erase(text.find_last_not_of(" \t\r") + 1);
  return text;
}

// "Model:           NVIDIA H100 80GB HBM3" -> "NVIDIA-H100-80GB-HBM3", the
// spelling of the GPU feature discovery label the catalog table maps; and
// "GPU UUID:        GPU-..." as it is.
ProcGpu ReadProcGpu(const std::filesystem::path& information) {
  ProcGpu gpu;
  std::ifstream in(information);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("Model:", 0) == 0) {
      gpu.model = Trimmed(line.substr(6));
      std::replace(gpu.model.begin(), gpu.model.end(), ' ', '-');
    } else if (line.rfind("GPU UUID:", 0) == 0) {
      gpu.uuid = Trimmed(line.substr(9));
    }
  }
  return gpu;
}

// The GPUs of `all` (in PCI bus order) that `visible` leaves, in its order.
std::vector<ProcGpu> Visible(const std::vector<ProcGpu>& all, const std::string& visible) {
  std::vector<ProcGpu> out;
  std::vector<bool> taken(all.size(), false);
  size_t start = 0;
  while (start <= visible.size()) {
    size_t end = visible.find(',', start);
    if (end == std::string::npos) end = visible.size();
    const std::string entry = Trimmed(visible.substr(start, end - start));
    start = end + 1;
    std::optional<size_t> index;
    if (!entry.empty() && entry.size() <= 6 &&
        std::all_of(entry.begin(), entry.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      const size_t i = std::stoul(entry);
      if (i < all.size()) index = i;
    } else if (entry.rfind("GPU-", 0) == 0) {
      for (size_t i = 0; i < all.size(); ++i) {
        if (all[i].uuid.rfind(entry, 0) != 0) continue;
        if (index) {  // a prefix of two UUIDs names neither
          index.reset();
          break;
        }
        index = i;
      }
    }
    if (!index || taken[*index]) break;  // CUDA ignores the rest of the list
    taken[*index] = true;
    out.push_back(all[*index]);
  }
  return out;
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
    // One directory per GPU, named by its PCI address: sorted, bus order.
    std::vector<std::filesystem::path> dirs;
    for (const auto& entry : std::filesystem::directory_iterator(options.proc_nvidia_dir, ec)) {
      dirs.push_back(entry.path());
    }
    std::sort(dirs.begin(), dirs.end());
    std::vector<ProcGpu> gpus;
    for (const std::filesystem::path& dir : dirs) gpus.push_back(ReadProcGpu(dir / "information"));
    // The workers inherit CUDA_VISIBLE_DEVICES: a plan for GPUs they cannot
    // see failed its ranks past the visible count with exit 2.
    if (options.cuda_visible_devices) gpus = Visible(gpus, *options.cuda_visible_devices);
    std::map<std::string, int> by_type;
    for (const ProcGpu& gpu : gpus) {
      if (const std::optional<std::string> type = CatalogNameForProduct(gpu.model)) {
        ++by_type[*type];
      }
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
