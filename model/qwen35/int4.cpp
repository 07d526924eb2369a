#include "model/qwen35/int4.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <stdexcept>

#include "kernels/int4.h"
#include "model/qwen35/fp8.h"  // for_ranges

namespace ds::qwen35::int4 {

namespace {

// Word i of an I32 tensor that need not be 4-byte aligned in its file.
uint32_t u32_at(const void* p, int64_t i) {
  uint32_t v;
  std::memcpy(&v, static_cast<const unsigned char*>(p) + 4 * i, 4);
  return v;
}

// One tensor of the module: present, of one of the dtypes, of the shape.
struct Part {
  const void* data;
  StDType dtype;
};

class Reader {
 public:
  Reader(const Checkpoint& ckpt, std::string module, std::set<std::string>& used)
      : ckpt_(ckpt), module_(std::move(module)), used_(used) {}

  [[noreturn]] void fail(const std::string& tensor, const std::string& what) const {
    const auto* e = ckpt_.find(module_ + "." + tensor);
    const std::string file = e ? e->file->path().string() : ckpt_.dir().string();
    throw std::runtime_error(file + ": tensor " + module_ + "." + tensor + " " + what);
  }

  bool has(const std::string& tensor) const { return ckpt_.find(module_ + "." + tensor) != nullptr; }

  Part get(const std::string& tensor, std::initializer_list<StDType> dtypes, const std::vector<int64_t>& shape,
           const std::string& why) {
    const std::string name = module_ + "." + tensor;
    const auto* e = ckpt_.find(name);
    if (!e) throw std::runtime_error(ckpt_.dir().string() + ": tensor " + name + " is missing (" + why + ")");
    const auto& info = *e->info;
    if (std::find(dtypes.begin(), dtypes.end(), info.dtype) == dtypes.end()) {
      std::string want;
      for (StDType d : dtypes) want += (want.empty() ? "" : " or ") + std::string(dtype_name(d));
      fail(tensor, "has dtype " + std::string(dtype_name(info.dtype)) + ", expected " + want);
    }
    if (info.shape != shape)
      fail(tensor, "has shape " + shape_str(info.shape) + ", expected " + shape_str(shape) + " (" + why + ")");
    used_.insert(name);
    return {info.data, info.dtype};
  }

