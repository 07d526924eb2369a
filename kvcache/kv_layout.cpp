#include "kvcache/kv_layout.h"

#include <string>

namespace ds::kvcache {

void KvPoolLayout::validate() const {
  if (num_blocks <= 0 || block_size <= 0 || n_kv_heads <= 0 || head_dim <= 0) {
    throw std::invalid_argument("KvPoolLayout: every dimension must be positive (blocks " +
                                std::to_string(num_blocks) + ", block_size " +
                                std::to_string(block_size) + ", kv heads " +
                                std::to_string(n_kv_heads) + ", head_dim " +
                                std::to_string(head_dim) + ")");
  }
  if (is_quantized(dtype) && head_dim % kQuantBlock != 0) {
    throw std::invalid_argument("KvPoolLayout: " + std::string(dtype_name(dtype)) +
                                " needs head_dim to be a multiple of 32, got " +
                                std::to_string(head_dim));
  }
}

}  // namespace ds::kvcache
