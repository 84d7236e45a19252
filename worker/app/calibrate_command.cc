#include "app/calibrate_command.h"

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>
#include <vector>

#include "app/backend_choice.h"
#include "core/exit_codes.h"
#include "core/runner.h"
#include "core/tcp_store.h"
#include "cpu/calibrate_cpu.h"
#include "cpu/gloo_comms.h"
#include "pacer/planner/gpu_catalog.h"

namespace pacer::worker {
namespace {

using nlohmann::json;

std::string Format(const char* fmt, double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), fmt, value);
  return buffer;
}

int Fail(const Status& s, std::ostream& err) {
  err << "pacer-worker calibrate: " << s.ToString() << "\n";
  return ExitCodeFor(s);
}

int WriteCalibration(const CalibrateFlags& flags, const std::string& key, const json& entry,
                     std::ostream& out, std::ostream& err) {
  json document = {{"apiVersion", "pacer.dev/v1alpha1"},
                   {"kind", "Calibration"},
                   {"gpuTypes", {{key, entry}}}};
  if (planner::GpuCatalog::BuiltIn().Find(key) == nullptr) {
    // `pacer plan --calibration` refuses a type its catalog does not know
    // (a misspelt one would be ignored without a word).
    out << "\n  note: \"" << key
        << "\" is not a GPU type of the planner's catalog; pass --gpu-type with the catalog "
           "name (e.g. H100-SXM) for a file pacer plan --calibration takes, or add the type "
           "under gpuTypes in the cluster file\n";
  }
  if (flags.output_path.empty()) {
    out << "\n" << document.dump(2) << "\n";
    return kExitSuccess;
  }
  std::ofstream file(flags.output_path, std::ios::trunc);
  file << document.dump(2) << "\n";
  file.close();
  if (!file) {
    // Checked before measuring (CheckOutputPath): what fails here is the
    // write itself (a full disk), not the argument.
    err << "pacer-worker calibrate: cannot write " << flags.output_path << ": "
        << std::strerror(errno) << "\n";
    return kExitInternalError;
  }
  out << "\nwrote " << flags.output_path << "\n";
  return kExitSuccess;
}

// CPU: sgemm and memcpy in this process; the Gloo all-reduce among
// `cpu_ranks` threads that rendezvous through a private store.
int CalibrateOnCpu(const CalibrateFlags& flags, std::ostream& out, std::ostream& err) {
  cpu::CpuCalibrationOptions options;
  if (flags.quick) {
    options.gemm_sizes = {128, 256};
    options.all_reduce_bytes = {4 << 10, 256 << 10};
    options.memcpy_bytes = 8 << 20;
    options.iterations = 2;
  }
  const int n = std::max(1, flags.cpu_ranks);
  auto server = TcpStoreServer::Start("127.0.0.1", 0);
  if (!server.ok()) return Fail(server.status(), err);
  WorkerConfig config;
  config.world_size = n;
  config.local_world_size = n;
  config.data_parallel = n;
  config.gradient_accumulation_steps = 1;
  config.global_batch_size = n;
  const auto timeout = std::chrono::milliseconds(60'000);
  std::vector<std::optional<StatusOr<cpu::CpuCalibrationReport>>> reports(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int rank = 0; rank < n; ++rank) {
    threads.emplace_back([&, rank] {
      auto& slot = reports[static_cast<size_t>(rank)];
      auto client = TcpStoreClient::Connect("127.0.0.1", (*server)->port(), rank, timeout);
      if (!client.ok()) {
        slot = client.status();
        return;
      }
      auto comms = cpu::GlooComms::Connect(config, rank, client->get(), timeout);
      if (!comms.ok()) {
        slot = comms.status();
        return;
      }
      slot = cpu::CalibrateCpu(options, n > 1 ? comms->get() : nullptr);
    });
  }
  for (std::thread& t : threads) t.join();
  for (const auto& r : reports) {
    if (!r || !r->ok()) return Fail(r ? r->status() : InternalError("no report"), err);
  }
  const cpu::CpuCalibrationReport& report = **reports[0];
  out << "CPU calibration (OpenBLAS sgemm, memcpy, Gloo all-reduce over " << report.ranks
      << " ranks)\n\n  GEMM n      GFLOP/s\n";
  for (const cpu::GemmPoint& g : report.gemm) {
    out << "  " << Format("%-8.0f", static_cast<double>(g.size)) << Format("%10.1f", g.gflops) << "\n";
  }
  out << "\n  memcpy      " << Format("%.2f GB/s", report.memcpy_gbps) << "\n";
  if (!report.all_reduce.empty()) {
    out << "\n  all-reduce bytes      time         algbw GB/s   busbw GB/s\n";
    for (const cpu::AllReducePoint& a : report.all_reduce) {
      out << "  " << Format("%-14.0f", static_cast<double>(a.bytes))
          << Format("%10.6f s", a.seconds) << Format("%13.3f", a.algbw_gbps)
          << Format("%13.3f", a.busbw_gbps) << "\n";
    }
  }
  // CPUs have no catalog peak, so no gemmEfficiency: only what the planner
  // can use without one.
  json entry = {{"memoryBandwidthGBps", report.memcpy_gbps}};
  if (!report.all_reduce.empty() && report.all_reduce.back().busbw_gbps > 0) {
    entry["intraNodeBusBandwidthGBps"] = report.all_reduce.back().busbw_gbps;
  }
  return WriteCalibration(flags, flags.gpu_type.empty() ? "cpu" : flags.gpu_type, entry, out, err);
}

int CalibrateOnGpu(const CalibrateFlags& flags, std::ostream& out, std::ostream& err) {
  GpuCalibrationOptions options;
  if (flags.quick) {
    options.gemm_sizes = {1024, 4096};
    options.all_reduce_max_bytes = int64_t{64} << 20;
  }
  StatusOr<const GpuPlugin*> plugin = LoadGpuPlugin();
  if (!plugin.ok()) return Fail(plugin.status(), err);
  auto report = (*plugin)->calibrate(options);
  if (!report.ok()) return Fail(report.status(), err);
  out << "GPU calibration: " << report->device_name << " x " << report->device_count << "\n\n"
      << "  dtype  GEMM n   TFLOP/s\n";
  for (const GemmMeasurement& g : report->gemms) {
    out << "  " << g.dtype << std::string(g.dtype.size() < 7 ? 7 - g.dtype.size() : 1, ' ')
        << Format("%-8.0f", static_cast<double>(g.size)) << Format("%9.1f", g.tflops) << "\n";
  }
  out << "\n  device-to-device copy " << Format("%.0f GB/s", report->memory_bandwidth_gbps) << "\n";
  if (!report->all_reduce.empty()) {
    out << "\n  all-reduce bytes      time         algbw GB/s   busbw GB/s   ("
        << report->all_reduce_ranks << " GPUs)\n";
    for (const AllReduceMeasurement& a : report->all_reduce) {
      out << "  " << Format("%-14.0f", static_cast<double>(a.bytes))
          << Format("%10.6f s", a.seconds) << Format("%13.1f", a.algbw_gbps)
          << Format("%13.1f", a.busbw_gbps) << "\n";
    }
  }
  for (const std::string& note : report->notes) out << "  note: " << note << "\n";
  json entry = {{"memoryBandwidthGBps", report->memory_bandwidth_gbps}};
  const planner::GpuType* gpu = planner::GpuCatalog::BuiltIn().Find(flags.gpu_type);
  if (gpu != nullptr && gpu->bf16_tflops > 0 && report->BestTflops("bf16") > 0) {
    entry["gemmEfficiency"] = std::min(1.0, report->BestTflops("bf16") / gpu->bf16_tflops);
  } else {
    out << "  (no --gpu-type from the catalog: gemmEfficiency not written)\n";
  }
  if (report->LargeMessageBusbwGbps() > 0) {
    entry["intraNodeBusBandwidthGBps"] = report->LargeMessageBusbwGbps();
  }
  return WriteCalibration(flags, flags.gpu_type.empty() ? report->device_name : flags.gpu_type,
                          entry, out, err);
}

}  // namespace

