// BlockTableMirror: the device copy of the batch's block tables and sequence lengths, kept
// in step with the host by uploading only the entries that changed.
//
// Rows are sequence slots chosen by the caller (the engine keeps a row per running
// sequence). Each row holds up to max_blocks_per_row int32 block ids and a length. Edits
// change the host shadow and mark entries dirty; sync() copies the dirty (index, value)
// pairs through one pinned buffer in one transfer and scatters them with one small kernel,
// so a decode step that adds a block to a few sequences uploads a few words, not the table.
// device_table() / device_seq_lens() / stride() plug into DecodeQuery. Block ids are checked
// on the host against [0, num_blocks) when they are set (std::out_of_range).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace ds::cuda {

class BlockTableMirror {
 public:
  BlockTableMirror(int32_t max_rows, int32_t max_blocks_per_row, int64_t num_blocks);
  ~BlockTableMirror();
  BlockTableMirror(const BlockTableMirror&) = delete;
  BlockTableMirror& operator=(const BlockTableMirror&) = delete;

  // Replaces row `row` with `ids` (entries that keep their value are not re-uploaded).
  void set_blocks(int32_t row, std::span<const int32_t> ids);
  // Appends one block id to a row.
  void append_block(int32_t row, int32_t id);
  void set_seq_len(int32_t row, int32_t len);
  // Forgets a row's blocks and length (a finished sequence).
  void clear_row(int32_t row);

  // Uploads every change since the last sync on `stream`; returns the number of int32
  // entries (block ids and lengths) sent.
  int64_t sync(void* stream);

  const int32_t* device_table() const { return dev_ + max_rows_; }
  const int32_t* device_seq_lens() const { return dev_; }
  int32_t stride() const { return max_blocks_; }
  int32_t max_rows() const { return max_rows_; }
  std::span<const int32_t> blocks(int32_t row) const;
  int32_t seq_len(int32_t row) const;

 private:
  void check_row(int32_t row) const;
  void put(int64_t index, int32_t value);

  int32_t max_rows_, max_blocks_;
  int64_t num_blocks_;
  std::vector<int32_t> host_;     // [max_rows] lengths, then [max_rows, max_blocks] ids
  std::vector<int32_t> n_blocks_; // ids in use per row
  std::vector<uint8_t> dirty_;
  std::vector<int32_t> dirty_list_;
  int32_t* dev_ = nullptr;
  int32_t* dev_pairs_ = nullptr;
  int32_t* pinned_ = nullptr;
  int64_t pair_capacity_ = 0;
  void* event_ = nullptr;
};

}  // namespace ds::cuda
