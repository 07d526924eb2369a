// A small engine for tests: a model on the CPU backend with its own BlockPool and StatePool,
// sequences that grow their block tables as they go, and steps that return host logits.
#pragma once

#include <cstdint>
#include <deque>
#include <filesystem>
#include <memory>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kvcache/block_pool.h"
#include "kvcache/state_pool.h"
#include "model/qwen35/model.h"

namespace ds::test {

class Harness {
 public:
  struct Seq {
    explicit Seq(int32_t block_size) : table(block_size) {}
    kvcache::BlockTable table;
    kvcache::SlotHandle slot;
  };
  struct Part {
    Seq* seq;
    std::vector<int32_t> tokens;
    int32_t logit_rows = 1;
    int32_t lora_slot = -1;  // the model's LoRA slot the part runs with (-1: none)
  };

  // Loads dir on a fresh CPU backend (with options, and the backend's) and allocates
  // num_blocks blocks and num_slots slots.
  Harness(const std::filesystem::path& dir, int32_t num_blocks = 64, int32_t block_size = 4,
          int32_t num_slots = 4, const qwen35::LoadOptions& options = {},
          const kernels::cpu::CpuBackendOptions& backend_options = {});

  qwen35::Model& model() { return *model_; }
  kvcache::BlockPool& blocks() { return blocks_; }
  kvcache::StatePool& slots() { return slots_; }
  // A new sequence with a fresh (zeroed) state slot.
  Seq& add_sequence();
  // Frees a sequence's blocks and slot.
  void finish(Seq& s);
  // One forward over the parts; tables grow before and record the tokens after.
  // Returns the logits [rows, V] on the host.
  std::vector<float> step(const std::vector<Part>& parts);
  // Prefill of tokens in chunks of `chunk` (0 = whole), logits of every position.
  std::vector<float> prefill(Seq& s, const std::vector<int32_t>& tokens, int64_t chunk = 0);

 private:
  std::unique_ptr<kernels::Backend> backend_;
  std::unique_ptr<qwen35::Model> model_;
  kvcache::BlockPool blocks_;
  kvcache::StatePool slots_;
  std::deque<Seq> seqs_;
};

}  // namespace ds::test
