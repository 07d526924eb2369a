// CudaSampler (cuda_sampler.h): the host side -- each row's edits (bias, repetition, frequency
// count of its distinct tokens), uniform and token mask, one staged upload, the kernels of
// sampler_kernels.cu, and the download of the chosen tokens and logprobs.
#include "kernels/cuda/cuda_sampler.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/sampler_kernels.h"

namespace ds::cuda {
namespace {

using namespace sampler;

class CudaSampler final : public kernels::Sampler {
 public:
  explicit CudaSampler(kernels::Backend& backend) : stream_(static_cast<cudaStream_t>(backend_stream(backend))) {}
  ~CudaSampler() override {
    cudaStreamSynchronize(stream_);
    if (dev_) cudaFree(dev_);
    if (work_) cudaFree(work_);
    if (pinned_) cudaFreeHost(pinned_);
  }

  bool applies_token_masks() const override { return true; }

  void do_sample(const kernels::Tensor& logits, std::span<const kernels::SampleRow> rows,
                 std::span<kernels::SampledToken> out) override {
    const int64_t vocab = logits.dim(1);
    const auto n_rows = static_cast<int32_t>(rows.size());
    descs_.assign(rows.size(), RowDesc{});
    edits_.clear();
    biases_.clear();
    edit_rows_.clear();
    // Masks, in words: a row's words past the vocabulary are not uploaded, and a row without
    // a mask (mask_offset -1) adds nothing.
    const int64_t vocab_words = (vocab + 31) / 32;
    int64_t mask_words = 0;
    for (int32_t r = 0; r < n_rows; ++r) {
      const kernels::SampleRow& row = rows[static_cast<size_t>(r)];
      const kernels::SamplerSettings& p = *row.settings;
      RowDesc& d = descs_[static_cast<size_t>(r)];
      d.sample = p.greedy() ? 0 : 1;
      d.top_k = p.top_k;
      d.temperature = p.temperature;
      d.top_p = p.top_p;
      d.min_p = p.min_p;
      d.n_top = p.logprobs ? p.top_logprobs : -1;
      d.u = d.sample ? row.rng->next_unit() : 0.0;
      d.mask_offset = -1;
      d.mask_words = 0;
      if (!row.allowed.empty()) {
        d.mask_offset = mask_words;
        d.mask_words = std::min<int64_t>(static_cast<int64_t>(row.allowed.size()), vocab_words);
        mask_words += d.mask_words;
      }
      const size_t before = edits_.size();
      add_edits(r, p, row, vocab);
      d.use_work = edits_.size() > before ? 1 : 0;
      if (d.use_work) edit_rows_.push_back(r);
    }
    // One staged upload: descriptors, edits, biases, edited-row list, masks.
    const size_t b_desc = descs_.size() * sizeof(RowDesc), b_edit = edits_.size() * sizeof(Edit),
                 b_bias = biases_.size() * 4, b_rows = edit_rows_.size() * 4,
                 b_mask = static_cast<size_t>(mask_words) * sizeof(uint32_t);
    const size_t o_edit = align(b_desc), o_bias = o_edit + align(b_edit), o_rows = o_bias + align(b_bias),
                 o_mask = o_rows + align(b_rows), o_res = o_mask + align(b_mask),
                 b_res = rows.size() * sizeof(RowResult);
    const size_t total = o_res + align(b_res);
    reserve(total);
    std::memcpy(pinned_, descs_.data(), b_desc);
    if (b_edit) std::memcpy(pinned_ + o_edit, edits_.data(), b_edit);
    if (b_bias) std::memcpy(pinned_ + o_bias, biases_.data(), b_bias);
    if (b_rows) std::memcpy(pinned_ + o_rows, edit_rows_.data(), b_rows);
    for (size_t r = 0; r < rows.size(); ++r) {
      const RowDesc& d = descs_[r];
      if (d.mask_offset >= 0)
        std::memcpy(pinned_ + o_mask + static_cast<size_t>(d.mask_offset) * sizeof(uint32_t), rows[r].allowed.data(),
                    static_cast<size_t>(d.mask_words) * sizeof(uint32_t));
    }
    ops::check_cuda(cudaMemcpyAsync(dev_, pinned_, o_res, cudaMemcpyHostToDevice, stream_), "sampler: upload");
    const auto* dlogits = logits.data_as<const float>();
    if (!edit_rows_.empty()) {
      reserve_work(static_cast<size_t>(n_rows) * static_cast<size_t>(vocab) * 4);
      launch_edits(dlogits, work_, reinterpret_cast<const int32_t*>(dev_ + o_rows),
                   static_cast<int32_t>(edit_rows_.size()), reinterpret_cast<const Edit*>(dev_ + o_edit),
                   static_cast<int32_t>(edits_.size()), reinterpret_cast<const float*>(dev_ + o_bias), vocab, stream_);
    }
    auto* res = reinterpret_cast<RowResult*>(dev_ + o_res);
    const auto* masks = b_mask ? reinterpret_cast<const uint32_t*>(dev_ + o_mask) : nullptr;
    launch_sample(dlogits, work_, reinterpret_cast<const RowDesc*>(dev_), masks, n_rows, vocab, res, stream_);
    results_.resize(rows.size());
    ops::check_cuda(cudaMemcpyAsync(results_.data(), res, b_res, cudaMemcpyDeviceToHost, stream_), "sampler: download");
    ops::check_cuda(cudaStreamSynchronize(stream_), "sampler (or the forward before it)");
    for (size_t r = 0; r < rows.size(); ++r) {
      const RowResult& rr = results_[r];
      kernels::SampledToken t;
      t.token = rr.token;
      const int n_top = descs_[r].n_top;
      if (t.token >= 0 && n_top >= 0) {
        t.logprob = rr.logprob;
        for (int k = 0; k < n_top; ++k) t.top.push_back({rr.top_ids[k], rr.top_lp[k]});
      }
      out[r] = std::move(t);
    }
  }

