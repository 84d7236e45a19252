#include "pacer/planner/gpu_catalog.h"

#include <cctype>
#include <utility>

#include "text.h"

namespace pacer::planner {

double GpuType::PeakFlops(Precision precision) const {
  double tflops = 0;
  switch (precision) {
    case Precision::kFp32:
      tflops = fp32_tflops;
      break;
    case Precision::kTf32:
      tflops = tf32_tflops;
      break;
    case Precision::kFp16:
      tflops = fp16_tflops;
      break;
    case Precision::kBf16:
      tflops = bf16_tflops;
      break;
    case Precision::kFp8:
      tflops = fp8_tflops;
      break;
  }
  return tflops * 1e12;
}

const GpuCatalog& GpuCatalog::BuiltIn() {
  // Built once and never destroyed, so pointers from BuiltIn().Find() stay
  // valid for the life of the program.
  static const GpuCatalog* const kCatalog = [] {
    // Dense (no sparsity) tensor-core peaks from NVIDIA datasheets, as tabled in
    // docs/planner.md; fp32 is the non-tensor-core peak. A zero marks a
    // precision the GPU cannot train in (V100 has no bf16, tf32 or fp8; Ampere
    // has no fp8). Prices are left unknown (0): they differ by provider and
    // contract, so they come from the inventory.
    // memory_mib is the device's total as nvidia-smi reports it (the
    // datasheet's "80 GB" H100 is 81,559 MiB, 85.5e9 bytes; docs/planner.md
    // lists the source of each). gemm is the share of the 16-bit peak that
    // the linear layers' GEMMs reach inside a training step: set against
    // Korthikanti's A100 runs (0.84) and llm-foundry's H100 runs (0.62; a
    // lone 8192^3 cuBLAS GEMM reaches 0.807 on an H100, 0.797 on an H200,
    // measured here, but clocks under sustained load and the step's other
    // kernels keep training below it). Newer parts take the Hopper figure,
    // older the Ampere one, until a calibration measures them.
    struct Row {
      const char* name;
      double bf16, fp16, fp8, tf32, fp32, memory_gb, memory_mib, hbm_gbps, nvlink_gbps, gemm;
    };
    static constexpr Row kRows[] = {
        {"A100-40GB", 312, 312, 0, 156, 19.5, 40, 40960, 1555, 600, 0.84},
        {"A100-80GB", 312, 312, 0, 156, 19.5, 80, 81920, 2039, 600, 0.84},
        {"H100-SXM", 989, 989, 1979, 495, 67, 80, 81559, 3350, 900, 0.62},
        // PCIe H100 links pairs through an NVLink bridge (600 GB/s).
        {"H100-PCIe", 756, 756, 1513, 378, 51, 80, 81559, 2000, 600, 0.62},
        // H100 NVL: dense figures are half the datasheet's sparse ones.
        {"H100-NVL", 835, 835, 1670, 418, 60, 94, 95830, 3900, 600, 0.62},
        {"H200", 989, 989, 1979, 495, 67, 141, 143771, 4800, 900, 0.62},
        {"B200", 2250, 2250, 4500, 1100, 80, 192, 183359, 8000, 1800, 0.62},
        {"L40S", 362, 362, 733, 183, 91.6, 48, 46068, 864, 0, 0.62},
        // The 32 GB V100; its tensor cores do fp16 only.
        {"V100-SXM2", 0, 125, 0, 0, 15.7, 32, 32768, 900, 300, 0.84},
    };
    auto* catalog = new GpuCatalog;
    for (const Row& r : kRows) {
      GpuType gpu;
      gpu.name = r.name;
      gpu.bf16_tflops = r.bf16;
      gpu.fp16_tflops = r.fp16;
      gpu.fp8_tflops = r.fp8;
      gpu.tf32_tflops = r.tf32;
      gpu.fp32_tflops = r.fp32;
      gpu.memory_gb = r.memory_gb;
      gpu.memory_mib = r.memory_mib;
      gpu.gemm_efficiency = r.gemm;
      gpu.hbm_gbps = r.hbm_gbps;
      gpu.nvlink_gbps = r.nvlink_gbps;
      catalog->gpus_.push_back(std::move(gpu));
    }
    return catalog;
  }();
  return *kCatalog;
}

const GpuType* GpuCatalog::Find(std::string_view name) const {
  for (const GpuType& gpu : gpus_) {
    if (text::EqualsIgnoreCase(gpu.name, name)) return &gpu;
  }
  return nullptr;
}

bool GpuCatalog::Same(std::string_view a, std::string_view b) const {
  const GpuType* x = Find(a);
  return x != nullptr && x == Find(b);
}

void GpuCatalog::Upsert(GpuType gpu) {
  for (GpuType& existing : gpus_) {
    if (text::EqualsIgnoreCase(existing.name, gpu.name)) {
      existing = std::move(gpu);
      return;
    }
  }
  gpus_.push_back(std::move(gpu));
}

std::string GpuCatalog::NamesForMessage() const {
  std::string out;
  for (const GpuType& gpu : gpus_) {
    if (!out.empty()) out += ", ";
    out += gpu.name;
  }
  return out;
}

}  // namespace pacer::planner
