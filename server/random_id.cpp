#include "server/random_id.h"

#include <random>

namespace ds::server {

std::string random_id(std::string_view prefix, int length) {
  static constexpr std::string_view kAlphabet =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::uniform_int_distribution<size_t> pick(0, kAlphabet.size() - 1);
  std::string out(prefix);
  for (int i = 0; i < length; ++i) out.push_back(kAlphabet[pick(rng)]);
  return out;
}

}  // namespace ds::server
