#include "fuzz_sim.hpp"
#include "fuzz_host_access.hpp"

#include "warpvm/detail/core/frame_table.hpp"
#include "warpvm/detail/core/geometry.hpp"
#include "warpvm/detail/core/page_table.hpp"
#include "warpvm/detail/policy/victim.hpp"

#include <ucontext.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <stdexcept>

namespace warpvm::fuzz {
namespace {

/// Cooperative threads on one OS thread, switched in an order drawn from a seed. A fiber calls
/// yield() after a step that may let others progress, and wait() while it waits for another
/// fiber; when only waits happen for long, nobody can progress: run() reports a hang.
class Fibers {
 public:
  /// Runs body(0) .. body(count - 1), one fiber each, to completion.
  void run(std::uint64_t seed, std::uint32_t count, const std::function<void(std::uint32_t)>& body) {
    body_ = &body;
    fibers_.clear();
    fibers_.resize(count);
    std::vector<std::uint32_t> live(count);
    for (std::uint32_t f = 0; f < count; ++f) {
      prepare(fibers_[f]);
      live[f] = f;
    }
    Choices order(draw(seed, 0x6669626572ull));
    waits_in_a_row_ = 0;
    Fibers* outer = current_;
    current_ = this;
    while (!live.empty()) {
      const std::uint64_t pick = order.below(live.size());
      running_ = live[pick];
      swapcontext(&scheduler_, &fibers_[running_].context);
      if (fibers_[running_].done) {
        live[pick] = live.back();
        live.pop_back();
      } else if (waits_in_a_row_ > stall_limit + 64 * live.size()) {
        current_ = outer;
        throw std::runtime_error("no progress: " + std::to_string(live.size()) +
                                 " simulated threads waited for pages (or frames) and none came");
      }
    }
    current_ = outer;
  }

  /// A step that may let other fibers progress.
  static void yield() {
    current_->waits_in_a_row_ = 0;
    current_->switch_out();
  }
  /// A step of waiting for another fiber.
  static void wait() {
    ++current_->waits_in_a_row_;
    current_->switch_out();
  }

 private:
  static constexpr std::size_t stack_bytes = 256 * 1024;
  static constexpr std::uint64_t stall_limit = 1u << 20;

  struct Fiber {
    ucontext_t context{};
    std::unique_ptr<char[]> stack;
    bool done = false;
  };

  /// getcontext returns twice, so it stays out of run(), whose locals it could clobber.
  [[gnu::noinline]] void prepare(Fiber& fiber) {
    fiber.stack = std::make_unique<char[]>(stack_bytes);
    getcontext(&fiber.context);
    fiber.context.uc_stack.ss_sp = fiber.stack.get();
    fiber.context.uc_stack.ss_size = stack_bytes;
    fiber.context.uc_link = &scheduler_;
    makecontext(&fiber.context, &Fibers::entry, 0);
  }
  static void entry() {
    Fibers& self = *current_;
    const std::uint32_t index = self.running_;
    (*self.body_)(index);
    self.fibers_[index].done = true;
    self.waits_in_a_row_ = 0;
  }
  void switch_out() { swapcontext(&fibers_[running_].context, &scheduler_); }

  static thread_local Fibers* current_;
  ucontext_t scheduler_{};
  std::vector<Fiber> fibers_;
  const std::function<void(std::uint32_t)>* body_ = nullptr;
  std::uint32_t running_ = 0;
  std::uint64_t waits_in_a_row_ = 0;
};
thread_local Fibers* Fibers::current_ = nullptr;

/// What a holder will do with its page.
enum class Use : std::uint8_t { read, write, overwrite };

constexpr Use use_of(access mode) {
  return mode == access::read ? Use::read : mode == access::read_write ? Use::write : Use::overwrite;
}

constexpr std::uint64_t max_resident_pages = 64;

/// The page cache on the CPU, through the library's page-state and victim code.
class SimCache {
 public:
  /// A page held by one simulated lane (or, for a remote object, its host memory, not held).
  struct Hold {
    std::byte* base = nullptr;  ///< the page's first byte (frame or host memory)
    std::uint32_t object = 0;
    std::uint64_t page = ~std::uint64_t{0};
    std::uint32_t frame = 0;
    bool held = false;
  };

