// The GPU catalog: datasheet facts per GPU product, by name ("H100-SXM").
// The built-in table is docs/planner.md's (sources there); a cluster
// inventory may add products or override fields of built-in ones.
//
// Units: dense (no sparsity) peak TFLOP/s = 1e12 FLOP/s; memory as the
// datasheet states it (decimal GB, informational) and as the device reports
// it (MiB = 2^20 bytes, what the planner fits into); bandwidths in GB/s
// (1e9 bytes/s);
// NVLink bandwidth is the datasheet's bidirectional per-GPU figure, 0 = no
// NVLink (PCIe only). Price in currency units per GPU-hour, 0 = unknown.
// Thread-safety: GpuCatalog is a value; const methods are safe to share.
#ifndef PACER_PLANNER_GPU_CATALOG_H_
#define PACER_PLANNER_GPU_CATALOG_H_

#include <string>
#include <string_view>
#include <vector>

#include "pacer/planner/job_spec.h"

namespace pacer::planner {

struct GpuType {
  std::string name;
  double bf16_tflops = 0;  // 0 = precision not supported
  double fp16_tflops = 0;
  double fp8_tflops = 0;
  double tf32_tflops = 0;
  double fp32_tflops = 0;  // non-tensor-core FP32
  double memory_gb = 0;    // datasheet, decimal GB ("80 GB")
  double memory_mib = 0;   // device total as nvidia-smi reports it; 0 = memory_gb x 1e9 bytes
  double hbm_gbps = 0;
  double nvlink_gbps = 0;
  double price_per_gpu_hour = 0;
  // Fraction of the dense peak a large (8192^3) 16-bit GEMM reaches with
  // cuBLAS, measured or published; 0 = the cost model's default. fp8 GEMMs
  // have their own (0 = the 16-bit one).
  double gemm_efficiency = 0;
  double fp8_gemm_efficiency = 0;

  // Dense peak FLOP/s (not TFLOP/s) for training in `precision`; 0 when the
  // GPU has no support for it (e.g. bf16 or fp8 on V100).
  double PeakFlops(Precision precision) const;
  // What the device has, in bytes: the reported MiB when known (an "80 GB"
  // H100 has 81,559 MiB = 85.5e9 bytes), else the datasheet's decimal GB.
  double memory_bytes() const { return memory_mib > 0 ? memory_mib * 1048576.0 : memory_gb * 1e9; }
};

class GpuCatalog {
 public:
  // The datasheet table of docs/planner.md. A process-wide constant: the
  // reference and pointers into it are valid for the life of the program.
  static const GpuCatalog& BuiltIn();

  // nullptr when unknown. Names match case-insensitively.
  const GpuType* Find(std::string_view name) const;
  // Whether `a` and `b` name one GPU of the catalog (any spelling Find
  // accepts); a name the catalog does not know is the same as nothing.
  bool Same(std::string_view a, std::string_view b) const;
  // Adds `gpu`, or replaces the entry of the same name.
  void Upsert(GpuType gpu);
  const std::vector<GpuType>& gpus() const { return gpus_; }
  // "A100-40GB, A100-80GB, ..." for error messages.
  std::string NamesForMessage() const;

 private:
  std::vector<GpuType> gpus_;
};

}  // namespace pacer::planner

#endif  // PACER_PLANNER_GPU_CATALOG_H_
