// Tensor: a handle to a buffer owned by a backend, with an element type and a shape.
//
// The model never looks inside a Tensor's memory; it passes Tensors to Backend ops (see
// backend.h). What the bytes are is the backend's business: host float32 for the CPU
// backend; device memory for CUDA (bf16 weights, f32 where the checkpoint keeps f32).
// A Tensor is a cheap value type: copies share the storage (the last one frees it through
// the deleter the backend gave), and rows()/reshape() make views of the same storage.
//
// HostTensor is the other direction: a read-only view of host bytes (an mmap'd checkpoint
// tensor) that a backend uploads into its own storage.
//
// An fp8_e4m3 weight carries its block scales (Fp8Scales) beside its codes, and an int4
// weight its group scales and zeros (Int4Groups), in the same memory space; a row view keeps
// those of its rows.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <stdexcept>
#include <string>

#include "kernels/dtype.h"

namespace ds::kernels {

inline constexpr int kMaxRank = 5;

class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims) {
    if (dims.size() > static_cast<size_t>(kMaxRank)) throw std::invalid_argument("Shape: rank above 5");
    for (int64_t d : dims) {
      if (d < 0) throw std::invalid_argument("Shape: negative dimension");
      dims_[rank_++] = d;
    }
  }

  int rank() const { return rank_; }
  int64_t operator[](int i) const { return dims_.at(static_cast<size_t>(i)); }
  int64_t numel() const {
    int64_t n = 1;
    for (int i = 0; i < rank_; ++i) n *= dims_[static_cast<size_t>(i)];
    return n;
  }
  // The same shape with dim 0 replaced.
  Shape with_dim0(int64_t d0) const {
    Shape s = *this;
    s.dims_[0] = d0;
    return s;
  }
  std::string str() const {
    std::string s = "[";
    for (int i = 0; i < rank_; ++i) {
      if (i) s += ", ";
      s += std::to_string(dims_[static_cast<size_t>(i)]);
    }
    return s + "]";
  }
  friend bool operator==(const Shape& a, const Shape& b) {
    if (a.rank_ != b.rank_) return false;
    for (int i = 0; i < a.rank_; ++i)
      if (a.dims_[static_cast<size_t>(i)] != b.dims_[static_cast<size_t>(i)]) return false;
    return true;
  }

 private:
  std::array<int64_t, kMaxRank> dims_{};
  int rank_ = 0;
};

// The scales of an fp8_e4m3 weight [N, K] (w = code * scale, the checkpoints'
// weight_scale_inv): element (n, k) uses data[(n >> row_shift) * cols + k / kBlockCols], f32.
// row_shift 7 is one scale per 128 x 128 block, as Qwen's FP8 releases store them; 0 is one
// per row and 128 columns, for a stacked weight whose parts' 128-row blocks do not line up
// (model/qwen35/weights.h).
struct Fp8Scales {
  static constexpr int64_t kBlockCols = 128;
  static constexpr int kBlockRowShift = 7;
  const float* data = nullptr;
  int64_t cols = 0;  // ceil(K / kBlockCols)
  int row_shift = kBlockRowShift;
  int64_t rows_for(int64_t n) const { return n > 0 ? ((n - 1) >> row_shift) + 1 : 0; }
};

// The groups of an int4 weight [N, K] (DType::int4; model/qwen35/int4.h reads GPTQ and AWQ
// checkpoints into it): the value of stored column k of row n is
// scales[n * G + k / group_size] * (code(n, k) - zeros[n * G + k / group_size]), G = K /
// group_size groups per row, f32 scales and u8 zeros row-major. perm, when set ([K]), is the
// input column each stored column multiplies (GPTQ's act order, sorted so that each group's
// columns are consecutive): the GEMM reads x[:, perm[k]] for stored column k; it is shared by
// every row. Host tensors hold the codes two per byte in stored column order (the even one in
// the low nibble); a device backend may rearrange them within each group of kInt4RowGroup rows
// (CUDA does, for its kernels: kernels/cuda/int4_gemm.cu), so a row view starts on such a
// group.
inline constexpr int64_t kInt4RowGroup = 8;
struct Int4Groups {
  const float* scales = nullptr;
  const uint8_t* zeros = nullptr;
  int64_t group_size = 0;
  const int32_t* perm = nullptr;
};

