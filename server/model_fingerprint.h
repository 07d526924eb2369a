// The fingerprint of a served model for the disk tier (scheduler/disk_tier.h): what its cache
// entries depend on -- config.json, each safetensors file's name, size and header (the
// tensors' names, types, shapes and offsets), --hf-overrides, and how the backend stores the
// cache (its name, the K/V and recurrent-state types, FP8 and 4-bit weights kept or not) --
// so that files written for another checkpoint, another fine-tune of the same shape, or
// another cache layout are never read as this model's. The weights' values are not hashed
// (tens of GiB at every start): a checkpoint rewritten in place with the same headers, sizes and
// config is the one case it cannot tell apart.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

namespace ds::server {

// Throws std::runtime_error when a file cannot be read.
uint64_t model_fingerprint(const std::filesystem::path& dir, const std::string& cache_layout);

}  // namespace ds::server
