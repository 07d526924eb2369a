#include "kernels/cuda/block_table_mirror.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "kernels/hip/gpu_runtime.h"

namespace ds::cuda {
namespace {

__global__ void scatter_kernel(int32_t* dst, const int32_t* pairs, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) dst[pairs[2 * i]] = pairs[2 * i + 1];
}

}  // namespace

BlockTableMirror::BlockTableMirror(int32_t max_rows, int32_t max_blocks_per_row, int64_t num_blocks)
    : max_rows_(max_rows), max_blocks_(max_blocks_per_row), num_blocks_(num_blocks) {
  if (max_rows <= 0 || max_blocks_per_row <= 0 || num_blocks < 0)
    throw std::invalid_argument("BlockTableMirror: sizes must be positive");
  const int64_t entries = int64_t{max_rows} * (1 + int64_t{max_blocks_per_row});
  if (entries > 0x7fffffff) throw std::invalid_argument("BlockTableMirror: table exceeds 2^31 entries");
  host_.assign(static_cast<size_t>(entries), 0);
  n_blocks_.assign(static_cast<size_t>(max_rows), 0);
  dirty_.assign(static_cast<size_t>(entries), 0);
  DS_GPU_CHECK(gpuMalloc(reinterpret_cast<void**>(&dev_), static_cast<size_t>(entries) * 4));
  DS_GPU_CHECK(gpuMemsetAsync(dev_, 0, static_cast<size_t>(entries) * 4, nullptr));
  gpuEvent_t ev;
  DS_GPU_CHECK(gpuEventCreateWithFlags(&ev, gpuEventDisableTiming));
  event_ = ev;
  DS_GPU_CHECK(gpuStreamSynchronize(nullptr));
}

BlockTableMirror::~BlockTableMirror() {
  if (event_) {
    (void)gpuEventSynchronize(static_cast<gpuEvent_t>(event_));
    (void)gpuEventDestroy(static_cast<gpuEvent_t>(event_));
  }
  if (pinned_) (void)gpuFreeHost(pinned_);
  if (dev_pairs_) (void)gpuFree(dev_pairs_);
  if (dev_) (void)gpuFree(dev_);
}

void BlockTableMirror::check_row(int32_t row) const {
  if (row < 0 || row >= max_rows_)
    throw std::out_of_range("BlockTableMirror: row " + std::to_string(row) + " outside [0, " +
                            std::to_string(max_rows_) + ")");
}

void BlockTableMirror::put(int64_t index, int32_t value) {
  if (host_[index] == value) return;
  host_[index] = value;
  if (!dirty_[index]) {
    dirty_[index] = 1;
    dirty_list_.push_back(static_cast<int32_t>(index));
  }
}

void BlockTableMirror::set_blocks(int32_t row, std::span<const int32_t> ids) {
  check_row(row);
  if (static_cast<int64_t>(ids.size()) > max_blocks_)
    throw std::out_of_range("BlockTableMirror: " + std::to_string(ids.size()) + " blocks exceed the row capacity " +
                            std::to_string(max_blocks_));
  for (int32_t id : ids)
    if (id < 0 || id >= num_blocks_)
      throw std::out_of_range("BlockTableMirror: block id " + std::to_string(id) + " outside [0, " +
                              std::to_string(num_blocks_) + ")");
  const int64_t base = max_rows_ + int64_t{row} * max_blocks_;
  for (size_t j = 0; j < ids.size(); ++j) put(base + static_cast<int64_t>(j), ids[j]);
  n_blocks_[row] = static_cast<int32_t>(ids.size());
}

void BlockTableMirror::append_block(int32_t row, int32_t id) {
  check_row(row);
  if (n_blocks_[row] >= max_blocks_)
    throw std::out_of_range("BlockTableMirror: row " + std::to_string(row) + " is full");
  if (id < 0 || id >= num_blocks_)
    throw std::out_of_range("BlockTableMirror: block id " + std::to_string(id) + " outside [0, " +
                            std::to_string(num_blocks_) + ")");
  put(max_rows_ + int64_t{row} * max_blocks_ + n_blocks_[row], id);
  ++n_blocks_[row];
}

void BlockTableMirror::set_seq_len(int32_t row, int32_t len) {
  check_row(row);
  if (len < 0)
    throw std::out_of_range("BlockTableMirror: bad length " + std::to_string(len));
  put(row, len);
}

void BlockTableMirror::clear_row(int32_t row) {
  check_row(row);
  n_blocks_[row] = 0;
  put(row, 0);
}

std::span<const int32_t> BlockTableMirror::blocks(int32_t row) const {
  check_row(row);
  return {host_.data() + max_rows_ + int64_t{row} * max_blocks_, static_cast<size_t>(n_blocks_[row])};
}

int32_t BlockTableMirror::seq_len(int32_t row) const {
  check_row(row);
  return host_[row];
}

int64_t BlockTableMirror::sync(void* stream) {
  const int64_t n = static_cast<int64_t>(dirty_list_.size());
  if (n == 0) return 0;
  auto s = static_cast<gpuStream_t>(stream);
  auto ev = static_cast<gpuEvent_t>(event_);
  DS_GPU_CHECK(gpuEventSynchronize(ev));  // the last transfer has left the pinned buffer
  if (n > pair_capacity_) {
    if (pinned_) DS_GPU_CHECK(gpuFreeHost(pinned_));
    if (dev_pairs_) DS_GPU_CHECK(gpuFree(dev_pairs_));
    pinned_ = nullptr;
    dev_pairs_ = nullptr;
    const int64_t cap = std::max<int64_t>(n, 1024);
    DS_GPU_CHECK(gpuMallocHost(reinterpret_cast<void**>(&pinned_), static_cast<size_t>(cap) * 8));
    DS_GPU_CHECK(gpuMalloc(reinterpret_cast<void**>(&dev_pairs_), static_cast<size_t>(cap) * 8));
    pair_capacity_ = cap;
  }
  for (int64_t i = 0; i < n; ++i) {
    const int32_t idx = dirty_list_[i];
    pinned_[2 * i] = idx;
    pinned_[2 * i + 1] = host_[idx];
    dirty_[idx] = 0;
  }
  dirty_list_.clear();
  DS_GPU_CHECK(gpuMemcpyAsync(dev_pairs_, pinned_, static_cast<size_t>(n) * 8, gpuMemcpyHostToDevice, s));
  scatter_kernel<<<static_cast<unsigned>((n + 255) / 256), 256, 0, s>>>(dev_, dev_pairs_, n);
  DS_GPU_CHECK_LAUNCH();
  DS_GPU_CHECK(gpuEventRecord(ev, s));
  return n;
}

}  // namespace ds::cuda