  SimCache(const RunConfig& config, const ReferenceModel& model)
      : config_(config), page_bytes_(config.shape.page_bytes), cache_frames_(config.frames) {
    std::uint32_t next_resident = cache_frames_ + 1;  // past the scratch frame
    for (std::uint32_t o = 0; o < object_count; ++o) {
      Object& object = objects_[o];
      object.placement = config.placements[0][o];
      object.pages.assign(config.object_pages(o), detail::PageEntry{0, 0});
      object.host.assign(model.bytes(o).begin(), model.bytes(o).end());
      if (config.object_pages(o) <= max_resident_pages) {
        object.resident_first = next_resident;
        next_resident += static_cast<std::uint32_t>(config.object_pages(o));
      }
    }
    const std::uint32_t all_frames = next_resident;
    owner_.assign(all_frames, detail::empty_page_key);
    lock_.assign(all_frames, 0);
    referenced_.assign(all_frames, 0);
    dirty_.assign(all_frames, 0);
    frames_.assign(std::size_t{all_frames} * page_bytes_, std::byte{0});
    table_ = detail::FrameTable{owner_.data(), lock_.data(), referenced_.data(), dirty_.data(), &hand_, cache_frames_};
  }

  Hold hold(std::uint32_t o, std::uint64_t page, Use use) {
    Fibers::yield();
    Object& object = objects_[o];
    Hold h{nullptr, o, page, 0, false};
    if (object.placement == Placement::remote) {
      h.base = object.host.data() + page * page_bytes_;
      return h;
    }
    std::uint32_t& word = object.pages[page].state;
    bool fill_it = false;
    bool hit = false;
    switch (detail::classify(detail::page_acquire(word, 1))) {
      case detail::AcquireOutcome::hit: hit = true; break;
      case detail::AcquireOutcome::fetch: fill_it = detail::page_try_begin_fetch(word); break;
      case detail::AcquireOutcome::wait: break;
    }
    if (!hit && !fill_it) {
      for (;;) {
        Fibers::wait();
        const std::uint32_t now = detail::page_load(word);
        if (detail::page_word::is_resident(now)) break;
        if (detail::page_word::is_absent(now) && detail::page_try_begin_fetch(word)) {
          fill_it = true;
          break;
        }
      }
    }
    h.frame = fill_it ? fill(o, page, use != Use::overwrite) : object.pages[page].frame;
    if (!fill_it && config_.shape.eviction == EvictionPolicy::clock) table_.set_referenced(h.frame, true);
    if (use != Use::read) table_.set_dirty(h.frame, true);
    h.base = frame_data(h.frame);
    h.held = true;
    return h;
  }

  /// Lets go of a hold; an overwrite's is written behind first when its holder is the only one
  /// (array<T>::write_behind's rule).
  void release(Hold& h, Use use) {
    if (h.held) {
      std::uint32_t& word = objects_[h.object].pages[h.page].state;
      if (use == Use::overwrite) {
        table_.set_dirty(h.frame, false);
        if (detail::page_word::holders(detail::page_load(word)) == 1) write_back(h.frame, owner_[h.frame]);
        else table_.set_dirty(h.frame, true);
      }
      detail::page_release(word, 1);
      Fibers::yield();
    }
    h = Hold{};
  }

  bool set_placement(std::uint32_t o, Placement placement) {
    Object& object = objects_[o];
    if (placement == Placement::resident && object.resident_first == 0) return false;
    if (!(is_cached(placement) && is_cached(object.placement))) write_back_and_drop(o);
    object.placement = placement;
    return true;
  }
  void flush() {
    for (std::uint32_t f = 0; f < owner_.size(); ++f)
      if (owner_[f] != detail::empty_page_key && dirty_[f] != 0) {
        write_back(f, owner_[f]);
        dirty_[f] = 0;
      }
  }
  void drop_cached() {
    flush();
    for (std::uint32_t o = 0; o < object_count; ++o) drop_object_pages(o);
  }

