// DecodeWorkspace (paged_attention.h): the device scratch of one decode call at a time -- the
// uploaded work list, the split partials and the guard word -- in one allocation, with a pinned
// staging buffer for the upload. Host code.
#include <cstdint>
#include <cstring>
#include <string>

#include "kernels/common/gpu_runtime.h"
#include "kernels/cuda/paged_attention.h"

namespace ds::cuda {

namespace {
constexpr int64_t kAlign = 256;
int64_t align_up(int64_t x) { return (x + kAlign - 1) / kAlign * kAlign; }
struct WsLayout {
  int64_t items, begin, part_o, part_lse, guard, total;
};
WsLayout ws_layout(int32_t max_items, int32_t max_seqs, int32_t n_q_heads, int32_t head_dim) {
  WsLayout l;
  l.items = 0;
  l.begin = align_up(l.items + int64_t{max_items} * static_cast<int64_t>(sizeof(DecodeWorkItem)));
  l.part_o = align_up(l.begin + (int64_t{max_seqs} + 1) * 4);
  l.part_lse = align_up(l.part_o + int64_t{max_items} * n_q_heads * head_dim * 4);
  l.guard = align_up(l.part_lse + int64_t{max_items} * n_q_heads * 4);
  l.total = align_up(l.guard + 8);
  return l;
}
}  // namespace

DecodeWorkspace::DecodeWorkspace(int32_t max_items, int32_t max_seqs, int32_t n_q_heads, int32_t head_dim)
    : max_items_(max_items), max_seqs_(max_seqs), n_q_heads_(n_q_heads), head_dim_(head_dim) {
  if (max_items <= 0 || max_seqs <= 0 || n_q_heads <= 0 || head_dim <= 0)
    throw std::invalid_argument("DecodeWorkspace: sizes must be positive");
  const WsLayout l = ws_layout(max_items, max_seqs, n_q_heads, head_dim);
  DS_GPU_CHECK(gpuMalloc(&block_, static_cast<size_t>(l.total)));
  auto* base = static_cast<uint8_t*>(block_);
  dev_.items = reinterpret_cast<DecodeWorkItem*>(base + l.items);
  dev_.seq_item_begin = reinterpret_cast<int32_t*>(base + l.begin);
  dev_.part_o = reinterpret_cast<float*>(base + l.part_o);
  dev_.part_lse = reinterpret_cast<float*>(base + l.part_lse);
  dev_.guard = reinterpret_cast<int32_t*>(base + l.guard);
  DS_GPU_CHECK(gpuMemsetAsync(dev_.guard, 0, 8, nullptr));
  DS_GPU_CHECK(gpuMallocHost(&staging_, static_cast<size_t>(l.begin + (int64_t{max_seqs} + 1) * 4)));
  gpuEvent_t ev;
  DS_GPU_CHECK(gpuEventCreateWithFlags(&ev, gpuEventDisableTiming));
  staged_event_ = ev;
  DS_GPU_CHECK(gpuStreamSynchronize(nullptr));
}

DecodeWorkspace::~DecodeWorkspace() {
  if (staged_event_) {
    (void)gpuEventSynchronize(static_cast<gpuEvent_t>(staged_event_));
    (void)gpuEventDestroy(static_cast<gpuEvent_t>(staged_event_));
  }
  if (staging_) (void)gpuFreeHost(staging_);
  if (block_) (void)gpuFree(block_);
}

int64_t DecodeWorkspace::device_bytes(int32_t max_items, int32_t max_seqs, int32_t n_q_heads, int32_t head_dim) {
  return ws_layout(max_items, max_seqs, n_q_heads, head_dim).total;
}

void DecodeWorkspace::upload(const DecodePlan& plan, void* stream) {
  if (static_cast<int64_t>(plan.items.size()) > max_items_ || plan.n_seqs > max_seqs_)
    throw std::invalid_argument("DecodeWorkspace::upload: plan has " + std::to_string(plan.items.size()) +
                                " items for " + std::to_string(plan.n_seqs) + " sequences; workspace holds " +
                                std::to_string(max_items_) + " and " + std::to_string(max_seqs_));
  if (static_cast<int32_t>(plan.seq_item_begin.size()) != plan.n_seqs + 1)
    throw std::invalid_argument("DecodeWorkspace::upload: malformed plan");
  auto s = static_cast<gpuStream_t>(stream);
  auto ev = static_cast<gpuEvent_t>(staged_event_);
  DS_GPU_CHECK(gpuEventSynchronize(ev));  // the previous upload has left the staging buffer
  const WsLayout l = ws_layout(max_items_, max_seqs_, n_q_heads_, head_dim_);
  auto* st = static_cast<uint8_t*>(staging_);
  const size_t item_bytes = plan.items.size() * sizeof(DecodeWorkItem);
  const size_t begin_bytes = plan.seq_item_begin.size() * 4;
  if (item_bytes) std::memcpy(st, plan.items.data(), item_bytes);
  std::memcpy(st + l.begin, plan.seq_item_begin.data(), begin_bytes);
  if (item_bytes) DS_GPU_CHECK(gpuMemcpyAsync(dev_.items, st, item_bytes, gpuMemcpyHostToDevice, s));
  DS_GPU_CHECK(gpuMemcpyAsync(dev_.seq_item_begin, st + l.begin, begin_bytes, gpuMemcpyHostToDevice, s));
  DS_GPU_CHECK(gpuEventRecord(ev, s));
  plan_ = plan;
  uploaded_ = true;
}

KvGuardReport DecodeWorkspace::take_guard_report(void* stream) {
  auto s = static_cast<gpuStream_t>(stream);
  int32_t host[2] = {0, 0};
  DS_GPU_CHECK(gpuStreamSynchronize(s));
  DS_GPU_CHECK(gpuMemcpy(host, dev_.guard, 8, gpuMemcpyDeviceToHost));
  KvGuardReport r;
  r.tripped = host[0] != 0;
  r.bad_id = host[1];
  if (r.tripped) {
    DS_GPU_CHECK(gpuMemsetAsync(dev_.guard, 0, 8, s));
    DS_GPU_CHECK(gpuStreamSynchronize(s));
  }
  return r;
}

}  // namespace ds::cuda