 private:
  static size_t align(size_t n) { return (n + 15) / 16 * 16; }

  // The row's distinct edited tokens in the CPU sampler's terms.
  void add_edits(int32_t r, const kernels::SamplerSettings& p, const kernels::SampleRow& row, int64_t vocab) {
    tokens_.clear();
    auto in_vocab = [vocab](int32_t t) { return t >= 0 && t < vocab; };
    for (const auto& b : p.logit_bias)
      if (in_vocab(b.token)) tokens_.push_back(b.token);
    const bool rep = p.repetition_penalty != 1.0f, fp = p.frequency_penalty != 0.0f || p.presence_penalty != 0.0f;
    if (rep)
      for (int32_t t : row.prompt)
        if (in_vocab(t)) tokens_.push_back(t);
    if (rep || fp)
      for (int32_t t : row.generated)
        if (in_vocab(t)) tokens_.push_back(t);
    if (tokens_.empty()) return;
    std::sort(tokens_.begin(), tokens_.end());
    tokens_.erase(std::unique(tokens_.begin(), tokens_.end()), tokens_.end());
    gen_.assign(row.generated.begin(), row.generated.end());
    std::sort(gen_.begin(), gen_.end());
    std::vector<int32_t> prompt_sorted;
    if (rep) {
      prompt_sorted.assign(row.prompt.begin(), row.prompt.end());
      std::sort(prompt_sorted.begin(), prompt_sorted.end());
    }
    for (int32_t t : tokens_) {
      Edit e{};
      e.row = r;
      e.token = t;
      e.bias_begin = static_cast<int32_t>(biases_.size());
      for (const auto& b : p.logit_bias)
        if (b.token == t) biases_.push_back(b.bias);
      e.bias_n = static_cast<int32_t>(biases_.size()) - e.bias_begin;
      const auto range = std::equal_range(gen_.begin(), gen_.end(), t);
      const auto count = static_cast<float>(range.second - range.first);
      e.repetition = rep && (count > 0 || std::binary_search(prompt_sorted.begin(), prompt_sorted.end(), t)) ? 1 : 0;
      e.count = count;
      e.rep_penalty = p.repetition_penalty;
      e.frequency = fp ? p.frequency_penalty : 0.0f;
      e.presence = fp ? p.presence_penalty : 0.0f;
      edits_.push_back(e);
    }
  }

  void reserve(size_t bytes) {
    if (bytes <= capacity_) return;
    ops::check_cuda(cudaStreamSynchronize(stream_), "sampler");
    if (dev_) cudaFree(dev_);
    if (pinned_) cudaFreeHost(pinned_);
    dev_ = nullptr;
    pinned_ = nullptr;
    capacity_ = 0;
    const size_t cap = std::max<size_t>(bytes * 2, 1 << 16);
    ops::check_cuda(cudaMalloc(reinterpret_cast<void**>(&dev_), cap), "sampler: cudaMalloc");
    ops::check_cuda(cudaMallocHost(reinterpret_cast<void**>(&pinned_), cap), "sampler: cudaMallocHost");
    capacity_ = cap;
  }
  void reserve_work(size_t bytes) {
    if (bytes <= work_capacity_) return;
    ops::check_cuda(cudaStreamSynchronize(stream_), "sampler");
    if (work_) cudaFree(work_);
    work_ = nullptr;
    ops::check_cuda(cudaMalloc(reinterpret_cast<void**>(&work_), bytes), "sampler: cudaMalloc");
    work_capacity_ = bytes;
  }

  cudaStream_t stream_;
  uint8_t* dev_ = nullptr;
  uint8_t* pinned_ = nullptr;
  size_t capacity_ = 0;
  float* work_ = nullptr;
  size_t work_capacity_ = 0;
  std::vector<RowDesc> descs_;
  std::vector<Edit> edits_;
  std::vector<float> biases_;
  std::vector<int32_t> edit_rows_, tokens_, gen_;
  std::vector<RowResult> results_;
};

}  // namespace

std::unique_ptr<kernels::Sampler> make_cuda_sampler(kernels::Backend& backend) {
  return std::make_unique<CudaSampler>(backend);
}

}  // namespace ds::cuda
