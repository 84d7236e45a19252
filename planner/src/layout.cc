#include "pacer/planner/layout.h"

#include <sstream>

namespace pacer::planner {

std::string Layout::ToString() const {
  std::ostringstream out;
  out << gpu_type << " " << nodes << "x" << gpus_per_node << " t" << tensor_parallel << " p"
      << pipeline_parallel;
  if (virtual_stages > 1) out << "v" << virtual_stages;
  out << " d" << data_parallel << " z" << zero_stage << " b" << micro_batch_size << " k"
      << gradient_accumulation_steps << " " << RecomputeName(recompute);
  if (sequence_parallel) out << " sp";
  return out.str();
}

}  // namespace pacer::planner