class Tensor {
 public:
  Tensor() = default;
  // storage keeps the buffer alive (its deleter frees it); data is where this tensor starts.
  Tensor(std::shared_ptr<void> storage, void* data, DType dtype, Shape shape)
      : storage_(std::move(storage)), data_(data), dtype_(dtype), shape_(shape) {}
  // An fp8_e4m3 weight [N, K] and its scales (in the same storage).
  Tensor(std::shared_ptr<void> storage, void* codes, Shape shape, Fp8Scales scales)
      : storage_(std::move(storage)), data_(codes), dtype_(DType::fp8_e4m3), shape_(shape), scales_(scales) {}
  // An int4 weight [N, K] and its groups (in the same storage).
  Tensor(std::shared_ptr<void> storage, void* codes, Shape shape, Int4Groups groups)
      : storage_(std::move(storage)), data_(codes), dtype_(DType::int4), shape_(shape), int4_(groups) {}

  bool empty() const { return data_ == nullptr; }
  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int rank() const { return shape_.rank(); }
  int64_t dim(int i) const { return shape_[i]; }
  int64_t numel() const { return shape_.numel(); }
  int64_t bytes() const { return ds::row_bytes(dtype_, numel()); }

  // Address in the backend's memory space (host for cpu, device for cuda).
  void* data() const { return data_; }
  template <class T>
  T* data_as() const { return static_cast<T*>(data_); }
  // The block scales of an fp8_e4m3 tensor (empty otherwise).
  const Fp8Scales& fp8_scales() const { return scales_; }
  // The groups of an int4 tensor (empty otherwise).
  const Int4Groups& int4_groups() const { return int4_; }

  // Rows [first, first + count) along dim 0, sharing the storage.
  Tensor rows(int64_t first, int64_t count) const {
    if (rank() < 1 || first < 0 || count < 0 || first + count > dim(0))
      throw std::out_of_range("Tensor::rows: rows [" + std::to_string(first) + ", " +
                              std::to_string(first + count) + ") outside " + shape_.str());
    const int64_t row_elems = dim(0) > 0 ? numel() / dim(0) : 0;
    auto* base = static_cast<unsigned char*>(data_);
    Tensor t(storage_, base + ds::row_bytes(dtype_, first * row_elems), dtype_, shape_.with_dim0(count));
    if (dtype_ == DType::fp8_e4m3) {
      // A view starts on a row of scales.
      if (first % (int64_t{1} << scales_.row_shift) != 0)
        throw std::out_of_range("Tensor::rows: fp8 rows from " + std::to_string(first) + " split a block of scales");
      t.scales_ = scales_;
      t.scales_.data += (first >> scales_.row_shift) * scales_.cols;
    }
    if (dtype_ == DType::int4) {
      if (first % kInt4RowGroup != 0)
        throw std::out_of_range("Tensor::rows: int4 rows from " + std::to_string(first) + " split a group of " +
                                std::to_string(kInt4RowGroup) + " rows");
      const int64_t groups = dim(1) / int4_.group_size;
      t.int4_ = int4_;
      t.int4_.scales += first * groups;
      t.int4_.zeros += first * groups;
    }
    return t;
  }
  // The same elements under another shape with as many elements.
  Tensor reshape(Shape s) const {
    if (s.numel() != numel() || ((dtype_ == DType::fp8_e4m3 || dtype_ == DType::int4) && !(s == shape_)))
      throw std::invalid_argument("Tensor::reshape: " + shape_.str() + " to " + s.str());
    Tensor t(storage_, data_, dtype_, s);
    t.scales_ = scales_;
    t.int4_ = int4_;
    return t;
  }

 private:
  std::shared_ptr<void> storage_;
  void* data_ = nullptr;
  DType dtype_ = DType::f32;
  Shape shape_;
  Fp8Scales scales_;
  Int4Groups int4_;
};

// Read-only host bytes of one tensor in a stored type (a checkpoint tensor), to be uploaded.
struct HostTensor {
  HostTensor() = default;
  HostTensor(DType t, Shape s, const void* d, Fp8Scales sc = {}) : dtype(t), shape(s), data(d), scales(sc) {}
  HostTensor(Shape s, const void* codes, Int4Groups g) : dtype(DType::int4), shape(s), data(codes), int4(g) {}
  // f32, bf16, f16, fp8_e4m3 (2-D, with host scales) or int4 (2-D, with host groups)
  DType dtype = DType::f32;
  Shape shape;
  const void* data = nullptr;
  Fp8Scales scales;
  Int4Groups int4;
  int64_t bytes() const { return ds::row_bytes(dtype, shape.numel()); }
};

}  // namespace ds::kernels
