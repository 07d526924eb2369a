// A CPU emulation of the CUDA constructs the tensor-core delta-rule kernels use, so their
// source (kernels/cuda/delta_rule_tc.cu) runs on the host in a test: every GPU thread of a
// block is a fiber; __syncthreads is a barrier of the block, warp collectives
// (shuffles, __syncwarp, ldmatrix, mma.sync) a rendezvous of the warp's 32 threads that
// computes each lane's result as the PTX ISA defines it (ldmatrix m8n8 x4 with and without
// .trans, mma.m16n8k16 with bf16 operands and mma.m16n8k8 with tf32 operands, both with f32
// accumulation); cp.async and bulk copies land when issued or when waited for (late_copies),
// and an mbarrier wait yields until its phase completes. Blocks run
// one after another, so shared memory is one static array. What it cannot show: timing,
// bank conflicts, and races that the copies' asynchrony or warps' interleaving would expose.
#pragma once

#include <csetjmp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <algorithm>
#include <functional>
#include <map>
#include <random>
#include <memory>
#include <stdexcept>
#include <vector>

#include <setjmp.h>
#include <ucontext.h>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__
#define __align__(n)

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
struct float2 {
  float x, y;
};
struct alignas(16) float4 {
  float x, y, z, w;
};
struct uint2 {
  uint32_t x, y;
};
struct alignas(16) uint4 {
  uint32_t x, y, z, w;
};
inline float2 make_float2(float x, float y) { return {x, y}; }
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }
inline uint2 make_uint2(uint32_t x, uint32_t y) { return {x, y}; }

