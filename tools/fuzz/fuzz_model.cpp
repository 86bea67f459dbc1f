#include "fuzz_model.hpp"
#include "fuzz_host_access.hpp"

#include "warpvm/detail/core/geometry.hpp"
#include "warpvm/detail/core/page_table.hpp"

#include <algorithm>
#include <cstring>
#include <sstream>
#include <unordered_map>

namespace warpvm::fuzz {
namespace {

/// The reference executor: one thread's accesses straight on the model's bytes.
class ModelExecutor : public HostElementAccess<ModelExecutor> {
 public:
  ModelExecutor(const Program& p, std::vector<std::vector<std::byte>>& objects) : p_(p), objects_(objects) {}

  [[nodiscard]] const Program& program() const { return p_; }
  template <class T>
  ElementRef<T> at(std::uint32_t o, std::uint64_t i) {
    return ElementRef<T>(objects_[o].data() + i * sizeof(T));
  }
  template <class T, class Op>
  auto on_element(std::uint32_t o, std::uint64_t i, bool /*write*/, Op&& op) {
    return op(at<T>(o, i));
  }

  template <class T>
  struct Span {
    ModelExecutor* x;
    std::uint32_t o;
    std::uint64_t first_index;
    [[nodiscard]] std::uint64_t first() const { return first_index; }
    ElementRef<T> operator[](std::uint32_t j) const { return x->at<T>(o, first_index + j); }
  };
  template <class T, access A, class F>
  void with_span(std::uint32_t o, std::uint64_t i, F&& f) {
    Span<T> s{this, o, p_.page_of(o, i) << p_.element_shift[o]};
    f(s);
  }
  template <class T>
  struct Cursor {
    ModelExecutor* x;
    std::uint32_t o;
    ElementRef<T> operator[](std::uint64_t i) const { return x->at<T>(o, i); }
    void release() {}
  };
  template <class T, access A, class F>
  void with_cursor(std::uint32_t o, F&& f) {
    Cursor<T> c{this, o};
    f(c);
  }
 private:
  const Program& p_;
  std::vector<std::vector<std::byte>>& objects_;
};

/// Word w of object o's initial content: one mix per 8 bytes, cheap enough to fill a GiB.
std::uint64_t initial_word(std::uint64_t object_key, std::uint64_t w) { return mix(object_key ^ w); }

std::string key_name(std::uint64_t key) {
  if (key == detail::empty_page_key) return "(none)";
  return "object#" + std::to_string(detail::key_object(key)) + " page " + std::to_string(detail::key_page(key));
}

}  // namespace

ReferenceModel::ReferenceModel(const RunConfig& config) : config_(config), objects_(object_count) {
  for (std::uint32_t o = 0; o < object_count; ++o) {
    std::vector<std::byte>& bytes = objects_[o];
    bytes.resize(config.object_bytes(o));
    const std::uint64_t key = draw(config.seed, tag_initial, o);
    for (std::uint64_t w = 0; w * 8 < bytes.size(); ++w) {
      const std::uint64_t word = initial_word(key, w);
      std::memcpy(bytes.data() + w * 8, &word, std::min<std::size_t>(8, bytes.size() - w * 8));
    }
  }
}

std::vector<std::uint64_t> ReferenceModel::run_launch(std::uint32_t launch) {
  const Program p = config_.program(launch);
  std::vector<std::uint64_t> digests(p.threads);
  for (std::uint32_t t = 0; t < p.threads; ++t) {
    ModelExecutor x(p, objects_);
    digests[t] = run_thread(p, t, x);
  }
  return digests;
}

std::vector<HostWrite> ReferenceModel::host_writes(std::uint32_t launch) {
  Choices pick(draw(config_.seed, 0x686f737400ull, launch));
  std::vector<HostWrite> writes;
  for (std::uint32_t o = 0; o < object_count; ++o) {
    if (pick.below(2) != 0) continue;
    std::vector<std::byte>& bytes = objects_[o];
    // A whole page (the last may be partial), or a few scattered elements.
    const bool whole_page = pick.below(4) == 0;
    const std::uint64_t size = whole_page ? config_.shape.page_bytes : element_sizes[o];
    for (std::uint64_t n = whole_page ? 1 : 1 + pick.below(16); n > 0; --n) {
      const std::uint64_t offset = pick.below((bytes.size() + size - 1) / size) * size;
      const std::uint64_t length = std::min<std::uint64_t>(size, bytes.size() - offset);
      for (std::uint64_t b = 0; b < length; ++b) bytes[offset + b] = static_cast<std::byte>(pick.next());
      writes.push_back({o, offset, length});
    }
  }
  return writes;
}

std::string check_cache(const RunConfig& config, const ReferenceModel& model, const CacheSnapshot& cache,
                        bool flushed) {
  std::ostringstream bad;
  // Each problem after the first is appended with a separator; a report past this size is enough.
  constexpr std::streamoff enough = 2000;
  const auto fail = [&]() -> std::ostream& { return bad << (bad.tellp() > 0 ? "; " : ""); };
  std::unordered_map<std::uint64_t, std::uint32_t> frame_of;
  for (std::uint32_t f = 0; f < cache.owners.size(); ++f) {
    const std::uint64_t key = cache.owners[f];
    if (key == detail::empty_page_key) {
      if (cache.dirty[f] != 0) fail() << "free frame " << f << " is dirty";
      continue;
    }
    if (f == cache.cache_frames) fail() << "the scratch frame holds " << key_name(key);
    if (flushed && cache.dirty[f] != 0) fail() << "frame " << f << " (" << key_name(key) << ") dirty after flush";
    const auto [seen, fresh] = frame_of.emplace(key, f);
    if (!fresh) fail() << key_name(key) << " in frames " << seen->second << " and " << f;
  }
  for (std::uint32_t o = 0; o < object_count && bad.tellp() < enough; ++o) {
    const CacheSnapshot::Object& object = cache.objects[o];
    const std::span<const std::byte> expected = model.bytes(o);
    for (std::uint64_t page = 0; page < object.states.size() && bad.tellp() < enough; ++page) {
      const std::uint32_t word = object.states[page];
      const std::uint64_t key = detail::make_page_key(object.id, page);
      const auto found = frame_of.find(key);
      const bool in_frame = found != frame_of.end();
      if (detail::page_word::holders(word) != 0 || detail::page_word::is_busy(word))
        fail() << key_name(key) << " left held or busy (state 0x" << std::hex << word << std::dec << ")";
      if (detail::page_word::is_resident(word) != in_frame)
        fail() << key_name(key) << (in_frame ? " in a frame but not resident" : " resident but in no frame");
      if (in_frame) {
        const bool own_frame = found->second > cache.cache_frames;
        if (object.placement == Placement::remote) fail() << key_name(key) << " cached, but the object is remote";
        else if (own_frame != (object.placement == Placement::resident))
          fail() << key_name(key) << " in frame " << found->second << ", not a frame of its placement "
                 << to_string(object.placement);
      }
      const std::uint64_t begin = page * config.shape.page_bytes;
      const std::uint64_t length = std::min<std::uint64_t>(config.shape.page_bytes, expected.size() - begin);
      if (std::memcmp(object.host.data() + begin, expected.data() + begin, length) == 0) continue;
      if (!in_frame || cache.dirty[found->second] == 0) {
        std::uint64_t at = begin;
        while (object.host[at] == expected[at]) ++at;
        fail() << key_name(key) << ": host memory differs from the model at byte " << at << " of the object, and the "
               << (in_frame ? "page's frame is clean" : "page is not cached");
      }
    }
  }
  return bad.str();
}

}  // namespace warpvm::fuzz
