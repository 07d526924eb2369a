// The two ceilings a benchmark on this GPU is judged against, measured on the spot
// (METHOD.md: datasheet rates are leads, measure them): device-to-device copy bandwidth,
// counting bytes read plus bytes written, and the bf16 matrix rate of cuBLAS on random data.
#pragma once

#include <string>

namespace ds::cuda {

struct DeviceCeilings {
  std::string gpu;             // device name
  int sm_count = 0;
  double copy_bytes_per_s = 0;  // (read + written) bytes / s, large D2D copies
  double bf16_flops = 0;        // FLOP/s of an 8192^3 bf16 GEMM (fp32 accumulation)
};

// Takes a few hundred milliseconds; uses about 1.6 GB of device memory while it runs.
DeviceCeilings measure_device_ceilings();

}  // namespace ds::cuda