namespace emu {

// The emulated GPU threads of a block are fibers on the calling thread, switched at barriers
// (ucontext to start one, _setjmp / _longjmp to switch: no system call per switch).
inline dim3 thread_idx, block_idx;
inline dim3 grid_dim, block_dim;
// Shared memory: the array the kernels' `extern __shared__ smem[]` names (the test defines it
// where that declaration finds it and points this at it).
constexpr size_t kSmemBytes = 256 * 1024;
inline uint8_t* shared_mem = nullptr;

struct Fiber {
  ucontext_t start;
  jmp_buf at;
  std::vector<char> stack;
  bool started = false, done = false;
};
inline std::vector<Fiber> fibers;
inline jmp_buf scheduler;
inline int current = -1;
inline const std::function<void()>* fiber_body = nullptr;

inline void yield() {
  if (!_setjmp(fibers[static_cast<size_t>(current)].at)) _longjmp(scheduler, 1);
}
inline void fiber_entry() {
  (*fiber_body)();
  fibers[static_cast<size_t>(current)].done = true;
  _longjmp(scheduler, 1);
}

// cp.async: with late_copies a copy lands when its group is waited for (the latest a GPU may
// complete it), else when it is issued (the earliest); tests run both.
inline bool late_copies = false;
struct Copy {
  uint32_t dst;
  const void* src;
  int bytes, size;
};
inline std::vector<std::vector<std::vector<Copy>>> copies;  // per thread: committed groups, then the open one

// mbarrier objects, by shared address: arrivals still expected in the current phase,
// transaction bytes still owed, the current phase's parity, and (with late_copies) the bulk
// copies that complete on it, landed when a thread waits on it.
struct MBar {
  int count = 0, pending = 0;
  int64_t tx = 0;
  unsigned phase = 0;
  std::vector<Copy> copies;
};
inline std::map<uint32_t, MBar> mbars;

struct Barrier {
  int n = 0, count = 0;
  unsigned generation = 0;
  void wait() {
    const unsigned g = generation;
    if (++count == n) {
      count = 0;
      ++generation;
      return;
    }
    while (generation == g) yield();
  }
};

struct Block {
  Barrier all;
  std::vector<Barrier> warps;
  // Per warp, per lane: the values a collective exchanges (up to 16 words each).
  std::vector<uint32_t> slots;
};
inline Block* block = nullptr;

inline void sync_block() { block->all.wait(); }
inline int lane() { return static_cast<int>(thread_idx.x % 32); }
inline int warp() { return static_cast<int>(thread_idx.x / 32); }
inline uint32_t* slot(int w, int l) { return &block->slots[(static_cast<size_t>(w) * 32 + l) * 16]; }
inline void sync_warp() { block->warps[static_cast<size_t>(warp())].wait(); }

// Runs fiber t until it waits at a barrier or ends (kept out of launch(), so no local of the
// scheduling loop lives across the jumps).
[[gnu::noinline]] inline void resume(unsigned t) {
  current = static_cast<int>(t);
  thread_idx = dim3(t);
  if (_setjmp(scheduler)) return;
  if (!fibers[t].started) {
    fibers[t].started = true;
    getcontext(&fibers[t].start);
    fibers[t].start.uc_stack.ss_sp = fibers[t].stack.data();
    fibers[t].start.uc_stack.ss_size = fibers[t].stack.size();
    fibers[t].start.uc_link = nullptr;
    makecontext(&fibers[t].start, fiber_entry, 0);
    setcontext(&fibers[t].start);
  }
  _longjmp(fibers[t].at, 1);
}

// Runs body() as every thread of every block of the grid.
inline void launch(dim3 grid, dim3 threads, const std::function<void()>& body) {
  grid_dim = grid;
  block_dim = threads;
  const unsigned n = threads.x * threads.y * threads.z;
  if (threads.y != 1 || threads.z != 1 || n % 32 != 0) throw std::invalid_argument("emulated launch: 1-D blocks of whole warps");
  fibers.resize(n);
  copies.assign(n, {});
  for (auto& f : fibers) f.stack.resize(256 * 1024);
  fiber_body = &body;
  for (unsigned bz = 0; bz < grid.z; ++bz)
    for (unsigned by = 0; by < grid.y; ++by)
      for (unsigned bx = 0; bx < grid.x; ++bx) {
        Block b;
        b.all.n = static_cast<int>(n);
        b.warps.resize(n / 32);
        for (auto& w : b.warps) w.n = 32;
        b.slots.assign(static_cast<size_t>(n) * 16, 0);
        block = &b;
        block_idx = dim3(bx, by, bz);
        mbars.clear();
        std::memset(shared_mem, 0xA5, kSmemBytes);  // garbage, as a GPU's shared memory is
        for (auto& f : fibers) f.started = f.done = false;
        std::vector<unsigned> order(n);
        for (unsigned t = 0; t < n; ++t) order[t] = t;
        std::mt19937 rng(bx + 7919 * by + 104729 * bz);
        for (bool running = true; running;) {
          running = false;
          // Threads reach their next barrier in a different order each pass, so code between
          // two barriers that races with another thread's can see both orders.
          std::shuffle(order.begin(), order.end(), rng);
          for (unsigned t : order) {
            if (fibers[t].done) continue;
            running = true;
            resume(t);
          }
        }
        for (auto& q : copies) q.clear();
        block = nullptr;
      }
}

// A value of each lane to every lane that asks: lane `from(lane)`'s value.
template <class T, class From>
T exchange(T v, From from) {
  static_assert(sizeof(T) <= 8);
  uint32_t* s = slot(warp(), lane());
  std::memcpy(s, &v, sizeof(T));
  sync_warp();
  T r;
  const int src = from(lane());
  std::memcpy(&r, slot(warp(), src >= 0 && src < 32 ? src : lane()), sizeof(T));
  sync_warp();
  return r;
}

inline float bf16_to_f32(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline uint16_t f32_to_bf16(float f) {  // round to nearest even (no NaN in these kernels)
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

// ldmatrix.sync.aligned.m8n8.x4[.trans].shared.b16: matrix i's rows at the addresses of lanes
// 8i .. 8i+7; without .trans lane t receives row t/4, elements 2(t%4), 2(t%4)+1; with .trans
// elements (row 2(t%4), column t/4) and (row 2(t%4)+1, column t/4).
inline void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr, bool trans) {
  if (addr % 16 != 0 || addr + 16 > kSmemBytes) throw std::logic_error("ldmatrix: row address misaligned or out of range");
  slot(warp(), lane())[0] = addr;
  sync_warp();
  const int t = lane();
  for (int i = 0; i < 4; ++i) {
    auto elem = [&](int row, int col) {
      const uint32_t a = slot(warp(), 8 * i + row)[0] + 2 * static_cast<uint32_t>(col);
      uint16_t h;
      std::memcpy(&h, shared_mem + a, 2);
      return static_cast<uint32_t>(h);
    };
    const uint32_t lo = trans ? elem(2 * (t % 4), t / 4) : elem(t / 4, 2 * (t % 4));
    const uint32_t hi = trans ? elem(2 * (t % 4) + 1, t / 4) : elem(t / 4, 2 * (t % 4) + 1);
    r[i] = lo | (hi << 16);
  }
  sync_warp();
}

// The rendezvous of an emulated mma.m16n8kK: every lane posts its four A and two B words,
// each lane gathers the warp's operands (fill places one lane's words: group g, lane q in the
// group) and computes its four accumulators.
template <int K, class Fill>
void mma_warp(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1, Fill fill) {
  uint32_t* s = slot(warp(), lane());
  for (int i = 0; i < 4; ++i) s[i] = a[i];
  s[4] = b0;
  s[5] = b1;
  sync_warp();
  float A[16][K], B[K][8];
  for (int l = 0; l < 32; ++l) fill(l / 4, l % 4, slot(warp(), l), A, B);
  sync_warp();
  const int g = lane() / 4, q = lane() % 4;
  for (int e = 0; e < 4; ++e) {
    const int row = g + 8 * (e / 2), col = 2 * q + e % 2;
    float acc = c[e];
    for (int k = 0; k < K; ++k) acc += A[row][k] * B[k][col];
    c[e] = acc;
  }
}

// mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32, D = A B + C: A fragments a[0] (row g,
// k 2c, 2c+1), a[1] (row g+8), a[2] (k + 8), a[3] (both); B b0 (k 2c, 2c+1, column g), b1
// (k + 8); C c[0], c[1] (row g, columns 2c, 2c+1), c[2], c[3] (row g+8); g = lane/4, c = lane%4.
inline void mma_bf16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  mma_warp<16>(c, a, b0, b1, [](int g, int q, const uint32_t* o, float (&A)[16][16], float (&B)[16][8]) {
    auto half = [](uint32_t w, int h) { return bf16_to_f32(static_cast<uint16_t>(h ? w >> 16 : w & 0xFFFFu)); };
    for (int h = 0; h < 2; ++h) {
      A[g][2 * q + h] = half(o[0], h);
      A[g + 8][2 * q + h] = half(o[1], h);
      A[g][8 + 2 * q + h] = half(o[2], h);
      A[g + 8][8 + 2 * q + h] = half(o[3], h);
      B[2 * q + h][g] = half(o[4], h);
      B[8 + 2 * q + h][g] = half(o[5], h);
    }
  });
}

// cvt.rna.tf32.f32: the f32 bits rounded to 10 mantissa bits, ties away from zero (the low
// 13 bits then zero, as the hardware leaves them).
inline uint32_t to_tf32(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  if ((u & 0x7F800000u) != 0x7F800000u) u += 0x1000u;  // not inf / nan
  return u & ~0x1FFFu;
}
// mma.m16n8k8 with tf32 operands (a0 rows g, a1 g + 8, a2 / a3 the same rows at columns + 4;
// b0 row q, b1 row q + 4, column g) and f32 accumulation; the operands' low 13 bits are
// ignored, as by the hardware.
inline void mma_tf32(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  mma_warp<8>(c, a, b0, b1, [](int g, int q, const uint32_t* o, float (&A)[16][8], float (&B)[8][8]) {
    auto f = [](uint32_t w) {
      w &= ~0x1FFFu;
      float x;
      std::memcpy(&x, &w, 4);
      return x;
    };
    A[g][q] = f(o[0]);
    A[g + 8][q] = f(o[1]);
    A[g][q + 4] = f(o[2]);
    A[g + 8][q + 4] = f(o[3]);
    B[q][g] = f(o[4]);
    B[q + 4][g] = f(o[5]);
  });
}

}  // namespace emu

#define threadIdx (::emu::thread_idx)
#define blockIdx (::emu::block_idx)
#define blockDim (::emu::block_dim)
#define gridDim (::emu::grid_dim)

inline void __syncthreads() { emu::sync_block(); }
inline void __syncwarp(unsigned = 0xffffffffu) { emu::sync_warp(); }
template <class T>
T __shfl_xor_sync(unsigned, T v, int mask) {
  return emu::exchange(v, [mask](int l) { return l ^ mask; });
}
template <class T>
T __shfl_up_sync(unsigned, T v, int delta) {
  return emu::exchange(v, [delta](int l) { return l - delta; });  // lanes below delta keep theirs
}
template <class T>
T __shfl_sync(unsigned, T v, int src) {
  return emu::exchange(v, [src](int) { return src; });
}
