// SafetensorsFile header validation: every corrupt file is a clear error naming the file.
#include <catch2/catch.hpp>

#include "model/qwen35/safetensors_file.h"
#include "tests/model/st_writer.h"

using Catch::Matchers::Contains;
using ds::qwen35::SafetensorsFile;
using ds::qwen35::StDType;
namespace t = ds::test;

namespace {
const std::vector<uint8_t> kEightFloats(32, 0);
}

TEST_CASE("safetensors: the bundled checkpoint parses with its real shapes and types", "[safetensors]") {
  const SafetensorsFile f(t::tiny_dir() / "model.safetensors");
  const auto* emb = f.find("model.language_model.embed_tokens.weight");
  REQUIRE(emb);
  CHECK(emb->dtype == StDType::bf16);
  CHECK(emb->shape == std::vector<int64_t>{1024, 128});
  CHECK(emb->bytes == 1024u * 128u * 2u);
  CHECK(f.find("model.visual.blocks.0.attn.qkv.weight"));
  CHECK_FALSE(f.find("__metadata__"));
}

TEST_CASE("safetensors: a written file reads back byte for byte", "[safetensors]") {
  t::TempDir dir;
  t::StTensors in;
  in["a"] = {"F32", {2, 4}, std::vector<uint8_t>(32, 7)};
  in["b"] = {"I32", {3}, std::vector<uint8_t>(12, 9)};
  in["empty"] = {"F32", {0, 4}, {}};
  t::write_safetensors(dir / "x.safetensors", in);
  const auto out = t::read_safetensors(dir / "x.safetensors");
  REQUIRE(out.size() == 3);
  CHECK(out.at("a").bytes == in["a"].bytes);
  CHECK(out.at("b").dtype == "I32");
  CHECK(out.at("empty").shape == std::vector<int64_t>{0, 4});
}

TEST_CASE("safetensors: corrupt files fail with a message, not a crash", "[safetensors]") {
  t::TempDir dir;
  const auto p = dir / "bad.safetensors";
  auto open_error = [&]() -> std::string {
    try {
      SafetensorsFile f(p);
    } catch (const std::runtime_error& e) {
      return e.what();
    }
    return "no error";
  };

  SECTION("missing file") {
    CHECK_THAT(open_error(), Contains("bad.safetensors") && Contains("cannot open"));
  }
  SECTION("shorter than the length field") {
    t::write_text(p, "abc");
    CHECK_THAT(open_error(), Contains("too short"));
  }
  SECTION("truncated: the real checkpoint cut in half") {
    const std::string whole = t::read_text(t::tiny_dir() / "model.safetensors");
    t::write_text(p, whole.substr(0, whole.size() / 2));
    CHECK_THAT(open_error(), Contains("bad.safetensors") && Contains("past the end of the data") &&
                                 Contains("truncated"));
  }
  SECTION("truncated inside the header") {
    const std::string whole = t::read_text(t::tiny_dir() / "model.safetensors");
    t::write_text(p, whole.substr(0, 1000));
    CHECK_THAT(open_error(), Contains("header length") && Contains("runs past the end of the file"));
  }
  SECTION("header length past the end of the file") {
    t::write_raw_safetensors(p, 1u << 20, "{}", {});
    CHECK_THAT(open_error(), Contains("header length 1048576 runs past the end of the file"));
  }
  SECTION("header length of 2^64 - 1") {
    t::write_raw_safetensors(p, ~uint64_t{0}, "{}", {});
    CHECK_THAT(open_error(), Contains("runs past the end of the file"));
  }
  SECTION("header is not JSON") {
    const std::string h = "{\"a\": [1, 2";
    t::write_raw_safetensors(p, h.size(), h, {});
    CHECK_THAT(open_error(), Contains("not valid JSON"));
  }
  SECTION("header is not an object") {
    const std::string h = "[1, 2]";
    t::write_raw_safetensors(p, h.size(), h, {});
    CHECK_THAT(open_error(), Contains("not a JSON object"));
  }
  SECTION("offsets out of range") {
    const std::string h = R"({"w": {"dtype": "F32", "shape": [8], "data_offsets": [0, 64]}})";
    t::write_raw_safetensors(p, h.size(), h, kEightFloats);
    CHECK_THAT(open_error(), Contains("tensor w") && Contains("run past the end of the data"));
  }
  SECTION("offsets reversed") {
    const std::string h = R"({"w": {"dtype": "F32", "shape": [0], "data_offsets": [8, 0]}})";
    t::write_raw_safetensors(p, h.size(), h, kEightFloats);
    CHECK_THAT(open_error(), Contains("reversed"));
  }
  SECTION("negative offset") {
    const std::string h = R"({"w": {"dtype": "F32", "shape": [8], "data_offsets": [-4, 28]}})";
    t::write_raw_safetensors(p, h.size(), h, kEightFloats);
    CHECK_THAT(open_error(), Contains("non-negative integers"));
  }
  SECTION("shape and byte count disagree") {
    const std::string h = R"({"w": {"dtype": "BF16", "shape": [8], "data_offsets": [0, 32]}})";
    t::write_raw_safetensors(p, h.size(), h, kEightFloats);
    CHECK_THAT(open_error(), Contains("tensor w: holds 32 bytes but BF16 [8] needs 16"));
  }
  SECTION("shape that overflows 64 bits") {
    const std::string h =
        R"({"w": {"dtype": "F32", "shape": [4294967296, 4294967296, 16], "data_offsets": [0, 32]}})";
    t::write_raw_safetensors(p, h.size(), h, kEightFloats);
    CHECK_THAT(open_error(), Contains("too large"));
  }
  SECTION("negative dimension") {
    const std::string h = R"({"w": {"dtype": "F32", "shape": [-8], "data_offsets": [0, 32]}})";
    t::write_raw_safetensors(p, h.size(), h, kEightFloats);
    CHECK_THAT(open_error(), Contains("non-integer or negative dimension"));
  }
  SECTION("unknown dtype") {
    const std::string h = R"({"w": {"dtype": "F12", "shape": [8], "data_offsets": [0, 32]}})";
    t::write_raw_safetensors(p, h.size(), h, kEightFloats);
    CHECK_THAT(open_error(), Contains("unsupported dtype F12"));
  }
  SECTION("missing fields") {
    const std::string h = R"({"w": {"dtype": "F32", "data_offsets": [0, 32]}})";
    t::write_raw_safetensors(p, h.size(), h, kEightFloats);
    CHECK_THAT(open_error(), Contains("tensor w: no shape"));
  }
  SECTION("overlapping tensors") {
    const std::string h = R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
                              "b": {"dtype": "F32", "shape": [4], "data_offsets": [8, 24]}})";
    t::write_raw_safetensors(p, h.size(), h, kEightFloats);
    CHECK_THAT(open_error(), Contains("tensors a and b overlap"));
  }
  SECTION("a name given twice") {
    const std::string h = R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
                              "a": {"dtype": "F32", "shape": [4], "data_offsets": [16, 32]}})";
    t::write_raw_safetensors(p, h.size(), h, kEightFloats);
    CHECK_THAT(open_error(), Contains("tensor a appears twice"));
  }
}
