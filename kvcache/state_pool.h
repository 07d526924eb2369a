// StatePool: the Gated DeltaNet state slots, one per running sequence.
//
// A DeltaNet layer carries its whole history in a fixed-size state, so unlike K/V it is not
// paged: a sequence holds exactly one slot for as long as it runs, and the slot index selects
// its state in every linear-attention layer. Per slot and layer there are two parts:
//   conv state       [conv_dim, conv_taps]            the last Kc-1 pre-conv inputs (conv_dtype)
//   recurrent state  [value_heads, key_dim, value_dim] the delta-rule matrix S (recurrent_dtype)
// Backends keep two arrays, conv [num_slots, layers, conv_dim, taps] and recurrent
// [num_slots, layers, Hv, dk, dv]; StateLayout gives the 64-bit base offsets into them and
// leaves the inner order of a layer's state to the backend.
//
// acquire() hands out a free slot and zeroes it (through the zero callback the backend
// installs, so the pool does not care whether the memory is host or device): a reused slot
// must never leak the previous tenant's state. SlotHandles carry a generation like
// BlockHandles, and a stale or double release is refused with StaleHandleError.
//
// Not thread-safe: the engine thread owns the pools.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "kernels/dtype.h"
#include "kvcache/block_pool.h"

namespace ds::kvcache {

struct StateLayout {
  int64_t n_layers = 0;     // linear-attention (DeltaNet) layers
  int64_t conv_dim = 0;     // 2 * Hk * dk + Hv * dv
  int64_t conv_taps = 0;    // Kc - 1
  int64_t value_heads = 0;  // Hv
  int64_t key_dim = 0;      // dk (per head)
  int64_t value_dim = 0;    // dv (per head)
  DType conv_dtype = DType::f32;
  DType recurrent_dtype = DType::f32;  // f32 or bf16: Backend::recurrent_state_dtype

  int64_t conv_elements_per_layer() const { return conv_dim * conv_taps; }
  int64_t recurrent_elements_per_layer() const { return value_heads * key_dim * value_dim; }
  int64_t conv_elements_per_slot() const { return n_layers * conv_elements_per_layer(); }
  int64_t recurrent_elements_per_slot() const { return n_layers * recurrent_elements_per_layer(); }
  int64_t bytes_per_slot() const {
    return ds::row_bytes(conv_dtype, conv_elements_per_slot()) +
           ds::row_bytes(recurrent_dtype, recurrent_elements_per_slot());
  }

  // Element offsets of (slot, layer) into the conv and recurrent arrays.
  int64_t conv_offset(int64_t slot, int64_t layer) const {
    return (slot * n_layers + layer) * conv_elements_per_layer();
  }
  int64_t recurrent_offset(int64_t slot, int64_t layer) const {
    return (slot * n_layers + layer) * recurrent_elements_per_layer();
  }
};

using SlotId = int32_t;

struct SlotHandle {
  SlotId id = -1;
  uint32_t generation = 0;
  bool valid() const { return id >= 0; }
  friend bool operator==(const SlotHandle&, const SlotHandle&) = default;
};

class StatePool {
 public:
  // Called with a slot id whenever that slot must be zeroed (on every acquire).
  using ZeroFn = std::function<void(SlotId)>;

  StatePool(int32_t num_slots, StateLayout layout, ZeroFn zero = {});
  StatePool(const StatePool&) = delete;
  StatePool& operator=(const StatePool&) = delete;

  const StateLayout& layout() const { return layout_; }
  int32_t num_slots() const { return static_cast<int32_t>(live_.size()); }
  int32_t num_free() const { return static_cast<int32_t>(free_list_.size()); }
  int32_t num_used() const { return num_slots() - num_free(); }

  // Installs the callback that zeroes a slot's memory (set by the backend that owns it).
  void set_zero_fn(ZeroFn zero) { zero_ = std::move(zero); }

  // A zeroed free slot, or nullopt when every slot is in use.
  std::optional<SlotHandle> acquire();
  // Zeroes a live slot again (a sequence re-admitted after preemption restarts from zero).
  void reset(SlotHandle h);
  // Returns the slot to the free list; throws StaleHandleError for a stale or double release.
  void release(SlotHandle h);
  bool is_live(SlotHandle h) const;

 private:
  void check_live(SlotHandle h, const char* what) const;

  StateLayout layout_;
  ZeroFn zero_;
  std::vector<uint8_t> live_;
  std::vector<uint32_t> generation_;
  std::vector<SlotId> free_list_;
};

}  // namespace ds::kvcache
