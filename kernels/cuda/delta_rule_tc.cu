// The tensor-core chunked delta rule's launcher (the kernels: delta_rule_tc.cuh): which scan
// runs -- the output folded in, 32 or 64 columns a block, or unfolded with the output pass
// after it -- and with what grids.
#include <cuda_bf16.h>

#include <type_traits>

#include "kernels/cuda/backend_common.cuh"
#include "kernels/cuda/backend_ops.h"
#include "kernels/cuda/delta_rule_common.cuh"
#include "kernels/cuda/delta_rule_tc.cuh"

namespace ds::cuda::ops::delta {
namespace {

template <class State>
void set_scan_attributes() {
  check_cuda(cudaFuncSetAttribute(deltanet_tc_scan_kernel<false, kBV, State>,
                                  cudaFuncAttributeMaxDynamicSharedMemorySize, ScanLayout<false, kBV>::kSmem),
             "gated_delta_rule tensor-core scan kernel attribute");
  check_cuda(cudaFuncSetAttribute(deltanet_tc_scan_kernel<true, kBV, State>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  ScanLayout<true, kBV>::kSmem),
             "gated_delta_rule tensor-core scan kernel (output folded in) attribute");
  check_cuda(cudaFuncSetAttribute(deltanet_tc_scan_kernel<true, 2 * kBV, State>,
                                  cudaFuncAttributeMaxDynamicSharedMemorySize, ScanLayout<true, 2 * kBV>::kSmem),
             "gated_delta_rule tensor-core scan kernel (output folded in, 64 columns) attribute");
}

}  // namespace

void deltanet_chunked_tc(const DeltaNetArgs& a, const DeltaNetChunkItem* items, int32_t n_items,
                         const DeltaNetChunkSeq* chunk_seqs, int32_t n_chunk_seqs, float* scratch, int32_t n_sms,
                         Stream stream) {
  static const bool attributes_set = [] {
    check_cuda(cudaFuncSetAttribute(deltanet_tc_prepare_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    kPrepFixedSmem + kMaxGroup * kPrepGatesSmem),
               "gated_delta_rule tensor-core prepare kernel attribute");
    set_scan_attributes<float>();
    set_scan_attributes<__nv_bfloat16>();
    check_cuda(cudaFuncSetAttribute(deltanet_tc_output_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kOutSmem),
               "gated_delta_rule tensor-core output kernel attribute");
    return true;
  }();
  (void)attributes_set;
  const dim3 per_chunk(static_cast<unsigned>(n_items), static_cast<unsigned>(a.v_heads));
  const int group = prepare_group(a.k_heads, a.v_heads);
  launch_dependent("deltanet_tc_prepare_kernel", deltanet_tc_prepare_kernel,
                   dim3(static_cast<unsigned>(n_items), static_cast<unsigned>(a.v_heads / group)), kThreads,
                   kPrepFixedSmem + group * kPrepGatesSmem, stream, a, items, scratch, group);
  // The scan is launched plainly, not chained: chained, its blocks (fewer than the SMs when
  // folded) are placed while the prepare kernel drains, and the layer ran ~20% slower with 32
  // value heads (docs/bench-log, "The DeltaNet scan's launch"); a plain launch spreads them
  // over the idle SMs. The folded kernel needs an SM's shared memory to itself, so it runs when
  // its blocks fit the SMs one each: 32 columns a block if four a head fit, else 64 if two do;
  // otherwise the unfolded one runs two an SM and the output kernel follows.
  const Stream plain{stream.handle, false};
  const int64_t heads = int64_t{a.v_heads} * n_chunk_seqs;
  const auto grid = [&](int cols) {
    return dim3(static_cast<unsigned>(kD / cols), static_cast<unsigned>(a.v_heads), static_cast<unsigned>(n_chunk_seqs));
  };
  bool folded = true;
  with_state_type(a, [&](auto* state) {
    using State = std::remove_pointer_t<decltype(state)>;
    if (heads * (kD / kBV) <= n_sms) {
      launch_dependent("deltanet_tc_scan_kernel (output folded in)", deltanet_tc_scan_kernel<true, kBV, State>,
                       grid(kBV), kThreads, ScanLayout<true, kBV>::kSmem, plain, a, items, chunk_seqs, scratch, group);
    } else if (heads * (kD / (2 * kBV)) <= n_sms) {
      launch_dependent("deltanet_tc_scan_kernel (output folded in, 64 columns)",
                       deltanet_tc_scan_kernel<true, 2 * kBV, State>, grid(2 * kBV), kThreads,
                       ScanLayout<true, 2 * kBV>::kSmem, plain, a, items, chunk_seqs, scratch, group);
    } else {
      launch_dependent("deltanet_tc_scan_kernel", deltanet_tc_scan_kernel<false, kBV, State>, grid(kBV), kThreads,
                       ScanLayout<false, kBV>::kSmem, plain, a, items, chunk_seqs, scratch, group);
      folded = false;
    }
  });
  if (!folded)
    launch_dependent("deltanet_tc_output_kernel", deltanet_tc_output_kernel, per_chunk, kThreads, kOutSmem, stream, a,
                     items, scratch, group);
}

}  // namespace ds::cuda::ops::delta