Status CheckCalibrationTarget(Backend requested, Backend resolved, const std::string& gpu_type) {
  if (resolved != Backend::kCpu || requested == Backend::kCpu) return Status::Ok();
  if (planner::GpuCatalog::BuiltIn().Find(gpu_type) == nullptr) return Status::Ok();
  // --backend auto fell back to the CPU: the file would carry the CPU's
  // memcpy and Gloo figures under the GPU's name, and `pacer plan
  // --calibration` would plan that GPU's jobs with them, without a word.
  return InvalidArgumentError(
      "--gpu-type " + gpu_type +
      ": no GPU is visible here (no NVIDIA driver, or pacer-worker was built without the GPU "
      "backend), so calibrate would measure the CPU and record its figures as " +
      gpu_type +
      "'s; run it with --backend gpu on a machine with that GPU, or leave out --gpu-type to "
      "record the CPU's figures as \"cpu\"");
}

namespace {

// -o names a file this process can create or replace: checked before the
// measurements, which take a while, so that a directory or a missing
// folder is an argument error at once, not a failure after them.
Status CheckOutputPath(const std::string& path) {
  if (path.empty()) return Status::Ok();
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    return InvalidArgumentError("-o " + path + ": is a directory; give a file name");
  }
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  const std::string folder = parent.empty() ? "." : parent.string();
  if (!std::filesystem::is_directory(folder, ec)) {
    return InvalidArgumentError("-o " + path + ": the folder " + folder + " does not exist");
  }
  const bool exists = std::filesystem::exists(path, ec);
  if (access(exists ? path.c_str() : folder.c_str(), W_OK) != 0) {
    return InvalidArgumentError("-o " + path + ": cannot write " + (exists ? path : folder) + ": " +
                                std::strerror(errno));
  }
  return Status::Ok();
}

}  // namespace

int RunCalibrate(const CalibrateFlags& flags, std::ostream& out, std::ostream& err) {
  if (Status s = CheckOutputPath(flags.output_path); !s.ok()) return Fail(s, err);
  auto backend = ResolveBackend(flags.backend, "--backend");
  if (!backend.ok()) return Fail(backend.status(), err);
  if (Status s = CheckCalibrationTarget(flags.backend, *backend, flags.gpu_type); !s.ok()) {
    return Fail(s, err);
  }
  if (*backend == Backend::kGpu) return CalibrateOnGpu(flags, out, err);
  if (planner::GpuCatalog::BuiltIn().Find(flags.gpu_type) != nullptr) {
    // --backend cpu asked for this in so many words (tests of the file
    // format do); still say what the file will claim.
    err << "pacer-worker calibrate: warning: --backend cpu with --gpu-type " << flags.gpu_type
        << ": the CPU's figures are recorded as " << flags.gpu_type
        << "'s, and pacer plan --calibration will use them for that GPU\n";
  }
  return CalibrateOnCpu(flags, out, err);
}

}  // namespace pacer::worker
