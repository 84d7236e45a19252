// Readers of the elastic-scheduling traces and throughput tables
// (pacer/sched/trace_csv.h): both trace spellings, and errors that name the
// line and column.
#include "pacer/sched/trace_csv.h"

#include <gtest/gtest.h>

#include <string>

namespace pacer::sched {
namespace {

constexpr const char* kThroughput =
    "gpu_type,model,global_batch_size,num_gpus,iters_per_sec,source\n"
    "A100,bert,64,1,6,x\n"
    "A100,bert,64,2,8.5,x\n"
    "A100,bert,64,4,,x\n"
    "T4,ncf,32768,1,3,x\n";

TEST(TraceCsvTest, ReadsTheItpColumns) {
  StatusOr<std::vector<TraceJob>> jobs = ParseTraceCsv(
      "job_id,submission_time,num_iteration,model_name,deadline,batch_size,num_gpu,duration\n"
      "a,100,500,bert,900,64,2,80\n"
      "b,120,50,bert,,64,1,10\r\n",
      "itp.csv");
  ASSERT_TRUE(jobs.ok()) << jobs.status().message();
  ASSERT_EQ(jobs->size(), 2u);
  EXPECT_EQ((*jobs)[0].id, "a");
  EXPECT_DOUBLE_EQ((*jobs)[0].arrival_seconds, 100);
  EXPECT_DOUBLE_EQ((*jobs)[0].iterations, 500);
  EXPECT_EQ((*jobs)[0].deadline_seconds, 900.0);
  EXPECT_EQ((*jobs)[0].requested_gpus, 2);
  EXPECT_FALSE((*jobs)[1].deadline_seconds.has_value());  // empty: best effort
  EXPECT_EQ((*jobs)[1].line, 3);
}

TEST(TraceCsvTest, ReadsThePolluxColumns) {
  StatusOr<std::vector<TraceJob>> jobs = ParseTraceCsv(
      "job_id,submit_time,iteration,model_name,ddl,batch_size,num_gpu,duration\n"
      "0,3715485,2011,cifar10,3719996,4096,1,5644\n",
      "pollux.csv");
  ASSERT_TRUE(jobs.ok()) << jobs.status().message();
  EXPECT_EQ((*jobs)[0].model, "cifar10");
  EXPECT_EQ((*jobs)[0].batch_size, 4096);
  EXPECT_EQ((*jobs)[0].deadline_seconds, 3719996.0);
}

// As a spreadsheet saves it: a byte order mark before the header, and a
// field with a comma (or a quote) in double quotes.
TEST(TraceCsvTest, ReadsASpreadsheetsByteOrderMarkAndQuotedFields) {
  StatusOr<std::vector<TraceJob>> jobs = ParseTraceCsv(
      "\xEF\xBB\xBFjob_id,submit_time,iteration,model_name,ddl,batch_size\n"
      "\"team-a, run 1\",10,500,\"bert\" ,900,64\n"
      "\"say \"\"hi\"\"\",20,50,bert,,\"64\"\n"
      "plain,30,50,bert,\"\",64\n",
      "sheet.csv");
  ASSERT_TRUE(jobs.ok()) << jobs.status().message();
  ASSERT_EQ(jobs->size(), 3u);
  EXPECT_EQ((*jobs)[0].id, "team-a, run 1");
  EXPECT_EQ((*jobs)[0].model, "bert");
  EXPECT_EQ((*jobs)[0].deadline_seconds, 900.0);
  EXPECT_EQ((*jobs)[1].id, "say \"hi\"");
  EXPECT_EQ((*jobs)[1].batch_size, 64);
  EXPECT_FALSE((*jobs)[2].deadline_seconds.has_value());  // "" is empty: best effort

  const StatusOr<std::vector<TraceJob>> open = ParseTraceCsv(
      "job_id,submit_time,iteration,model_name,ddl,batch_size\n\"a,10,500,bert,900,64\n", "t.csv");
  ASSERT_FALSE(open.ok());
  EXPECT_EQ(open.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(open.status().message().find("t.csv:2: column 1: a quoted field is not closed"),
            std::string::npos)
      << open.status().message();
  const StatusOr<std::vector<TraceJob>> after = ParseTraceCsv(
      "job_id,submit_time,iteration,model_name,ddl,batch_size\n\"a\"x,10,500,bert,900,64\n",
      "t.csv");
  ASSERT_FALSE(after.ok());
  EXPECT_NE(after.status().message().find("t.csv:2: column 4: text after a quoted field"),
            std::string::npos)
      << after.status().message();
}

TEST(TraceCsvTest, ErrorsNameTheLineAndColumn) {
  const std::string header = "job_id,submit_time,iteration,model_name,ddl,batch_size\n";
  StatusOr<std::vector<TraceJob>> bad_number =
      ParseTraceCsv(header + "a,1,10,bert,5,64\nb,2,10,bert,soon,64\n", "t.csv");
  ASSERT_FALSE(bad_number.ok());
  EXPECT_EQ(bad_number.status().message(),
            "t.csv:3: column 'ddl': 'soon' is not a non-negative number");

  // Finite but absurd: the scheduler's quoted seconds were an undefined
  // conversion (1e300 iterations printed -9223372036854775808 s).
  StatusOr<std::vector<TraceJob>> absurd =
      ParseTraceCsv(header + "a,0,1e300,resnet50,1000,256\n", "t.csv");
  ASSERT_FALSE(absurd.ok());
  EXPECT_EQ(absurd.status().message(), "t.csv:2: column 'iteration': '1e300' is not at most 1e12");
  EXPECT_FALSE(ParseTraceCsv(header + "a,2e12,10,bert,5,64\n", "t.csv").ok());
  EXPECT_TRUE(ParseTraceCsv(header + "a,1e12,1e12,bert,,64\n", "t.csv").ok());
  const std::string rates = "gpu_type,model,global_batch_size,num_gpus,iters_per_sec\n";
  StatusOr<ThroughputTable> slow = ParseThroughputCsv(rates + "A100,bert,64,1,1e-300\n", "r.csv");
  ASSERT_FALSE(slow.ok());
  EXPECT_EQ(slow.status().message(),
            "r.csv:2: column 'iters_per_sec': '1e-300' is not 0 or at least 1e-6");
  EXPECT_TRUE(ParseThroughputCsv(rates + "A100,bert,64,1,0\nA100,bert,64,2,1e-6\n", "r.csv").ok());

  StatusOr<std::vector<TraceJob>> short_row = ParseTraceCsv(header + "a,1,10,bert\n", "t.csv");
  ASSERT_FALSE(short_row.ok());
  EXPECT_NE(short_row.status().message().find("t.csv:2: 4 fields, the header has 6"),
            std::string::npos);

  StatusOr<std::vector<TraceJob>> missing =
      ParseTraceCsv("job_id,submit_time,iteration,model_name,batch_size\na,1,2,bert,64\n", "t.csv");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().message(), "t.csv:1: missing column 'deadline' or 'ddl'");

  StatusOr<std::vector<TraceJob>> zero_batch = ParseTraceCsv(header + "a,1,10,bert,5,0\n", "t.csv");
  ASSERT_FALSE(zero_batch.ok());
  EXPECT_NE(zero_batch.status().message().find("column 'batch_size'"), std::string::npos);

  StatusOr<std::vector<TraceJob>> twice =
      ParseTraceCsv(header + "a,1,10,bert,5,64\na,2,10,bert,5,64\n", "t.csv");
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.status().message().find("t.csv:3: job_id 'a' appears twice"), std::string::npos);