  CacheSnapshot snapshot() const {
    CacheSnapshot s;
    s.cache_frames = cache_frames_;
    s.owners = owner_;
    s.dirty = dirty_;
    for (std::uint32_t o = 0; o < object_count; ++o) {
      const Object& object = objects_[o];
      CacheSnapshot::Object view{o, object.placement, {}, object.host};
      for (const detail::PageEntry& entry : object.pages) view.states.push_back(entry.state);
      s.objects.push_back(std::move(view));
    }
    return s;
  }
  std::span<std::byte> host(std::uint32_t o) { return objects_[o].host; }
  [[nodiscard]] std::uint64_t bytes_moved() const { return bytes_moved_; }
  [[nodiscard]] std::uint64_t pages_in() const { return pages_in_; }

 private:
  struct Object {
    Placement placement = Placement::migrate;
    std::vector<detail::PageEntry> pages;
    std::vector<std::byte> host;
    std::uint32_t resident_first = 0;  ///< 0: the object may not be resident
  };

  std::byte* frame_data(std::uint32_t f) { return frames_.data() + std::size_t{f} * page_bytes_; }
  std::uint32_t& word_of(std::uint64_t key) {
    return objects_[detail::key_object(key)].pages[detail::key_page(key)].state;
  }
  std::uint64_t bytes_in_page(std::uint32_t o, std::uint64_t page) const {
    return detail::PageGeometry{detail::log2_exact(page_bytes_)}.bytes_in_page(page, objects_[o].host.size());
  }
  void write_back(std::uint32_t f, std::uint64_t key) {
    const std::uint32_t o = detail::key_object(key);
    const std::uint64_t page = detail::key_page(key);
    const std::uint64_t bytes = bytes_in_page(o, page);
    std::memcpy(objects_[o].host.data() + page * page_bytes_, frame_data(f), bytes);
    bytes_moved_ += bytes;
  }

  /// fill_page's steps: a frame (the object's own, or a victim), the victim written back if
  /// dirty and its eviction finished, the page copied in unless overwritten, then published.
  std::uint32_t fill(std::uint32_t o, std::uint64_t page, bool load_contents) {
    Object& object = objects_[o];
    detail::Victim victim{object.resident_first + static_cast<std::uint32_t>(page), detail::empty_page_key, false};
    if (object.placement != Placement::resident) {
      for (;;) {
        const detail::VictimSearch search =
            detail::find_victim(table_, config_.shape.eviction, false, 1024,
                                [&](std::uint64_t key) -> std::uint32_t& { return word_of(key); });
        if (search.found) {
          victim = search.victim;
          break;
        }
        Fibers::wait();
      }
    }
    Fibers::yield();  // others meet the BUSY page (and the locked frame) meanwhile
    if (victim.evicts()) {
      if (victim.dirty) write_back(victim.frame, victim.evicted_key);
      detail::page_finish_evict(word_of(victim.evicted_key));
    }
    if (load_contents) {
      const std::uint64_t bytes = bytes_in_page(o, page);
      std::memcpy(frame_data(victim.frame), object.host.data() + page * page_bytes_, bytes);
      bytes_moved_ += bytes;
    }
    ++pages_in_;
    table_.set_dirty(victim.frame, false);
    table_.set_owner(victim.frame, detail::make_page_key(o, page));
    table_.set_referenced(victim.frame, false);
    object.pages[page].frame = victim.frame;
    if (object.placement != Placement::resident) table_.unlock(victim.frame);
    detail::page_finish_fetch(object.pages[page].state);
    return victim.frame;
  }

  void write_back_and_drop(std::uint32_t o) {
    for (std::uint32_t f = 0; f < owner_.size(); ++f)
      if (owner_[f] != detail::empty_page_key && detail::key_object(owner_[f]) == o && dirty_[f] != 0) {
        write_back(f, owner_[f]);
        dirty_[f] = 0;
      }
    drop_object_pages(o);
  }
  void drop_object_pages(std::uint32_t o) {
    for (std::uint32_t f = 0; f < owner_.size(); ++f)
      if (owner_[f] != detail::empty_page_key && detail::key_object(owner_[f]) == o) {
        owner_[f] = detail::empty_page_key;
        referenced_[f] = 0;
        dirty_[f] = 0;
      }
    std::fill(objects_[o].pages.begin(), objects_[o].pages.end(), detail::PageEntry{0, 0});
  }

