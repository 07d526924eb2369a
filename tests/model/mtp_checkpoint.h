// The bundled tiny checkpoint with an MTP module added (config.json's mtp_num_hidden_layers =
// 1 and random mtp.* tensors in f32), for the tests of the module and of the "mtp" drafter.
// The module is random apart from fc's hidden-state half, which is near the identity (so its
// output is not noise around a tiny residual).
#pragma once

#include <cstdint>
#include <filesystem>

#include "tests/model/st_writer.h"

namespace ds::test {

// Writes config.json, generation_config.json and model.safetensors into dir.
void write_tiny_mtp_checkpoint(const std::filesystem::path& dir, uint32_t seed = 1);
// The mtp.* tensors write_tiny_mtp_checkpoint adds, as written.
StTensors tiny_mtp_tensors(uint32_t seed = 1);

}  // namespace ds::test
