// The throughput table and GPU caps `pacer simulate` uses when the user gives
// none: ElasticFlow's A100 and T4 curves (data/elasticflow/, see SOURCE.md
// there for provenance and licenses), compiled into the binary so that the
// command needs no data files at run time.
// Thread-safety: constants.
#ifndef PACER_CLI_DEFAULT_TABLES_H_
#define PACER_CLI_DEFAULT_TABLES_H_

#include <string_view>

namespace pacer::cli {

// data/elasticflow/throughput.csv, verbatim.
std::string_view DefaultThroughputCsv();
// data/elasticflow/max_gpus.csv, verbatim.
std::string_view DefaultMaxGpusCsv();

}  // namespace pacer::cli

#endif  // PACER_CLI_DEFAULT_TABLES_H_