  const RunConfig& config_;
  std::uint64_t page_bytes_;
  std::uint32_t cache_frames_;
  Object objects_[object_count];
  std::vector<std::uint64_t> owner_;
  std::vector<std::uint32_t> lock_, referenced_, dirty_;
  std::uint64_t hand_ = 0;
  std::vector<std::byte> frames_;
  detail::FrameTable table_{};
  std::uint64_t bytes_moved_ = 0;
  std::uint64_t pages_in_ = 0;
};

/// One simulated thread's accesses, each through a hold of its page.
class SimExecutor : public HostElementAccess<SimExecutor> {
 public:
  SimExecutor(const Program& p, SimCache& cache) : p_(p), cache_(cache) {}

  [[nodiscard]] const Program& program() const { return p_; }
  template <class T, class Op>
  auto on_element(std::uint32_t o, std::uint64_t i, bool write, Op&& op) {
    const std::uint64_t page = p_.page_of(o, i);
    const Use use = write ? Use::write : Use::read;
    SimCache::Hold h = cache_.hold(o, page, use);
    const auto result = op(ElementRef<T>(h.base + (i - (page << p_.element_shift[o])) * sizeof(T)));
    cache_.release(h, use);
    return result;
  }

  template <class T>
  struct Span {
    const SimCache::Hold* hold;
    std::uint64_t first_index;
    [[nodiscard]] std::uint64_t first() const { return first_index; }
    ElementRef<T> operator[](std::uint32_t j) const { return ElementRef<T>(hold->base + std::size_t{j} * sizeof(T)); }
  };
  template <class T, access A, class F>
  void with_span(std::uint32_t o, std::uint64_t i, F&& f) {
    const std::uint64_t page = p_.page_of(o, i);
    SimCache::Hold h = cache_.hold(o, page, use_of(A));
    Span<T> s{&h, page << p_.element_shift[o]};
    f(s);
    cache_.release(h, use_of(A));
  }

  template <class T, access A>
  class Cursor {
   public:
    Cursor(SimExecutor& x, std::uint32_t o) : x_(x), o_(o) {}
    ElementRef<T> operator[](std::uint64_t i) {
      const std::uint64_t page = x_.p_.page_of(o_, i);
      if (hold_.page != page) {
        x_.cache_.release(hold_, use_of(A));
        hold_ = x_.cache_.hold(o_, page, use_of(A));
      }
      return ElementRef<T>(hold_.base + (i - (page << x_.p_.element_shift[o_])) * sizeof(T));
    }
    void release() { x_.cache_.release(hold_, use_of(A)); }

   private:
    SimExecutor& x_;
    std::uint32_t o_;
    SimCache::Hold hold_{};
  };
  template <class T, access A, class F>
  void with_cursor(std::uint32_t o, F&& f) {
    Cursor<T, A> c(*this, o);
    f(c);
    c.release();
  }

 private:
  const Program& p_;
  SimCache& cache_;
};

class SimBackend final : public Backend {
 public:
  SimBackend(const RunConfig& config, const ReferenceModel& model) : config_(config), cache_(config, model) {}

  bool set_placement(std::uint32_t o, Placement placement) override { return cache_.set_placement(o, placement); }
  std::vector<std::uint64_t> launch(const Program& program) override {
    std::vector<std::uint64_t> digests(program.threads);
    fibers_.run(draw(config_.seed, program.launch), program.threads, [&](std::uint32_t t) {
      SimExecutor x(program, cache_);
      digests[t] = run_thread(program, t, x);
    });
    return digests;
  }
  CacheSnapshot snapshot() override { return cache_.snapshot(); }
  void flush() override { cache_.flush(); }
  void drop_cached() override { cache_.drop_cached(); }
  std::span<std::byte> host(std::uint32_t o) override { return cache_.host(o); }
  std::uint64_t bytes_moved() override { return cache_.bytes_moved(); }
  std::uint64_t pages_in() override { return cache_.pages_in(); }

 private:
  const RunConfig& config_;
  SimCache cache_;
  Fibers fibers_;
};

}  // namespace

std::unique_ptr<Backend> make_sim_backend(const RunConfig& config, const ReferenceModel& model) {
  return std::make_unique<SimBackend>(config, model);
}

}  // namespace warpvm::fuzz
