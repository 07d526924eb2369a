// The engine's side of images (engine.h, scheduler.h "Images"): before a step's forward,
// each image its chunks reach gets its encoder output -- from the encoder cache, or encoded
// now, all the step's new images in one call of the vision encoder -- and the request keeps it
// until its prefill has read past the image, then lets it go (the cache may still hold it).
#include <algorithm>
#include <chrono>
#include <functional>
#include <string>
#include <unordered_map>

#include <spdlog/spdlog.h>

#include "scheduler/engine_core.h"

namespace ds::scheduler {

SequenceImages Engine::Core::sequence_images(const Request& r) {
  SequenceImages out;
  const MultimodalInput& mm = *r.multimodal;
  out.key_tokens.assign(r.prompt->begin(), r.prompt->end());
  for (size_t k = 0; k < mm.images.size(); ++k) {
    const qwen35::PromptImageSpan& span = mm.layout.images[k];
    out.spans.push_back({span.offset, span.tokens()});
    // The pads as the prefix cache sees them: negative ids (never a token) drawn from the
    // image's hash, so two prompts match through an image only if it is the same image.
    const uint64_t h = std::hash<std::string>{}(mm.images[k].hash);
    for (int64_t j = 0; j < span.tokens(); ++j) {
      uint64_t x = h + 0x9E3779B97F4A7C15ull * static_cast<uint64_t>(j + 1);
      x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
      x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
      x ^= x >> 31;
      out.key_tokens[static_cast<size_t>(span.offset + j)] = -1 - static_cast<int32_t>(x & 0x3fffffff);
    }
  }
  return out;
}

bool Engine::Core::prepare_images(const StepPlan& plan) {
  struct Want {
    Live* live;
    Sequence* seq;
    size_t image;
  };
  std::vector<const vision::ProcessedImage*> todo;
  std::vector<std::string> todo_hash;
  std::unordered_map<std::string, size_t> todo_index;
  std::vector<std::pair<Want, size_t>> waiting;  // who gets which new encoding
  for (size_t i = 0; i < plan.chunks.size(); ++i) {
    const SequenceChunk& c = plan.chunks[i];
    Sequence* seq = plan.sequences[i];
    auto it = live_.find(seq->id);
    if (it == live_.end() || !it->second.mm) continue;
    Live& l = it->second;
    if (c.n_cached >= l.mm->layout.mrope.end) continue;
    for (size_t k : l.mm->layout.images_in(c.n_cached, c.n_tokens())) {
      if (!l.image_embeds[k].empty()) continue;
      const RequestImage& im = l.mm->images[k];
      if (kernels::Tensor t = encoder_cache_.find(im.hash); !t.empty()) {
        l.image_embeds[k] = t;
        seq->images[k].ready = true;
        continue;
      }
      auto [pos, fresh] = todo_index.emplace(im.hash, todo.size());
      if (fresh) {
        todo.push_back(im.pixels.get());
        todo_hash.push_back(im.hash);
      }
      waiting.push_back({{&l, seq, k}, pos->second});
    }
  }
  if (todo.empty()) return true;
  const auto t0 = Clock::now();
  std::vector<kernels::Tensor> out;
  try {
    out = model_.encode_images(todo);
    if (out.size() != todo.size()) throw std::logic_error("the encoder returned another number of images");
  } catch (const std::exception& e) {
    ++counters_.forward_errors_total;
    counters_.last_error = e.what();
    spdlog::error("engine: the vision encoder failed on {} images: {}", todo.size(), e.what());
    std::vector<RequestId> ids;
    for (const Sequence* s : plan.sequences) ids.push_back(s->id);
    for (RequestId id : ids) fail_request(id, std::string("vision encoder error: ") + e.what());
    return false;
  }
  counters_.encoder_seconds_total += std::chrono::duration<double>(Clock::now() - t0).count();
  counters_.images_encoded_total += static_cast<int64_t>(todo.size());
  for (size_t i = 0; i < todo.size(); ++i) encoder_cache_.insert(todo_hash[i], out[i]);
  for (const auto& [w, i] : waiting) {
    w.live->image_embeds[w.image] = out[i];
    w.seq->images[w.image].ready = true;
  }
  return true;
}

void Engine::Core::load_batch(const StepPlan& plan) {
  batch_.seqs.assign(plan.chunks.begin(), plan.chunks.end());
  batch_.embeddings.clear();
  chunk_rows_.resize(std::max(chunk_rows_.size(), plan.chunks.size()));
  for (size_t i = 0; i < plan.chunks.size(); ++i) {
    const auto it = live_.find(plan.sequences[i]->id);
    if (it == live_.end() || !it->second.mm) continue;
    SequenceChunk& c = batch_.seqs[i];
    std::vector<qwen35::EmbeddingRows>& rows = chunk_rows_[i];
    rows.clear();
    const qwen35::MultimodalPrompt& mm = it->second.mm->layout;
    if (c.n_cached < mm.mrope.end) {
      mm.chunk_embeddings(c.n_cached, c.n_tokens(), it->second.image_embeds, rows);
      c.mrope_positions = mm.chunk_positions(c.n_cached, c.n_tokens());
    }
    c.rope_delta = mm.mrope.delta;
    if (rows.empty()) continue;
    batch_.embeddings.resize(plan.chunks.size());
    batch_.embeddings[i] = rows;
  }
}

void Engine::Core::release_images() {
  for (auto& [id, l] : live_) {
    if (!l.mm || l.image_embeds.empty()) continue;
    Sequence* s = scheduler_.find(id);
    if (!s || s->num_computed < l.mm->layout.mrope.end) continue;
    for (auto& t : l.image_embeds) t = kernels::Tensor();
    for (auto& im : s->images) im.ready = false;
  }
}

}  // namespace ds::scheduler