  EXPECT_FALSE(ParseTraceCsv(header, "t.csv").ok());  // no jobs

  // A deadline at or before the submission (a relative deadline) made the
  // job a miss for every policy, silently.
  StatusOr<std::vector<TraceJob>> relative =
      ParseTraceCsv(header + "a,1,10,bert,5,64\nb,100,10,bert,50,64\n", "t.csv");
  ASSERT_FALSE(relative.ok());
  EXPECT_NE(relative.status().message().find("t.csv:3: ddl 50 is not after submit_time 100"),
            std::string::npos)
      << relative.status().message();
  EXPECT_FALSE(ParseTraceCsv(header + "a,100,10,bert,100,64\n", "t.csv").ok());
}

TEST(TraceCsvTest, BuildsCurvesAndNamesAMissingModel) {
  StatusOr<ThroughputTable> table = ParseThroughputCsv(kThroughput, "tp.csv");
  ASSERT_TRUE(table.ok()) << table.status().message();
  StatusOr<std::vector<TraceJob>> trace = ParseTraceCsv(
      "job_id,submit_time,iteration,model_name,ddl,batch_size\n"
      "a,0,100,bert,50,64\n",
      "t.csv");
  ASSERT_TRUE(trace.ok());
  EXPECT_EQ(*ChooseGpuType(*trace, *table), "A100");
  StatusOr<std::vector<SimJob>> jobs =
      BuildSimJobs(*trace, *table, "A100", 8, Policy::kPacer, "t.csv");
  ASSERT_TRUE(jobs.ok()) << jobs.status().message();
  EXPECT_EQ((*jobs)[0].curve.max_gpus(), 2);  // 4 GPUs were not profiled

  StatusOr<std::vector<SimJob>> wrong_type =
      BuildSimJobs(*trace, *table, "T4", 8, Policy::kPacer, "t.csv");
  ASSERT_FALSE(wrong_type.ok());
  EXPECT_EQ(wrong_type.status().code(), StatusCode::kNotFound);
  EXPECT_NE(wrong_type.status().message().find("t.csv:2: job a: the throughput table has no curve "
                                               "for bert (batch 64) on T4"),
            std::string::npos)
      << wrong_type.status().message();
}

TEST(TraceCsvTest, CapsLimitEachPolicy) {
  StatusOr<ThroughputTable> table = ParseThroughputCsv(kThroughput, "tp.csv");
  ASSERT_TRUE(table.ok());
  ASSERT_TRUE(ParseMaxGpusCsv("gpu_type,model,global_batch_size,ef_max_gpus,baseline_max_gpus\n"
                              "A100,bert,64,1,2\n",
                              "caps.csv", *table)
                  .ok());
  StatusOr<std::vector<TraceJob>> trace = ParseTraceCsv(
      "job_id,submit_time,iteration,model_name,ddl,batch_size\na,0,100,bert,50,64\n", "t.csv");
  ASSERT_TRUE(trace.ok());
  EXPECT_EQ((*BuildSimJobs(*trace, *table, "A100", 8, Policy::kPacer, "t"))[0].curve.max_gpus(), 1);
  EXPECT_EQ((*BuildSimJobs(*trace, *table, "A100", 8, Policy::kEdf, "t"))[0].curve.max_gpus(), 2);
  EXPECT_FALSE(ParseMaxGpusCsv("gpu_type,model\nA100,bert\n", "caps.csv", *table).ok());
  // A key twice: the second row silently replaced the first.
  const Status twice = ParseMaxGpusCsv(
      "gpu_type,model,global_batch_size,ef_max_gpus,baseline_max_gpus\n"
      "A100,bert,64,1,2\nA100,bert,64,4,4\n",
      "caps.csv", *table);
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.message().find("caps.csv:3:"), std::string::npos) << twice.message();
  EXPECT_NE(twice.message().find("appears twice"), std::string::npos) << twice.message();
}

TEST(TraceCsvTest, ThroughputErrorsNameTheLine) {
  StatusOr<ThroughputTable> twice = ParseThroughputCsv(
      "gpu_type,model,global_batch_size,num_gpus,iters_per_sec\nA100,m,8,1,2\nA100,m,8,1,3\n",
      "tp.csv");
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.status().message().find("tp.csv:3:"), std::string::npos);
  StatusOr<ThroughputTable> bad = ParseThroughputCsv(
      "gpu_type,model,global_batch_size,num_gpus,iters_per_sec\nA100,m,8,two,2\n", "tp.csv");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "tp.csv:2: column 'num_gpus': 'two' is not a positive integer");
}

}  // namespace
}  // namespace pacer::sched
