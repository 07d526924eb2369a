// The CPU backend's own checks (what it cannot store), beyond the Backend contract.
#include <stdexcept>

#include "kernels/cpu/ops.h"

namespace ds::kernels::cpu {

void fail(const char* op, const std::string& what) {
  throw std::invalid_argument(std::string(op) + ": " + what);
}

}  // namespace ds::kernels::cpu
