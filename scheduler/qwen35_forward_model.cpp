#include "scheduler/qwen35_forward_model.h"

#include <memory>
#include <stdexcept>

namespace ds::scheduler {

Qwen35ForwardModel::Qwen35ForwardModel(qwen35::Model& model, bool logits_in_place, qwen35::VisionEncoder* encoder)
    : model_(model), encoder_(encoder), host_logits_(logits_in_place || model.backend().name() == "cpu") {}

std::vector<kernels::Tensor> Qwen35ForwardModel::encode_images(std::span<const vision::ProcessedImage* const> images) {
  if (!encoder_) throw std::logic_error("this model has no vision tower");
  const kernels::Tensor all = encoder_->encode(images);
  const int64_t merge = encoder_->config().spatial_merge_size;
  std::vector<kernels::Tensor> out;
  if (images.size() == 1) {
    out.push_back(all);
    return out;
  }
  // One allocation per image, so each can leave the encoder cache on its own.
  auto& be = model_.backend();
  int64_t at = 0;
  for (const auto* im : images) {
    const int64_t n = im->num_tokens(merge);
    kernels::Tensor one = be.alloc(DType::f32, kernels::Shape{n, all.dim(1)});
    be.copy(all.rows(at, n), one);
    out.push_back(std::move(one));
    at += n;
  }
  return out;
}

ForwardModel::HostTier Qwen35ForwardModel::allocate_host_cache(int64_t bytes) {
  const qwen35::Model::HostTierLayout l = model_.allocate_host_cache(bytes);
  return {l.sizes, l.block_bytes, l.state_bytes};
}

const kernels::Tensor& Qwen35ForwardModel::forward(const qwen35::ForwardBatch& batch) {
  return readable(model_.forward(batch));
}

const kernels::Tensor& Qwen35ForwardModel::forward_mtp(const qwen35::MtpBatch& batch) {
  return readable(model_.forward_mtp(batch));
}

const kernels::Tensor& Qwen35ForwardModel::readable(const qwen35::Logits& logits) {
  if (host_logits_ || logits.tensor().empty()) return logits.tensor();
  auto data = std::make_shared<std::vector<float>>(logits.to_host());
  host_ = kernels::Tensor(std::shared_ptr<void>(data, data->data()), data->data(), DType::f32,
                          kernels::Shape{logits.rows(), logits.vocab()});
  return host_;
}

}  // namespace ds::scheduler
