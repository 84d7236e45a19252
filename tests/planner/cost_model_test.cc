// The cost model against the worked examples of docs/planner.md (the seed
// articles, the ZeRO paper, Korthikanti 2022, Megatron and PaLM formulas).
#include "pacer/planner/cost_model.h"

#include <gtest/gtest.h>

#include <cmath>

#include "pacer/planner/layer_shapes.h"
#include "pacer/planner/model_math.h"

namespace pacer::planner {
namespace {

ModelSpec Gpt(int layers, int hidden, int heads, int seq, int vocab) {
  ModelSpec m;
  m.layers = layers;
  m.hidden_size = hidden;
  m.attention_heads = heads;
  m.kv_heads = heads;
  m.ffn_hidden_size = 4 * hidden;
  m.ffn_kind = FfnKind::kGelu;
  m.vocab_size = vocab;
  m.sequence_length = seq;
  m.tied_embeddings = true;
  return m;
}

ModelSpec Llama2_7B() {
  ModelSpec m = Gpt(32, 4096, 32, 4096, 32000);
  m.ffn_hidden_size = 11008;
  m.ffn_kind = FfnKind::kSwiglu;
  m.tied_embeddings = false;
  return m;
}

// Llama 2 7B on a million samples, global batch 64.
JobSpec Llama2_7BJob() {
  JobSpec job;
  job.model = Llama2_7B();
  job.data.samples = 1e6;
  job.training.global_batch_size = 64;
  return job;
}

// One node of 8 GPUs, all data-parallel, micro-batch 1 x 8 accumulation.
Layout EightGpusDataParallel(int zero_stage) {
  Layout l;
  l.tensor_parallel = 1;
  l.gpus_per_node = 8;
  l.data_parallel = 8;
  l.nodes = 1;
  l.micro_batch_size = 1;
  l.gradient_accumulation_steps = 8;
  l.zero_stage = zero_stage;
  return l;
}

ModelSpec Llama3_70B() {
  ModelSpec m = Gpt(80, 8192, 64, 4096, 128256);
  m.kv_heads = 8;
  m.ffn_hidden_size = 28672;
  m.ffn_kind = FfnKind::kSwiglu;
  m.tied_embeddings = false;
  return m;
}

TEST(ModelMathTest, ParameterCountsMatchPublishedModels) {
  // Llama 2 7B and Llama 3 70B as published (with norms, untied embeddings).
  EXPECT_DOUBLE_EQ(TotalParameters(Llama2_7B()), 6'738'415'616.0);
  EXPECT_DOUBLE_EQ(TotalParameters(Llama3_70B()), 70'553'706'496.0);
}

TEST(ModelMathTest, MegatronFlopsFormulas) {
  // Narayanan et al. SC'21: 72 B s L h^2 (1 + s/6h + V/12Lh) model FLOPs and
  // 96 B s L h^2 (1 + s/6h + V/16Lh) with full recomputation, for GPT shapes.
  const ModelSpec m = Gpt(96, 12288, 96, 2048, 51200);
  const double s = 2048, L = 96, h = 12288, V = 51200;
  const double model = 72 * s * L * h * h * (1 + s / (6 * h) + V / (12 * L * h));
  const double hardware = 96 * s * L * h * h * (1 + s / (6 * h) + V / (16 * L * h));
  EXPECT_NEAR(ModelFlopsPerSequence(m) / model, 1.0, 1e-12);
  constexpr AttentionKernel kUnfused = AttentionKernel::kUnfused;
  constexpr AttentionKernel kFused = AttentionKernel::kFused;
  EXPECT_NEAR(HardwareFlopsPerSequence(m, Recompute::kFull, kUnfused) / hardware, 1.0, 1e-12);
  EXPECT_GT(HardwareFlopsPerSequence(m, Recompute::kSelective, kUnfused), ModelFlopsPerSequence(m));
  EXPECT_LT(HardwareFlopsPerSequence(m, Recompute::kSelective, kUnfused),
            HardwareFlopsPerSequence(m, Recompute::kFull, kUnfused));
  // A fused kernel's backward recomputes Q K^T (2 s^2 h per layer, the
  // 4 B s^2 L h of the backward's scores); selective recomputes nothing more.
  const double scores = 2 * s * s * h * L;
  for (Recompute r : {Recompute::kNone, Recompute::kFull}) {
    EXPECT_NEAR(HardwareFlopsPerSequence(m, r, kFused) - HardwareFlopsPerSequence(m, r, kUnfused),
                scores, 1e-6 * scores);
  }
  EXPECT_NEAR(HardwareFlopsPerSequence(m, Recompute::kSelective, kFused),
              ModelFlopsPerSequence(m) + scores, 1e-6 * scores);
}

TEST(ModelMathTest, SixNDWithPaLMAttentionTerm) {
  // PaLM appendix B: per token 6N + 12 L h s, N the matmul parameters.
  const ModelSpec m = Llama2_7B();
  const double n_matmul = TotalParameters(m) - m.vocab_size * 4096.0 /*input table: a lookup*/ -
                          (2.0 * 4096 * 32 + 4096) /*norms*/;
  const double per_token = 6 * n_matmul + 12.0 * 32 * 4096 * 4096;
  EXPECT_NEAR(ModelFlopsPerSequence(m) / m.sequence_length / per_token, 1.0, 1e-9);
  // And the familiar C ~= 6 N D is within the attention share (~12%) of it.
  const double six_n = 6 * TotalParameters(m);
  EXPECT_GT(ModelFlopsPerSequence(m) / m.sequence_length, six_n);
  EXPECT_LT(ModelFlopsPerSequence(m) / m.sequence_length, six_n * 1.2);
}

TEST(ModelMathTest, LayerGemmsAddUpToTheClosedFormFlops) {
  // The shapes the cost model times and the worker executes, summed over the
  // t tensor-parallel ranks, are exactly the closed-form FLOPs.
  for (const ModelSpec& m : {Llama2_7B(), Llama3_70B(), Gpt(24, 2048, 16, 2048, 51200)}) {
    for (int t : {1, 2, 8}) {
      for (int b : {1, 4}) {
        double layer = 0, core = 0;
        for (const GemmShape& g : LayerForwardGemms(m, b, t)) layer += g.flops();
        for (const GemmShape& g : AttentionCoreGemms(m, b, t)) core += g.flops();
        EXPECT_NEAR(layer * t / (b * LayerForwardFlopsPerSequence(m)), 1.0, 1e-12);
        EXPECT_NEAR(core * t / (b * AttentionCoreForwardFlopsPerSequence(m)), 1.0, 1e-12);
        EXPECT_NEAR(LogitsGemm(m, b, t).flops() * t / (b * LogitsForwardFlopsPerSequence(m)), 1.0,
                    1e-12);
      }
    }
  }
}

TEST(ModelMathTest, TensorParallelismMustSplitHeadsFfnAndSequence) {
  ModelSpec m = Llama2_7B();  // 32 heads, FFN 11008, sequence 4096
  for (int t : {1, 2, 4, 8}) EXPECT_EQ(TensorParallelSplitError(m, t), "") << t;
  m.ffn_hidden_size = 11004;  // 4 x 2751
  EXPECT_EQ(TensorParallelSplitError(m, 4), "");
  EXPECT_EQ(TensorParallelSplitError(m, 8), "must divide the FFN hidden size (11004)");
  m = Llama2_7B();
  m.sequence_length = 4100;
  EXPECT_EQ(TensorParallelSplitError(m, 8), "must divide the sequence length (4100)");
  m = Llama3_70B();
  EXPECT_EQ(TensorParallelSplitError(m, 16), "must divide the KV heads (8)");
}

TEST(ModelMathTest, InferredArchitectureHitsTheParameterCount) {
  for (double n : {1e6, 10e6, 125e6, 350e6, 1.3e9, 6.7e9, 13e9, 34e9, 70e9, 175e9, 405e9}) {
    const ModelSpec m = InferArchitecture(n, 2048);
    EXPECT_TRUE(m.architecture_inferred);
    EXPECT_EQ(m.hidden_size % m.attention_heads, 0) << n;
    // Tensor parallelism up to 8 must stay possible: heads and KV heads
    // divide by 8.
    EXPECT_EQ(m.attention_heads % 8, 0) << n;
    EXPECT_EQ(m.kv_heads % 8, 0) << n;
    EXPECT_EQ(m.attention_heads % m.kv_heads, 0) << n;
    EXPECT_GE(m.layers, 2) << n;
    EXPECT_NEAR(TotalParameters(m) / n, 1.0, 0.2) << n;
  }
  // The published shapes come back at their sizes.
  const ModelSpec llama7 = InferArchitecture(6.74e9, 4096);
  EXPECT_EQ(llama7.hidden_size, 4096);  // Llama 2 7B: 32 layers of 4096, 32 heads
  EXPECT_EQ(llama7.layers, 32);
  EXPECT_EQ(llama7.attention_heads, 32);
  EXPECT_EQ(llama7.ffn_hidden_size, 11008);
  const ModelSpec llama70 = InferArchitecture(69e9, 4096);
  EXPECT_EQ(llama70.hidden_size, 8192);  // Llama 2 70B: 80 layers, 64 heads, 8 KV heads
  EXPECT_EQ(llama70.layers, 80);
  EXPECT_EQ(llama70.attention_heads, 64);
  EXPECT_EQ(llama70.kv_heads, 8);
  EXPECT_EQ(llama70.ffn_hidden_size, 28672);
}

TEST(MemoryModelTest, SeedArticleSixBillionFp32Adam) {
  // 6B in fp32 with AdamW: 24 GB weights + 24 GB grads + 48 GB Adam + ~1.3 GB
  // CUDA context ~= 97 GB.
  const ShardedStateBytes s =
      ShardedState(6e9, StateBytes(Precision::kFp32, Optimizer::kAdamW, true),
                   /*zero_stage=*/0, /*data_parallel=*/1);
  EXPECT_DOUBLE_EQ(s.weights_bytes, 24e9);
  EXPECT_DOUBLE_EQ(s.gradients_bytes, 24e9);
  EXPECT_DOUBLE_EQ(s.optimizer_bytes, 48e9);
  // Decimal GB throughout (the article's 24 GB is 24e9 bytes, not 24 GiB);
  // the GiB side, the device's MiB, is in gpu_catalog_test.
  EXPECT_NEAR((s.total_bytes() + ModelConstants{}.cuda_context_bytes) / 1e9, 97.3, 0.05);
}

TEST(MemoryModelTest, ZeroPaperTable) {
  // Rajbhandari et al. 2020: 7.5B parameters, K = 12, d = 64, 16-bit
  // gradients.
  const StateBytesPerParameter mixed =
      StateBytes(Precision::kBf16, Optimizer::kAdamW, /*fp32_gradients=*/false);
  EXPECT_EQ(mixed.weights + mixed.gradients + mixed.optimizer, 16);
  const double expected_gb[] = {120, 31.4, 16.6, 1.9};
  for (int stage = 0; stage <= 3; ++stage) {
    EXPECT_NEAR(ShardedState(7.5e9, mixed, stage, 64).total_bytes() / 1e9, expected_gb[stage], 0.05)
        << "stage " << stage;
  }
}

// Megatron's fp32 main gradients (its default for bf16, and Pacer's
// worker): 18 bytes per parameter unsharded (Megatron-LM's distributed
// optimizer notes: 18 without it, 6 + 12/d with it, i.e. ZeRO 1). fp32
// gradients change nothing for an fp32 plan.
TEST(MemoryModelTest, Fp32GradientsAreMegatronsEighteenBytes) {
  const StateBytesPerParameter main = StateBytes(Precision::kBf16, Optimizer::kAdamW, true);
  EXPECT_EQ(main.weights, 2);
  EXPECT_EQ(main.gradients, 4);
  EXPECT_EQ(main.optimizer, 12);
  EXPECT_DOUBLE_EQ(ShardedState(1e9, main, 0, 8).total_bytes(), 18e9);
  EXPECT_DOUBLE_EQ(ShardedState(1e9, main, 1, 8).total_bytes(), (6 + 12.0 / 8) * 1e9);
  EXPECT_DOUBLE_EQ(ShardedState(1e9, main, 2, 8).total_bytes(), (2 + 16.0 / 8) * 1e9);
  const StateBytesPerParameter fp32 = StateBytes(Precision::kFp32, Optimizer::kAdamW, true);
  const StateBytesPerParameter fp32_too = StateBytes(Precision::kFp32, Optimizer::kAdamW, false);
  EXPECT_EQ(fp32.gradients, 4);
  EXPECT_EQ(fp32_too.gradients, 4);
}

TEST(MemoryModelTest, KorthikantiActivationFormulas) {
  // Korthikanti's formulas: GPT with dropout and an unfused attention kernel.
  ModelSpec m = Gpt(96, 12288, 96, 2048, 51200);
  m.dropout = true;
  const double s = 2048, b = 2, h = 12288, a = 96, t = 8;
  const double sbh = s * b * h;
  constexpr AttentionKernel kUnfused = AttentionKernel::kUnfused;
  EXPECT_DOUBLE_EQ(LayerActivationBytes(m, 2, 1, false, Recompute::kNone, kUnfused),
                   sbh * (34 + 5 * a * s / h));
  EXPECT_DOUBLE_EQ(LayerActivationBytes(m, 2, 8, false, Recompute::kNone, kUnfused),
                   sbh * (10 + 24 / t + 5 * a * s / (h * t)));
  EXPECT_DOUBLE_EQ(LayerActivationBytes(m, 2, 8, true, Recompute::kNone, kUnfused),
                   sbh / t * (34 + 5 * a * s / h));
  EXPECT_DOUBLE_EQ(LayerActivationBytes(m, 2, 8, true, Recompute::kSelective, kUnfused),
                   34 * sbh / t);
  EXPECT_DOUBLE_EQ(LayerActivationBytes(m, 2, 8, false, Recompute::kFull, kUnfused), 2 * sbh);
  EXPECT_DOUBLE_EQ(LayerActivationBytes(m, 2, 8, true, Recompute::kFull, kUnfused), 2 * sbh / t);
  // Without dropout the two 1-byte masks go, and the score term keeps only
  // the softmax output (2 a s^2 b).
  m.dropout = false;
  EXPECT_DOUBLE_EQ(LayerActivationBytes(m, 2, 1, false, Recompute::kNone, kUnfused),
                   sbh * (32 + 2 * a * s / h));
}

// A fused kernel never stores the score matrix, so it never needs more
// memory than an unfused one, for any recomputation and parallelism.
TEST(MemoryModelTest, FusedAttentionNeverNeedsMoreMemoryThanUnfused) {
  for (const ModelSpec& m : {Gpt(96, 12288, 96, 2048, 51200), Llama3_70B()}) {
    for (int t : {1, 2, 8}) {
      for (bool sp : {false, true}) {
        for (Recompute r : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
          for (int b : {1, 4}) {
            const double fused = LayerActivationBytes(m, b, t, sp, r, AttentionKernel::kFused);
            const double unfused = LayerActivationBytes(m, b, t, sp, r, AttentionKernel::kUnfused);
            EXPECT_LE(fused, unfused) << "t " << t << " sp " << sp << " b " << b;
            if (r == Recompute::kNone) {
              EXPECT_LT(fused, unfused);
            }
          }
        }
      }
    }
  }
  // And the whole plan: same layout, fused needs no more memory.
  JobSpec job;
  job.model = Llama3_70B();
  job.data.samples = 1e6;
  job.training.global_batch_size = 64;
  Layout l;
  l.tensor_parallel = 8;
  l.sequence_parallel = true;
  l.gpus_per_node = 8;
  l.data_parallel = 8;
  l.nodes = 8;
  l.micro_batch_size = 1;
  l.gradient_accumulation_steps = 8;
  l.zero_stage = 1;
  const GpuType* h100 = GpuCatalog::BuiltIn().Find("H100-SXM");
  JobSpec unfused_job = job;
  unfused_job.training.stack.attention = AttentionKernel::kUnfused;
  EXPECT_LT(PredictMemory(job, l, *h100).total_bytes(),
            PredictMemory(unfused_job, l, *h100).total_bytes());
}

TEST(MemoryModelTest, TheJobsMemoryMarginIsHeldBackFromTheFit) {
  const JobSpec job = Llama2_7BJob();
  const Layout l = EightGpusDataParallel(/*zero_stage=*/1);
  const GpuType* h100 = GpuCatalog::BuiltIn().Find("H100-SXM");
  const MemoryBreakdown plain = PredictMemory(job, l, *h100);
  ASSERT_TRUE(plain.fits());
  JobSpec after_oom = job;
  after_oom.memory_margin_fraction = 0.5;
  const MemoryBreakdown held = PredictMemory(after_oom, l, *h100);
  // Half of the GPU's memory more is reserved, and this layout no longer fits.
  EXPECT_DOUBLE_EQ(held.reserve_bytes - plain.reserve_bytes, 0.5 * plain.capacity_bytes);
  EXPECT_FALSE(held.fits());
}

// FSDP's gather buffers: the unit in use and the one ahead hold full
// weights, the unit in backward its gradients and their 1/d shard. For
// Llama 2 7B the largest unit is a layer; for a small model with a large
// vocabulary it is the table, and a tied table on one stage stays gathered.
TEST(MemoryModelTest, ZeroThreeBuffersHoldTheLargestUnitAndTheLayerAhead) {
  JobSpec job = Llama2_7BJob();
  job.training.precision = Precision::kBf16;
  Layout l = EightGpusDataParallel(/*zero_stage=*/3);
  const GpuType* h100 = GpuCatalog::BuiltIn().Find("H100-SXM");
  const StateBytesPerParameter bytes =
      StateBytes(Precision::kBf16, Optimizer::kAdamW, job.training.stack.fp32_gradients);
  auto ExpectRelative = [](double actual, double expected) {
    EXPECT_NEAR(actual, expected, 1e-12 * expected);
  };
  const double layer = LayerParameters(job.model);
  const double table = 32000.0 * 4096;
  ASSERT_GT(layer, table);
  ExpectRelative(PredictMemory(job, l, *h100).buffers_bytes,
                 2 * layer * bytes.weights + layer * (1 + 1.0 / 8) * bytes.gradients);

  job.model.vocab_size = 256000;  // a table larger than a layer
  const double big = 256000.0 * 4096;
  ASSERT_GT(big, layer);
  ExpectRelative(PredictMemory(job, l, *h100).buffers_bytes,
                 (big + layer) * bytes.weights + big * (1 + 1.0 / 8) * bytes.gradients);
  job.model.tied_embeddings = true;
  ExpectRelative(PredictMemory(job, l, *h100).buffers_bytes,
                 (2 * big + layer) * bytes.weights + big * (2 + 1.0 / 8) * bytes.gradients);
  l.zero_stage = 2;
  EXPECT_EQ(PredictMemory(job, l, *h100).buffers_bytes, 0) << "only ZeRO 3 gathers weights";
}

TEST(MemoryModelTest, GroupedQueryAttentionStoresLessThanMultiHead) {
  ModelSpec mha = Llama3_70B();
  mha.kv_heads = mha.attention_heads;
  EXPECT_LT(LayerActivationBytes(Llama3_70B(), 1, 8, true, Recompute::kSelective,
                                 AttentionKernel::kFused),
            LayerActivationBytes(mha, 1, 8, true, Recompute::kSelective, AttentionKernel::kFused));
}

JobSpec SeedJob() {
  JobSpec job;
  job.model = Gpt(12, 768, 12, 1024, 50304);
  job.data.samples = 1000;
  job.training.global_batch_size = 10;
  return job;
}

NodePool OneNode(const std::string& type, int gpus) {
  NodePool pool;
  pool.name = "pool";
  pool.gpu_type = type;
  pool.nodes = 1;
  pool.gpus_per_node = gpus;
  pool.free_gpus = gpus;
  pool.network_gbps_per_node = 400;
  return pool;
}

// The job's stack decides the gradients' bytes: held (memory) and reduced
// (the data-parallel collectives' time).
TEST(MemoryModelTest, SixteenBitGradientsHalveTheirMemoryAndTraffic) {
  JobSpec job = Llama2_7BJob();
  job.training.precision = Precision::kBf16;
  const Layout l = EightGpusDataParallel(/*zero_stage=*/0);
  const GpuType* h100 = GpuCatalog::BuiltIn().Find("H100-SXM");
  ASSERT_TRUE(job.training.stack.fp32_gradients) << "the default: Megatron's main gradients";
  const Evaluation fp32 = Evaluate(job, l, OneNode("H100-SXM", 8), *h100, nullptr);
  job.training.stack.fp32_gradients = false;
  const Evaluation half = Evaluate(job, l, OneNode("H100-SXM", 8), *h100, nullptr);
  EXPECT_NEAR(half.memory.gradients_bytes / fp32.memory.gradients_bytes, 0.5, 1e-12);
  EXPECT_DOUBLE_EQ(half.memory.weights_bytes, fp32.memory.weights_bytes);
  EXPECT_NEAR(half.step.dp_comm_seconds / fp32.step.dp_comm_seconds, 0.5, 0.05);
}

// What ZeRO gathers is the 16-bit weights, not the gradients: with fp32 main
// gradients the all-gathers were timed at 4 bytes a parameter, so ZeRO-3's
// collectives took 2x the 16-bit-gradient ones instead of (2 + 2 + 4) /
// (2 + 2 + 2) = 4/3, and ZeRO-1 cost a whole fp32 all-reduce instead of
// (4 + 2) / (4 + 4) = 3/4 of it.
TEST(StepModelTest, ZeroGathersWeightsAtTheirOwnPrecision) {
  JobSpec job = Llama2_7BJob();
  job.training.precision = Precision::kBf16;
  const GpuType* h100 = GpuCatalog::BuiltIn().Find("H100-SXM");
  ASSERT_TRUE(job.training.stack.fp32_gradients);
  const Evaluation zero0 =
      Evaluate(job, EightGpusDataParallel(0), OneNode("H100-SXM", 8), *h100, nullptr);
  const Evaluation zero1 =
      Evaluate(job, EightGpusDataParallel(1), OneNode("H100-SXM", 8), *h100, nullptr);
  EXPECT_NEAR(zero1.step.dp_comm_seconds / zero0.step.dp_comm_seconds, 0.75, 0.02);
  const Evaluation fp32 =
      Evaluate(job, EightGpusDataParallel(3), OneNode("H100-SXM", 8), *h100, nullptr);
  job.training.stack.fp32_gradients = false;
  const Evaluation half =
      Evaluate(job, EightGpusDataParallel(3), OneNode("H100-SXM", 8), *h100, nullptr);
  EXPECT_NEAR(fp32.step.dp_comm_seconds / half.step.dp_comm_seconds, 4.0 / 3.0, 0.03);
  // With 16-bit gradients nothing moves: ZeRO-1 is the all-reduce's volume.
  const Evaluation half0 =
      Evaluate(job, EightGpusDataParallel(0), OneNode("H100-SXM", 8), *h100, nullptr);
  const Evaluation half1 =
      Evaluate(job, EightGpusDataParallel(1), OneNode("H100-SXM", 8), *h100, nullptr);
  EXPECT_NEAR(half1.step.dp_comm_seconds, half0.step.dp_comm_seconds,
              1e-9 * half0.step.dp_comm_seconds);
}

// A causal mask lets a fused kernel skip half of the score tiles; full
// attention (spec.model.causalAttention: false) does all of them, so the
// fused attention's time doubles and nothing else moves. An unfused kernel
// computes the whole s x s matrix either way.
TEST(StepModelTest, FullAttentionDoublesOnlyTheFusedAttentionTime) {
  JobSpec job = Llama2_7BJob();
  const Layout l = EightGpusDataParallel(/*zero_stage=*/1);
  const GpuType* h100 = GpuCatalog::BuiltIn().Find("H100-SXM");
  for (const AttentionKernel kernel : {AttentionKernel::kFused, AttentionKernel::kUnfused}) {
    SCOPED_TRACE(kernel == AttentionKernel::kFused ? "fused" : "unfused");
    job.training.stack.attention = kernel;
    job.model.causal_attention = true;
    const Evaluation causal = Evaluate(job, l, OneNode("H100-SXM", 8), *h100, nullptr);
    job.model.causal_attention = false;
    const Evaluation full = Evaluate(job, l, OneNode("H100-SXM", 8), *h100, nullptr);
    ASSERT_GT(causal.step.attention_seconds, 0);
    const double ratio = kernel == AttentionKernel::kFused ? 2.0 : 1.0;
    EXPECT_NEAR(full.step.attention_seconds / causal.step.attention_seconds, ratio, 1e-12);
    EXPECT_NEAR(full.step.compute_seconds - causal.step.compute_seconds,
                full.step.attention_seconds - causal.step.attention_seconds, 1e-9);
    EXPECT_DOUBLE_EQ(full.memory.activations_bytes, causal.memory.activations_bytes);
    EXPECT_DOUBLE_EQ(full.model_flops_per_step, causal.model_flops_per_step);
  }
}

// Pipeline stages are outermost in the rank order (a stage is t x d
// consecutive ranks): t = 1, p = 2, d = 8 on 8-GPU nodes puts one stage on
// each node, so the activations cross the network, not NVLink. The model
// used to ask whether t x p fit in a node.
TEST(StepModelTest, PipelineTransfersCrossTheNetworkWhenTheStagesSpanNodes) {
  JobSpec job = Llama2_7BJob();
  job.training.global_batch_size = 128;
  const GpuType* h100 = GpuCatalog::BuiltIn().Find("H100-SXM");
  NodePool two = OneNode("H100-SXM", 8);
  two.nodes = 2;
  two.free_gpus = 16;
  Layout l;
  l.tensor_parallel = 1;
  l.pipeline_parallel = 2;
  l.gpus_per_node = 8;
  l.micro_batch_size = 1;
  l.data_parallel = 8;  // 16 GPUs: a stage per node
  l.nodes = 2;
  l.gradient_accumulation_steps = 16;
  const Evaluation spanning = Evaluate(job, l, two, *h100, nullptr);
  l.data_parallel = 4;  // 8 GPUs: both stages in one node
  l.nodes = 1;
  l.gradient_accumulation_steps = 32;
  const Evaluation inside = Evaluate(job, l, two, *h100, nullptr);
  ASSERT_GT(inside.step.pp_p2p_seconds, 0);
  // Per micro-batch: 16 and 32 of them. The NIC's share per GPU (400 Gbit/s
  // for 8 GPUs) is far below NVLink's, and the hop costs more.
  const double per_mb_spanning = spanning.step.pp_p2p_seconds / 16;
  const double per_mb_inside = inside.step.pp_p2p_seconds / 32;
  EXPECT_GT(per_mb_spanning, 5 * per_mb_inside)
      << per_mb_spanning << " s across nodes, " << per_mb_inside << " s inside one";
}

TEST(StepModelTest, AVocabularyTensorParallelismDoesNotDivideIsPadded) {
  // GPT-2's 50257 tokens over t ranks: each holds ceil(V / t) rows, as
  // Megatron pads the vocabulary, never a fraction of a row (the GPU worker
  // cannot allocate one, and the CPU worker rounded it).
  ModelSpec m = Gpt(24, 2048, 16, 2048, 50257);
  EXPECT_EQ(VocabShardRows(m, 1), 50257);
  EXPECT_EQ(VocabShardRows(m, 2), 25129);
  EXPECT_EQ(VocabShardRows(m, 8), 6283);
  EXPECT_EQ(LogitsGemm(m, 1, 2).n, 25129.0);
  // The cost and memory models charge the padded tables and logits: at
  // t = 2, 50257 and 50258 tokens are the same work and the same memory.
  JobSpec job;
  job.model = m;
  job.data.samples = 1e6;
  job.training.global_batch_size = 64;
  Layout l = EightGpusDataParallel(/*zero_stage=*/1);
  l.tensor_parallel = 2;
  l.data_parallel = 4;
  l.gradient_accumulation_steps = 16;
  const GpuType* h100 = GpuCatalog::BuiltIn().Find("H100-SXM");
  const Evaluation odd = Evaluate(job, l, OneNode("H100-SXM", 8), *h100, nullptr);
  job.model.vocab_size = 50258;
  const Evaluation even = Evaluate(job, l, OneNode("H100-SXM", 8), *h100, nullptr);
  EXPECT_EQ(odd.memory.total_bytes(), even.memory.total_bytes());
  EXPECT_EQ(odd.memory.logits_bytes, even.memory.logits_bytes);
  EXPECT_EQ(odd.step.step_seconds, even.step.step_seconds);
}

TEST(StepModelTest, GradientAccumulationDoesNotChangeOptimizerSteps) {
  // Seed article: 1000 samples at GBS 10 -> 100 optimizer steps; with micro-
  // batch 5 and accumulation 2 still 100 steps, but 200 micro-steps.
  const JobSpec job = SeedJob();
  const GpuType* gpu = GpuCatalog::BuiltIn().Find("A100-80GB");
  Layout direct;
  direct.micro_batch_size = 10;
  direct.gradient_accumulation_steps = 1;
  Layout accumulated = direct;
  accumulated.micro_batch_size = 5;
  accumulated.gradient_accumulation_steps = 2;
  const Evaluation a = Evaluate(job, direct, OneNode("A100-80GB", 1), *gpu, nullptr);
  const Evaluation b = Evaluate(job, accumulated, OneNode("A100-80GB", 1), *gpu, nullptr);
  EXPECT_EQ(a.total.optimizer_steps, 100);
  EXPECT_EQ(b.total.optimizer_steps, 100);
  EXPECT_EQ(b.total.optimizer_steps * accumulated.gradient_accumulation_steps, 200);
  // Same work per step either way, so nearly the same step time (smaller
  // GEMMs run a little less efficiently), but less activation memory.
  EXPECT_GE(b.step.step_seconds, a.step.step_seconds);
  EXPECT_LT(b.step.step_seconds, a.step.step_seconds * 1.3);
  EXPECT_LT(b.memory.activations_bytes, a.memory.activations_bytes);
}

TEST(StepModelTest, EpochsRoundUpPerEpoch) {
  JobSpec job = SeedJob();
  job.data.samples = 1005;  // ceil(1005 / 10) = 101 per epoch
  job.data.epochs = 3;
  const GpuType* gpu = GpuCatalog::BuiltIn().Find("A100-80GB");
  Layout l;
  l.micro_batch_size = 10;
  EXPECT_EQ(Evaluate(job, l, OneNode("A100-80GB", 1), *gpu, nullptr).total.optimizer_steps, 303);
}

TEST(CollectivesTest, LargeMessagesFollowTheRingFormula) {
  // nccl-tests: all-reduce t = 2 (n-1)/n S / B, reduce-scatter (n-1)/n S / B,
  // plus latency terms that vanish for large messages.
  CollectiveGroup g;
  g.ranks = 8;
  g.ranks_per_node = 8;
  g.intra_node_busbw_bytes_per_second = 100e9;
  g.intra_node_hop_seconds = 1e-6;
  g.base_seconds = 5e-6;
  const CollectiveTime ar = AllReduceTime(1e9, g);
  EXPECT_EQ(ar.algorithm, CollectiveAlgorithm::kRing);
  EXPECT_DOUBLE_EQ(ar.latency_seconds, 5e-6 + 2 * 7 * 1e-6);
  EXPECT_DOUBLE_EQ(ar.seconds, ar.latency_seconds + 2.0 * 7 / 8 * 1e9 / 100e9);
  EXPECT_DOUBLE_EQ(ReduceScatterTime(1e9, g).seconds, 5e-6 + 7e-6 + 7.0 / 8 * 1e9 / 100e9);
  g.ranks = 1;
  EXPECT_EQ(AllReduceTime(1e9, g).seconds, 0);
}

// NCCL runs a channel per NIC: a data-parallel group with every GPU of its
// nodes sees the node's whole network, one GPU per node only its own NIC.
TEST(CollectivesTest, AGroupAcrossNodesUsesItsShareOfAllNics) {
  CollectiveGroup g;
  g.ranks = 64;
  g.ranks_per_node = 8;
  g.intra_node_busbw_bytes_per_second = 337e9;
  g.inter_node_busbw_bytes_per_second = 360e9;  // 8 x 400 Gb/s x 0.9
  EXPECT_DOUBLE_EQ(AllReduceTime(1e10, g).busbw_bytes_per_second, 337e9);
  g.inter_node_busbw_bytes_per_second = 45e9;  // one NIC's share
  EXPECT_DOUBLE_EQ(AllReduceTime(1e10, g).busbw_bytes_per_second, 45e9);
}

// Across many nodes the tree's log-depth latency beats the ring's linear one
// for small messages; for large ones both move the same bytes.
TEST(CollectivesTest, TreeWinsSmallMessagesAcrossManyNodes) {
  CollectiveGroup g;
  g.ranks = 1024;
  g.ranks_per_node = 8;
  g.intra_node_busbw_bytes_per_second = 337e9;
  g.inter_node_busbw_bytes_per_second = 360e9;
  g.intra_node_hop_seconds = 0.6e-6;
  g.inter_node_hop_seconds = 5e-6;
  const CollectiveTime small = AllReduceTime(1e3, g);
  EXPECT_EQ(small.algorithm, CollectiveAlgorithm::kTree);
  EXPECT_LT(small.latency_seconds, 2 * (1024 - 128) * 0.6e-6 + 2 * 128 * 5e-6);
  g.ranks = 8;  // one node: the ring
  EXPECT_EQ(AllReduceTime(1e3, g).algorithm, CollectiveAlgorithm::kRing);
}

TEST(StepModelTest, GemmEfficiencyFallsForSmallGemms) {
  EXPECT_DOUBLE_EQ(GemmSizeFactor(200e9), 1.0);
  EXPECT_NEAR(GemmSizeFactor(16e9), 0.9 / 0.95, 1e-9);
  EXPECT_NEAR(GemmSizeFactor(1e9), 0.6 / 0.95, 1e-9);
  EXPECT_LT(GemmSizeFactor(1e6), 0.2);
  // Monotone: a bigger GEMM is never less efficient.
  double previous = 0;
  for (double f = 1e6; f < 1e12; f *= 1.7) {
    EXPECT_GE(GemmSizeFactor(f), previous);
    previous = GemmSizeFactor(f);
  }
}

TEST(StepModelTest, CalibrationRatioScalesTheStep) {
  const JobSpec job = SeedJob();
  const GpuType* gpu = GpuCatalog::BuiltIn().Find("H100-SXM");
  Layout l;
  l.micro_batch_size = 10;
  GpuCalibration slow;
  slow.step_time_ratio = 1.5;
  const double base = Evaluate(job, l, OneNode("H100-SXM", 1), *gpu, nullptr).step.step_seconds;
  const double cal = Evaluate(job, l, OneNode("H100-SXM", 1), *gpu, &slow).step.step_seconds;
  EXPECT_NEAR(cal / base, 1.5, 1e-9);
  GpuCalibration fast_gemm;
  fast_gemm.gemm_efficiency = 0.95;
  EXPECT_LT(Evaluate(job, l, OneNode("H100-SXM", 1), *gpu, &fast_gemm).step.step_seconds, base);
}

// Llama-2 7B at global batch 512 on `tokens`, for the run-length tests.
JobSpec Llama7bRun(double tokens) {
  JobSpec job = SeedJob();
  job.model = Llama2_7B();
  job.data.tokens = tokens;
  job.data.samples.reset();
  job.training.global_batch_size = 512;
  return job;
}

// Data parallel only, ZeRO-1, micro-batch 2 on nodes x 8 H100s.
Layout DataParallelOnH100Nodes(int nodes, int accumulation_steps) {
  Layout l;
  l.nodes = nodes;
  l.gpus_per_node = 8;
  l.data_parallel = nodes * 8;
  l.zero_stage = 1;
  l.micro_batch_size = 2;
  l.gradient_accumulation_steps = accumulation_steps;
  return l;
}

TEST(TotalTimeTest, YoungDalyIntervalAndOverheads) {
  const JobSpec job = Llama7bRun(1e11);
  const GpuType* gpu = GpuCatalog::BuiltIn().Find("H100-SXM");
  NodePool pool = OneNode("H100-SXM", 8);
  pool.nodes = 8;
  pool.free_gpus = 64;
  const Layout l = DataParallelOnH100Nodes(8, 4);
  const Evaluation e = Evaluate(job, l, pool, *gpu, nullptr);
  const TotalTimeBreakdown& t = e.total;
  EXPECT_NEAR(t.job_mtbf_seconds, ModelConstants{}.gpu_mtbf_seconds / 64, 1e-6);
  EXPECT_NEAR(t.checkpoint_interval_seconds,
              std::sqrt(2 * t.checkpoint_write_seconds * t.job_mtbf_seconds), 1e-6);
  EXPECT_NEAR(t.total_seconds,
              t.startup_seconds + t.training_seconds + t.checkpoint_overhead_seconds +
                  t.failure_rework_seconds,
              1e-6);
  EXPECT_GT(t.failure_rework_seconds, 0);
  EXPECT_NEAR(e.gpu_hours, 64 * t.total_seconds / 3600, 1e-9);
  // Llama 3: one interruption every ~3.1 h on 16,384 GPUs.
  EXPECT_NEAR(ModelConstants{}.gpu_mtbf_seconds / 16384 / 3600, 3.1, 0.05);
  // One write per interval begun: the periodic ones and the workers' final
  // one after the last step (floor() missed the final one).
  const double writes = t.checkpoint_overhead_seconds / t.checkpoint_write_seconds;
  EXPECT_NEAR(writes, std::ceil(t.training_seconds / t.checkpoint_interval_seconds), 1e-9);
  EXPECT_GT(writes, t.training_seconds / t.checkpoint_interval_seconds);
}

// A checkpoint interval longer than the run (spec.checkpoint.interval up to
// 36500d): a failure loses what the run has done since it began, half the
// run on average, not half the interval. Half of a 365-day interval made a
// 27-hour job take 13 days and called others infeasible.
TEST(TotalTimeTest, AFailureLosesNoMoreWorkThanTheRunHasDone) {
  JobSpec job = Llama7bRun(1e10);
  const GpuType* gpu = GpuCatalog::BuiltIn().Find("H100-SXM");
  const NodePool pool = OneNode("H100-SXM", 8);
  const Layout l = DataParallelOnH100Nodes(1, 32);
  const auto rework_with_interval = [&](double interval_seconds) {
    job.checkpoint.interval_seconds = interval_seconds;
    return Evaluate(job, l, pool, *gpu, nullptr).total;
  };
  const TotalTimeBreakdown year = rework_with_interval(365.0 * 86400);
  const double exposed = year.training_seconds + year.checkpoint_overhead_seconds;
  ASSERT_LT(exposed, 30 * 86400.0);
  const double failures = exposed / year.job_mtbf_seconds;
  EXPECT_NEAR(year.failure_rework_seconds,
              failures * (exposed / 2 + ModelConstants{}.restart_seconds), 1e-6);
  // Any interval from the run's length up loses the same.
  EXPECT_NEAR(rework_with_interval(exposed).failure_rework_seconds, year.failure_rework_seconds,
              1e-6);
  // An interval that divides the run loses half of it, as before.
  const TotalTimeBreakdown quarter = rework_with_interval(year.training_seconds / 4);
  const double quarter_exposed = quarter.training_seconds + quarter.checkpoint_overhead_seconds;
  const double quarter_failures = quarter_exposed / quarter.job_mtbf_seconds;
  EXPECT_LT(quarter.failure_rework_seconds,
            quarter_failures *
                    (quarter.checkpoint_interval_seconds / 2 + ModelConstants{}.restart_seconds) +
                1e-6);
  EXPECT_GT(quarter.failure_rework_seconds,
            quarter_failures *
                (quarter.checkpoint_interval_seconds / 2.2 + ModelConstants{}.restart_seconds));
  EXPECT_LT(quarter.failure_rework_seconds, year.failure_rework_seconds);
}

}  // namespace
}  // namespace pacer::planner