 private:
  const Checkpoint& ckpt_;
  std::string module_;
  std::set<std::string>& used_;
};

float scale_at(const Part& s, int64_t i) {
  const auto* p = static_cast<const unsigned char*>(s.data);
  if (s.dtype == StDType::f32) {
    float f;
    std::memcpy(&f, p + 4 * i, 4);
    return f;
  }
  // Widened exactly; the compiler's half type, as kernels/common (the backends' bit helpers) is
  // not the model's to include.
  if (s.dtype == StDType::f16) {
    _Float16 h;
    std::memcpy(&h, p + 2 * i, 2);
    return static_cast<float>(h);
  }
  uint16_t h;
  std::memcpy(&h, p + 2 * i, 2);
  const uint32_t bits = static_cast<uint32_t>(h) << 16;  // bf16 is the top half of an f32
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// perm sorts the input columns by group (stable); empty when they are sorted already. Checks
// that every group gets group_size columns.
std::vector<int32_t> sort_by_group(Reader& rd, const void* g_idx, int64_t cols, int64_t group_size) {
  const int64_t groups = cols / group_size;
  std::vector<int64_t> count(static_cast<size_t>(groups), 0);
  std::vector<int32_t> group(static_cast<size_t>(cols));
  bool sorted = true;
  for (int64_t k = 0; k < cols; ++k) {
    const auto g = static_cast<int32_t>(u32_at(g_idx, k));
    if (g < 0 || g >= groups)
      rd.fail("g_idx", "puts input " + std::to_string(k) + " in group " + std::to_string(g) + " of " +
                           std::to_string(groups));
    group[static_cast<size_t>(k)] = g;
    ++count[static_cast<size_t>(g)];
    sorted = sorted && g == k / group_size;
  }
  for (int64_t g = 0; g < groups; ++g)
    if (count[static_cast<size_t>(g)] != group_size)
      rd.fail("g_idx", "puts " + std::to_string(count[static_cast<size_t>(g)]) + " inputs in group " +
                           std::to_string(g) + ", not group_size " + std::to_string(group_size));
  if (sorted) return {};
  std::vector<int32_t> perm(static_cast<size_t>(cols));
  std::iota(perm.begin(), perm.end(), 0);
  std::stable_sort(perm.begin(), perm.end(),
                   [&](int32_t a, int32_t b) { return group[static_cast<size_t>(a)] < group[static_cast<size_t>(b)]; });
  return perm;
}

}  // namespace

kernels::HostTensor Weight::host() const {
  return kernels::HostTensor(kernels::Shape{rows, cols}, codes.data(),
                             kernels::Int4Groups{scales.data(), zeros.data(), group_size, perm.empty() ? nullptr : perm.data()});
}

bool stored(const Checkpoint& ckpt, const std::string& module) { return ckpt.find(module + ".qweight") != nullptr; }

Weight read(const Checkpoint& ckpt, const std::string& module, const Int4Config& c, int64_t N, int64_t K,
            std::set<std::string>& used) {
  Reader rd(ckpt, module, used);
  const bool gptq = c.method == Int4Method::gptq;
  const std::string why = std::string(c.method_name()) + ", 4 bits, of a " + shape_str({N, K}) + " weight";
  const int64_t G = c.group_size == -1 ? K : c.group_size;
  if (K % G != 0 || K % 8 != 0 || N % 8 != 0)
    rd.fail("qweight", "holds a " + shape_str({N, K}) + " weight, whose input size is not a multiple of group_size " +
                           std::to_string(G) + " (and of 8), or whose output size is not a multiple of 8");
  const int64_t groups = K / G;
  const Part qweight = rd.get("qweight", {StDType::i32}, gptq ? std::vector<int64_t>{K / 8, N} : std::vector<int64_t>{K, N / 8}, why);
  const Part qzeros = rd.get("qzeros", {StDType::i32}, {groups, N / 8}, why);
  const Part scales = rd.get("scales", {StDType::f16, StDType::bf16, StDType::f32}, {groups, N}, why);

  Weight w;
  w.rows = N;
  w.cols = K;
  w.group_size = G;
  if (gptq && (c.desc_act || rd.has("g_idx"))) {
    const Part g_idx = rd.get("g_idx", {StDType::i32}, {K}, c.desc_act ? "desc_act: the group of each input" : why);
    w.perm = sort_by_group(rd, g_idx.data, K, G);
    if (!c.desc_act && !w.perm.empty())
      rd.fail("g_idx", "is not input / group_size, but desc_act is false");
  }

  // Scales and zeros, transposed to [N, groups].
  w.scales.resize(static_cast<size_t>(N * groups));
  w.zeros.resize(static_cast<size_t>(N * groups));
  for (int64_t g = 0; g < groups; ++g)
    for (int64_t n = 0; n < N; ++n) {
      const int nibble = gptq ? static_cast<int>(n % 8) : kAwqNibble[n % 8];
      const int stored_zero = static_cast<int>(u32_at(qzeros.data, g * (N / 8) + n / 8) >> (4 * nibble)) & 15;
      int zero = stored_zero;
      if (gptq && c.sym) {
        if (stored_zero != 7 && stored_zero != 8)
          rd.fail("qzeros", "holds " + std::to_string(stored_zero) + " for group " + std::to_string(g) + ", output " +
                                std::to_string(n) + ", but sym is true: every zero point is 8 (stored as 7 or 8)");
        zero = 8;
      } else if (gptq && c.zeros_minus_one) {
        zero = stored_zero + 1;
      }
      const size_t at = static_cast<size_t>(n * groups + g);
      w.scales[at] = scale_at(scales, g * N + n);
      w.zeros[at] = static_cast<uint8_t>(zero);
    }

  // Codes, [N, K/2] in stored column order, in bands of rows on the host's threads.
  w.codes.assign(static_cast<size_t>(N * K / 2), 0);
  const int32_t* perm = w.perm.empty() ? nullptr : w.perm.data();
  uint8_t* out = w.codes.data();
  fp8::for_ranges(N, std::max<int64_t>(1, (int64_t{1} << 22) / K), [&](int64_t n0, int64_t n1) {
    if (gptq && !perm) {
      // Eight consecutive inputs of one output are one qweight word, low nibble first: the
      // canonical row's word k/8.
      for (int64_t k8 = 0; k8 < K / 8; ++k8)
        for (int64_t n = n0; n < n1; ++n) {
          const uint32_t v = u32_at(qweight.data, k8 * N + n);
          std::memcpy(out + n * (K / 2) + 4 * k8, &v, 4);
        }
      return;
    }
    for (int64_t n = n0; n < n1; ++n)
      for (int64_t j = 0; j < K; ++j) {
        const int64_t k = perm ? perm[j] : j;
        const int code = gptq ? static_cast<int>(u32_at(qweight.data, (k / 8) * N + n) >> (4 * (k % 8))) & 15
                              : static_cast<int>(u32_at(qweight.data, k * (N / 8) + n / 8) >> (4 * kAwqNibble[n % 8])) & 15;
        out[n * (K / 2) + j / 2] |= static_cast<uint8_t>(code << (4 * (j & 1)));
      }
  });
  return w;
}

std::vector<float> dequantize(const kernels::HostTensor& w) {
  const int64_t rows = w.shape[0], cols = w.shape[1];
  std::vector<float> out(static_cast<size_t>(rows * cols));
  fp8::for_ranges(rows, std::max<int64_t>(1, (int64_t{1} << 20) / std::max<int64_t>(1, cols)),
                  [&](int64_t n0, int64_t n1) { dequantize_int4_rows(w, n0, n1, out.data()); });
  return out;
}

bool stackable(const std::vector<kernels::HostTensor>& parts) {
  if (parts.empty()) return false;
  const auto& f = parts.front();
  for (const auto& p : parts) {
    if (p.dtype != DType::int4 || p.shape[1] != f.shape[1] || p.int4.group_size != f.int4.group_size) return false;
    if ((p.int4.perm == nullptr) != (f.int4.perm == nullptr)) return false;
    if (p.int4.perm && !std::equal(p.int4.perm, p.int4.perm + p.shape[1], f.int4.perm)) return false;
  }
  return true;
}

Weight stack(const std::vector<kernels::HostTensor>& parts) {
  if (!stackable(parts)) throw std::invalid_argument("int4::stack: parts of different columns, groups or order");
  const auto& f = parts.front();
  Weight w;
  w.cols = f.shape[1];
  w.group_size = f.int4.group_size;
  if (f.int4.perm) w.perm.assign(f.int4.perm, f.int4.perm + w.cols);
  for (const auto& p : parts) {
    const int64_t n = p.shape[0], groups = n * (w.cols / w.group_size);
    w.rows += n;
    const auto* c = static_cast<const uint8_t*>(p.data);
    w.codes.insert(w.codes.end(), c, c + n * w.cols / 2);
    w.scales.insert(w.scales.end(), p.int4.scales, p.int4.scales + groups);
    w.zeros.insert(w.zeros.end(), p.int4.zeros, p.int4.zeros + groups);
  }
  return w;
}

}  // namespace ds::qwen35::int4
