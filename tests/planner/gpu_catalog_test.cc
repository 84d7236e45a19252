#include "pacer/planner/gpu_catalog.h"

#include <gtest/gtest.h>

namespace pacer::planner {
namespace {

TEST(GpuCatalogTest, BuiltInHasTheDocumentedTypes) {
  const GpuCatalog catalog = GpuCatalog::BuiltIn();
  EXPECT_EQ(catalog.NamesForMessage(),
            "A100-40GB, A100-80GB, H100-SXM, H100-PCIe, H100-NVL, H200, B200, L40S, V100-SXM2");
  for (const GpuType& gpu : catalog.gpus()) {
    EXPECT_GT(gpu.memory_gb, 0) << gpu.name;
    // The device reports more than the datasheet's decimal GB: every "N GB"
    // part has at least N GiB... less the ECC and driver reserve, which
    // keeps it above N x 1e9 bytes.
    EXPECT_GT(gpu.memory_bytes(), gpu.memory_gb * 1e9 * 0.99) << gpu.name;
    EXPECT_GT(gpu.gemm_efficiency, 0) << gpu.name;
    EXPECT_LE(gpu.gemm_efficiency, 1) << gpu.name;
    EXPECT_GT(gpu.hbm_gbps, 0) << gpu.name;
    EXPECT_GT(gpu.fp16_tflops, 0) << gpu.name;
    EXPECT_GT(gpu.fp32_tflops, 0) << gpu.name;
    EXPECT_EQ(gpu.price_per_gpu_hour, 0) << gpu.name;
  }
}

TEST(GpuCatalogTest, DatasheetValues) {
  const GpuCatalog catalog = GpuCatalog::BuiltIn();
  const GpuType* h100 = catalog.Find("H100-SXM");
  ASSERT_NE(h100, nullptr);
  EXPECT_EQ(h100->bf16_tflops, 989);
  EXPECT_EQ(h100->fp16_tflops, 989);
  EXPECT_EQ(h100->fp8_tflops, 1979);
  EXPECT_EQ(h100->tf32_tflops, 495);
  EXPECT_EQ(h100->fp32_tflops, 67);
  EXPECT_EQ(h100->memory_gb, 80);
  EXPECT_EQ(h100->hbm_gbps, 3350);
  EXPECT_EQ(h100->nvlink_gbps, 900);
  // An "80 GB" H100 has 81,559 MiB (nvidia-smi), not 80e9 bytes (74.5 GiB).
  EXPECT_EQ(h100->memory_mib, 81559);
  EXPECT_DOUBLE_EQ(h100->memory_bytes(), 81559.0 * 1024 * 1024);

  const GpuType* h200 = catalog.Find("H200");
  ASSERT_NE(h200, nullptr);
  EXPECT_EQ(h200->memory_gb, 141);
  EXPECT_EQ(h200->memory_mib, 143771);
  EXPECT_EQ(h200->hbm_gbps, 4800);

  const GpuType* a100 = catalog.Find("A100-40GB");
  ASSERT_NE(a100, nullptr);
  EXPECT_EQ(a100->fp8_tflops, 0);
  EXPECT_EQ(a100->hbm_gbps, 1555);
  EXPECT_EQ(catalog.Find("A100-80GB")->hbm_gbps, 2039);
  EXPECT_EQ(catalog.Find("B200")->nvlink_gbps, 1800);
  EXPECT_EQ(catalog.Find("L40S")->nvlink_gbps, 0);
  EXPECT_EQ(catalog.Find("L40S")->fp32_tflops, 91.6);
  EXPECT_EQ(catalog.Find("H100-PCIe")->bf16_tflops, 756);
}

TEST(GpuCatalogTest, V100HasNoBf16) {
  const GpuType* v100 = GpuCatalog::BuiltIn().Find("V100-SXM2");
  ASSERT_NE(v100, nullptr);
  EXPECT_EQ(v100->memory_gb, 32);
  EXPECT_EQ(v100->PeakFlops(Precision::kBf16), 0);
  EXPECT_EQ(v100->PeakFlops(Precision::kFp8), 0);
  EXPECT_EQ(v100->PeakFlops(Precision::kTf32), 0);
  EXPECT_DOUBLE_EQ(v100->PeakFlops(Precision::kFp16), 125e12);
  EXPECT_DOUBLE_EQ(v100->PeakFlops(Precision::kFp32), 15.7e12);
}

TEST(GpuCatalogTest, PeakFlopsPicksThePrecision) {
  const GpuType* h100 = GpuCatalog::BuiltIn().Find("H100-SXM");
  ASSERT_NE(h100, nullptr);
  EXPECT_DOUBLE_EQ(h100->PeakFlops(Precision::kBf16), 989e12);
  EXPECT_DOUBLE_EQ(h100->PeakFlops(Precision::kFp16), 989e12);
  EXPECT_DOUBLE_EQ(h100->PeakFlops(Precision::kFp8), 1979e12);
  EXPECT_DOUBLE_EQ(h100->PeakFlops(Precision::kTf32), 495e12);
  EXPECT_DOUBLE_EQ(h100->PeakFlops(Precision::kFp32), 67e12);
}

TEST(GpuCatalogTest, FindIgnoresCase) {
  const GpuCatalog catalog = GpuCatalog::BuiltIn();
  const GpuType* gpu = catalog.Find("h100-sxm");
  ASSERT_NE(gpu, nullptr);
  EXPECT_EQ(gpu->name, "H100-SXM");
  EXPECT_EQ(catalog.Find("H1000"), nullptr);
  EXPECT_EQ(catalog.Find(""), nullptr);
}

TEST(GpuCatalogTest, UpsertReplacesOrAdds) {
  GpuCatalog catalog = GpuCatalog::BuiltIn();
  const std::size_t size = catalog.gpus().size();
  GpuType custom;
  custom.name = "MI300X";
  custom.bf16_tflops = 1307;
  catalog.Upsert(custom);
  EXPECT_EQ(catalog.gpus().size(), size + 1);
  ASSERT_NE(catalog.Find("mi300x"), nullptr);

  GpuType cheaper = *catalog.Find("H100-SXM");
  cheaper.price_per_gpu_hour = 2.5;
  catalog.Upsert(cheaper);
  EXPECT_EQ(catalog.gpus().size(), size + 1);
  EXPECT_EQ(catalog.Find("H100-SXM")->price_per_gpu_hour, 2.5);
}

}  // namespace
}  // namespace pacer::planner
