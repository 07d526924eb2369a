// Shape and type checks shared by the CPU kernels.
#include <stdexcept>

#include "kernels/cpu/ops.h"

namespace ds::kernels::cpu {

void fail(const char* op, const std::string& what) {
  throw std::invalid_argument(std::string(op) + ": " + what);
}

void check_f32(const Tensor& t, const char* op, const char* name) {
  DS_CHECK(!t.empty(), op, std::string(name) + " is empty");
  DS_CHECK(t.dtype() == DType::f32, op,
        std::string(name) + " must be f32, not " + std::string(dtype_name(t.dtype())));
}

}  // namespace ds::kernels::cpu
