#include "local/local_inventory.h"

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <thread>
#include <vector>

#include "pacer/strings.h"

namespace pacer::controller {
namespace {

struct ProcGpu {
  std::string model;  // "NVIDIA-H100-80GB-HBM3"
  std::string uuid;   // "GPU-0a1b..."
};

// "Model:           NVIDIA H100 80GB HBM3" -> "NVIDIA-H100-80GB-HBM3", the
// spelling of the GPU feature discovery label the catalog table maps; and
// "GPU UUID:        GPU-..." as it is.
ProcGpu ReadProcGpu(const std::filesystem::path& information) {
  ProcGpu gpu;
  std::ifstream in(information);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("Model:", 0) == 0) {
      gpu.model = std::string(TrimBlanks(std::string_view(line).substr(6)));
      std::replace(gpu.model.begin(), gpu.model.end(), ' ', '-');
    } else if (line.rfind("GPU UUID:", 0) == 0) {
      gpu.uuid = std::string(TrimBlanks(std::string_view(line).substr(9)));
    }
  }
  return gpu;
}

// strtoul's reading of an entry: its leading (signed) decimal number, -1
// when it starts with none. Capped: any number past the GPUs is as good.
int64_t LeadingOrdinal(std::string_view entry) {
  size_t i = 0;
  const bool negative = !entry.empty() && entry[0] == '-';
  if (!entry.empty() && (entry[0] == '+' || entry[0] == '-')) i = 1;
  int64_t value = 0;
  size_t digits = 0;
  for (; i < entry.size() && entry[i] >= '0' && entry[i] <= '9'; ++i, ++digits) {
    value = std::min<int64_t>(value * 10 + (entry[i] - '0'), int64_t{1} << 40);
  }
  if (digits == 0) return -1;
  return negative ? -value : value;
}

// The GPUs of `all` (in PCI bus order) that `visible` leaves, in its order,
// read as CUDA does (PyTorch models its rules in torch.cuda's
// _parse_visible_devices and _transform_uuid_to_ordinals): a list of
// ordinals, or of `GPU-` UUID prefixes, the kind set by the first entry;
// the list ends at the first entry of another kind, a negative ordinal, or
// a UUID prefix that names no GPU or two; an ordinal past the last GPU
// ends it too. None is visible when an entry before the first of another
// kind (or the first negative ordinal) repeats, also past the end a UUID
// prefix makes, or when two prefixes name one GPU. MIG slices are not
// planned for.
std::vector<ProcGpu> Visible(const std::vector<ProcGpu>& all, const std::string& visible) {
  std::vector<size_t> ordinals;
  auto named_before = [&](size_t i) {
    return std::find(ordinals.begin(), ordinals.end(), i) != ordinals.end();
  };
  if (visible.rfind("GPU-", 0) == 0) {
    // The entries as written first: a repeat counts also past one that
    // names no GPU.
    std::vector<std::string_view> prefixes;
    for (std::string_view entry : SplitOn(visible, ',')) {
      if (std::find(prefixes.begin(), prefixes.end(), entry) != prefixes.end()) return {};
      if (entry.rfind("GPU-", 0) != 0) break;
      prefixes.push_back(entry);
    }
    for (std::string_view prefix : prefixes) {
      std::optional<size_t> match;
      bool ambiguous = false;
      for (size_t i = 0; i < all.size(); ++i) {
        if (all[i].uuid.rfind(prefix, 0) != 0) continue;
        ambiguous = ambiguous || match.has_value();
        match = i;
      }
      if (!match || ambiguous) break;
      if (named_before(*match)) return {};
      ordinals.push_back(*match);
    }
  } else if (visible.rfind("MIG-", 0) != 0) {
    for (std::string_view entry : SplitOn(visible, ',')) {
      const int64_t ordinal = LeadingOrdinal(TrimBlanks(entry));
      if (ordinal >= 0 && named_before(static_cast<size_t>(ordinal))) return {};
      if (ordinal < 0) break;
      ordinals.push_back(static_cast<size_t>(ordinal));
    }
    for (size_t i = 0; i < ordinals.size(); ++i) {
      if (ordinals[i] >= all.size()) ordinals.resize(i);
    }
  }
  std::vector<ProcGpu> out;
  for (size_t i : ordinals) out.push_back(all[i]);
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
    // By model, so that an L4 or a PCIe A100 is named, not passed over.
    std::map<std::string, int> uncataloged;
    for (const ProcGpu& gpu : gpus) {
      if (const std::optional<std::string> type = CatalogNameForProduct(gpu.model)) {
        ++by_type[*type];
      } else {
        ++uncataloged[gpu.model.empty() ? std::string("an unnamed model") : gpu.model];
      }
    }
    for (const auto& [model, count] : uncataloged) {
      if (!uncataloged_gpus_.empty()) uncataloged_gpus_ += ", ";
      uncataloged_gpus_ += std::to_string(count) + " x " + model;
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
