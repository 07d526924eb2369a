#include "scheduler/qwen35_forward_model.h"

#include <memory>

namespace ds::scheduler {

Qwen35ForwardModel::Qwen35ForwardModel(qwen35::Model& model, bool logits_in_place)
    : model_(model), host_logits_(logits_in_place || model.backend().name() == "cpu") {}

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
