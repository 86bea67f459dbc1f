#pragma once
/// @file
/// The differential fuzzer's programs: what every thread of every launch does, regenerated from
/// (seed, launch, thread, step) by a counter-based hash, so that the GPU kernel, the host
/// reference model and the simulator run the same program without shipping it anywhere.
///
/// Results are deterministic by construction, whatever the interleaving:
///  - each launch gives every element of a data object a role: frozen (anyone reads it, nobody
///    writes it) or owned by one thread (only that thread reads or writes it). A few pages are
///    overwrite pages instead, owned by one warp, which writes all of them through an
///    access::overwrite span at the start of the launch; nobody else touches them in that launch;
///  - each counter cell has a role too: a sum (fetch_add / fetch_sub by anyone), a minimum or a
///    maximum (fetch_min / fetch_max by anyone): their final values do not depend on the order;
///    or owned by one thread, which alone runs exchange, compare_exchange, fetch_add and loads on
///    it, so that the values those return are known;
///  - every thread folds each value it reads (and each value an owned atomic returns) into a
///    64-bit digest, which the host compares bit for bit with the reference model's.
/// `run_thread` is the one interpreter; an executor (GPU, reference model, simulator) supplies
/// the accesses. Everything here is __host__ __device__ and makes no CUDA runtime call.

#include "warpvm/array.hpp"
#include "warpvm/detail/host_device.hpp"

#include <cstdint>
#include <type_traits>

/// Keeps a function of the interpreter out of line (GCC, Clang and nvcc alike): nested spans and
/// cursors would otherwise inline every level into the one above, and the kernel's code, and its
/// compile time, grow with the product of the levels' variants.
#define WARPVM_FUZZ_OUT_OF_LINE __attribute__((noinline))

namespace warpvm::fuzz {

/// A 16-byte element (the largest size the fuzzer uses): two words, compared and folded whole.
struct alignas(16) Pair {
  std::uint64_t lo;
  std::uint64_t hi;
  friend WARPVM_HD bool operator==(const Pair& a, const Pair& b) { return a.lo == b.lo && a.hi == b.hi; }
};

/// The objects of every fuzz run, by index: five data objects of elements of 1, 2, 4, 8 and 16
/// bytes, then two counter objects (4- and 8-byte cells) that only atomics and their owners touch.
inline constexpr std::uint32_t data_objects = 5;
inline constexpr std::uint32_t counter_objects = 2;
inline constexpr std::uint32_t object_count = data_objects + counter_objects;
inline constexpr std::uint32_t first_counter = data_objects;
inline constexpr std::uint32_t element_sizes[object_count] = {1, 2, 4, 8, 16, 4, 8};
inline constexpr std::uint32_t warp_size = 32;

/// Calls f.template operator()<T>() with object o's element type.
template <class F>
WARPVM_HD_INLINE void with_element_type(std::uint32_t o, F&& f) {
  switch (o) {
    case 0: f.template operator()<std::uint8_t>(); break;
    case 1: f.template operator()<std::uint16_t>(); break;
    case 2:
    case 5: f.template operator()<std::uint32_t>(); break;
    case 3:
    case 6: f.template operator()<std::uint64_t>(); break;
    default: f.template operator()<Pair>(); break;
  }
}

/// splitmix64's finaliser: the counter-based generator every decision comes from.
WARPVM_HD_INLINE constexpr std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
/// A hash of several words, order-sensitive.
WARPVM_HD_INLINE constexpr std::uint64_t draw(std::uint64_t a, std::uint64_t b, std::uint64_t c = 0,
                                              std::uint64_t d = 0, std::uint64_t e = 0) {
  return mix(mix(mix(mix(mix(a) ^ b) ^ c) ^ d) ^ e);
}

/// What a value of the decision stream is about (so that no two decisions share a hash).
enum Tag : std::uint64_t {
  tag_owner = 1,
  tag_role,
  tag_overwrite,
  tag_overwrite_owner,
  tag_counter_role,
  tag_counter_owner,
  tag_converged,
  tag_lanes,
  tag_step,
  tag_value,
  tag_overwritten,
  tag_initial,
};

/// Any value of an element type from 64 random bits (two draws for a Pair).
template <class T>
WARPVM_HD_INLINE T value_from(std::uint64_t bits) {
  if constexpr (std::is_same_v<T, Pair>) return Pair{bits, mix(bits)};
  else return static_cast<T>(bits);
}

/// Folds a value into a digest.
template <class T>
WARPVM_HD_INLINE std::uint64_t fold(std::uint64_t digest, const T& v) {
  if constexpr (std::is_same_v<T, Pair>) return mix(mix(digest ^ v.lo) ^ v.hi);
  else return mix(digest ^ static_cast<std::uint64_t>(v));
}

/// One launch of one fuzz run: everything the interpreter needs, passed to the kernel by value.
struct Program {
  std::uint64_t seed;
  std::uint32_t launch;   ///< which launch of the run (roles change from launch to launch)
  std::uint32_t threads;  ///< a multiple of warp_size
  std::uint32_t steps;    ///< top-level operations per thread
  std::uint32_t holds;    ///< pages a thread holds at once at most (Config::max_pages_held_per_thread)
  std::uint64_t elements[object_count];
  std::uint32_t element_shift[object_count];  ///< log2 of each object's elements per page

  [[nodiscard]] WARPVM_HD std::uint32_t warps() const { return threads / warp_size; }
  [[nodiscard]] WARPVM_HD std::uint64_t page_of(std::uint32_t o, std::uint64_t i) const { return i >> element_shift[o]; }
  [[nodiscard]] WARPVM_HD std::uint64_t per_page(std::uint32_t o) const { return std::uint64_t{1} << element_shift[o]; }
  [[nodiscard]] WARPVM_HD std::uint64_t pages(std::uint32_t o) const {
    return (elements[o] + per_page(o) - 1) >> element_shift[o];
  }
  [[nodiscard]] WARPVM_HD std::uint64_t hash(std::uint64_t tag, std::uint64_t a, std::uint64_t b = 0) const {
    return draw(seed, launch, tag, a, b);
  }

  // ---- data objects: roles of elements and pages in this launch ----

  /// Pages 0 .. warps-1 of a data object may be overwrite pages (one in four), each owned by a warp.
  [[nodiscard]] WARPVM_HD bool overwrite_page(std::uint32_t o, std::uint64_t page) const {
    return o < data_objects && page < warps() && page < pages(o) && hash(tag_overwrite, o, page) % 4 == 0;
  }
  [[nodiscard]] WARPVM_HD std::uint32_t overwrite_owner(std::uint32_t o, std::uint64_t page) const {
    return static_cast<std::uint32_t>((page + hash(tag_overwrite_owner, o)) % warps());
  }
  /// Half the elements are owned (read and written by their owner only), half frozen.
  [[nodiscard]] WARPVM_HD bool owned(std::uint32_t o, std::uint64_t i) const { return hash(tag_role, o, i) % 2 == 0; }
  [[nodiscard]] WARPVM_HD std::uint64_t owner_offset(std::uint32_t o) const { return hash(tag_owner, o) % threads; }
  [[nodiscard]] WARPVM_HD std::uint32_t owner(std::uint32_t o, std::uint64_t i) const {
    return static_cast<std::uint32_t>((i + owner_offset(o)) % threads);
  }
  [[nodiscard]] WARPVM_HD bool readable(std::uint32_t o, std::uint64_t i, std::uint32_t t) const {
    return !overwrite_page(o, page_of(o, i)) && (!owned(o, i) || owner(o, i) == t);
  }
  [[nodiscard]] WARPVM_HD bool writable(std::uint32_t o, std::uint64_t i, std::uint32_t t) const {
    return !overwrite_page(o, page_of(o, i)) && owned(o, i) && owner(o, i) == t;
  }
  /// An index near `k` whose owner is t (it may still be frozen or on an overwrite page), or k
  /// itself when the object is too small to have one.
  [[nodiscard]] WARPVM_HD std::uint64_t owned_index_near(std::uint32_t o, std::uint64_t k, std::uint32_t t) const {
    const std::uint64_t slot = (t + threads - owner_offset(o)) % threads;
    std::uint64_t i = k - k % threads + slot;
    if (i >= elements[o]) i = i >= threads ? i - threads : k;
    return i;
  }

  // ---- counter objects ----

  enum class CounterRole : std::uint8_t { sum, min, max, owned };
  [[nodiscard]] WARPVM_HD CounterRole counter_role(std::uint32_t o, std::uint64_t i) const {
    return static_cast<CounterRole>(hash(tag_counter_role, o, i) % 4);
  }
  [[nodiscard]] WARPVM_HD std::uint32_t counter_owner(std::uint32_t o, std::uint64_t i) const {
    return static_cast<std::uint32_t>((i + hash(tag_counter_owner, o)) % threads);
  }

  /// What the overwrite span of element i of a data object writes.
  template <class T>
  [[nodiscard]] WARPVM_HD T overwritten(std::uint32_t o, std::uint64_t i) const {
    return value_from<T>(hash(tag_overwritten, o, i));
  }
};

/// A thread's private stream of choices within one step.
class Choices {
 public:
  WARPVM_HD explicit Choices(std::uint64_t key) : key_(key) {}
  WARPVM_HD std::uint64_t next() { return mix(key_ + 0x632be59bd9b4e019ull * ++count_); }
  WARPVM_HD std::uint64_t below(std::uint64_t n) { return next() % n; }

 private:
  std::uint64_t key_;
  std::uint64_t count_ = 0;
};

/// Runs thread t's program of one launch through executor X, which provides (for element type T
/// of object o): load, store, the six atomics, with_span<T, access>(o, i, f), with_cursor<T,
/// access>(o, f) (f receives the span or cursor, held until it returns) and overwrite<T>(o, page,
/// lane, value_of). Returns the thread's digest.
template <class X>
class Interpreter {
 public:
  WARPVM_HD Interpreter(const Program& p, std::uint32_t t, X& x) : p_(p), t_(t), x_(x), digest_(draw(p.seed, p.launch, t)) {}

  WARPVM_HD std::uint64_t run() {
    overwrite_pages();
    const std::uint32_t warp = t_ / warp_size;
    const std::uint32_t lane = t_ % warp_size;
    for (std::uint32_t s = 0; s < p_.steps; ++s) {
      // Half the steps are the warp's: every lane (of a random subset, so lanes diverge) does the
      // same kind of operation on the same page, which the GPU serves with one acquisition per
      // page. The others are each thread's own.
      const bool converged = p_.hash(tag_converged, warp, s) % 2 == 0;
      if (converged && ((p_.hash(tag_lanes, warp, s) >> lane) & 1u) == 0) continue;
      Choices shared(p_.hash(tag_step, converged ? (std::uint64_t{1} << 40) | warp : t_, s));
      Choices mine(p_.hash(tag_step, t_, (std::uint64_t{1} << 32) | s));
      operation<0>(0, shared, mine);
    }
    return digest_;
  }

 private:
  enum Kind : std::uint32_t { read, store, atomic, span_read, span_write, cursor_read, cursor_write, kinds };
  /// Spans and cursors nest at most this deep (the default hold bound, 4, allows three and an element).
  static constexpr int deepest = 3;

  /// One operation at nesting level Level, with `held` pages already held by enclosing spans and
  /// cursors (held < holds). Spans and cursors run a nested operation while they hold their page
  /// when the hold budget allows one more page after theirs.
  template <int Level>
  WARPVM_HD WARPVM_FUZZ_OUT_OF_LINE void operation(std::uint32_t held, Choices& shared, Choices& mine) {
    const auto kind = static_cast<Kind>(shared.below(Level < deepest ? kinds : span_read));
    if (kind == atomic) return counter_operation(shared, mine);
    const auto o = static_cast<std::uint32_t>(shared.below(data_objects));
    // Converged steps share k (the same page for the warp); each lane then picks its element.
    const std::uint64_t k = shared.below(p_.elements[o]);
    with_element_type(o, [&]<class T>() {
      switch (kind) {
        case read: element_read<T>(o, k, mine); break;
        case store: element_store<T>(o, k, mine); break;
        case span_read: span<T, access::read, Level>(o, k, held, shared, mine); break;
        case span_write: span<T, access::read_write, Level>(o, k, held, shared, mine); break;
        case cursor_read: cursor<T, access::read, Level>(o, k, held, shared, mine); break;
        default: cursor<T, access::read_write, Level>(o, k, held, shared, mine); break;
      }
    });
  }

  /// An index of object o on k's page: t's own if it has one there, else any.
  WARPVM_HD std::uint64_t pick_in_page(std::uint32_t o, std::uint64_t k, Choices& mine) const {
    const std::uint64_t first = p_.page_of(o, k) << p_.element_shift[o];
    const std::uint64_t count = p_.elements[o] - first < p_.per_page(o) ? p_.elements[o] - first : p_.per_page(o);
    const std::uint64_t i = first + mine.below(count);
    if (mine.next() % 2 == 0) return i;
    const std::uint64_t own = p_.owned_index_near(o, i, t_);
    return p_.page_of(o, own) == p_.page_of(o, k) ? own : i;
  }

  template <class T>
  WARPVM_HD WARPVM_FUZZ_OUT_OF_LINE void element_read(std::uint32_t o, std::uint64_t k, Choices& mine) {
    const std::uint64_t i = pick_in_page(o, k, mine);
    if (p_.readable(o, i, t_)) digest_ = fold(digest_, x_.template load<T>(o, i));
  }
  template <class T>
  WARPVM_HD WARPVM_FUZZ_OUT_OF_LINE void element_store(std::uint32_t o, std::uint64_t k, Choices& mine) {
    const std::uint64_t i = pick_in_page(o, k, mine);
    if (p_.writable(o, i, t_)) x_.template store<T>(o, i, value_from<T>(mine.next()));
    else if (p_.readable(o, i, t_)) digest_ = fold(digest_, x_.template load<T>(o, i));
  }

  /// Holds k's page and reads or writes a few of its elements, around a nested operation; then
  /// reads through the span again (the page must still be the one held).
  template <class T, access A, int Level>
  WARPVM_HD WARPVM_FUZZ_OUT_OF_LINE void span(std::uint32_t o, std::uint64_t k, std::uint32_t held, Choices& shared, Choices& mine) {
    if (p_.overwrite_page(o, p_.page_of(o, k))) return;  // its warp's alone in this launch
    x_.template with_span<T, A>(o, k, [&](auto& s) {
      const std::uint32_t touches = 1 + static_cast<std::uint32_t>(mine.below(8));
      for (std::uint32_t n = 0; n < touches; ++n) {
        const std::uint64_t i = pick_in_page(o, k, mine);
        const auto j = static_cast<std::uint32_t>(i - s.first());
        if constexpr (A == access::read_write) {
          if (p_.writable(o, i, t_)) {
            s[j] = value_from<T>(mine.next());
            continue;
          }
        }
        if (p_.readable(o, i, t_)) digest_ = fold(digest_, static_cast<T>(s[j]));
      }
      if constexpr (Level < deepest)
        if (held + 2 <= p_.holds && mine.next() % 2 == 0) operation<Level + 1>(held + 1, shared, mine);
      const std::uint64_t again = pick_in_page(o, k, mine);
      if (p_.readable(o, again, t_)) digest_ = fold(digest_, static_cast<T>(s[static_cast<std::uint32_t>(again - s.first())]));
    });
  }

  /// Walks object o from k: steps within the page and jumps to other pages, with a nested
  /// operation between steps, and sometimes lets go of its page early.
  template <class T, access A, int Level>
  WARPVM_HD WARPVM_FUZZ_OUT_OF_LINE void cursor(std::uint32_t o, std::uint64_t k, std::uint32_t held, Choices& shared, Choices& mine) {
    x_.template with_cursor<T, A>(o, [&](auto& c) {
      std::uint64_t i = k;
      const std::uint32_t walk = 1 + static_cast<std::uint32_t>(mine.below(12));
      for (std::uint32_t n = 0; n < walk; ++n) {
        const std::uint64_t r = mine.next();
        i = r % 4 == 0 ? (r >> 8) % p_.elements[o] : (i + 1 + (r >> 8) % 3) % p_.elements[o];
        if (r % 16 == 1) i = p_.owned_index_near(o, i, t_);
        if constexpr (A == access::read_write) {
          if (p_.writable(o, i, t_)) {
            c[i] = value_from<T>(mine.next());
            continue;
          }
        }
        if (p_.readable(o, i, t_)) digest_ = fold(digest_, static_cast<T>(c[i]));
        if (r % 16 == 2) c.release();
        if constexpr (Level < deepest)
          if (r % 8 == 3 && held + 2 <= p_.holds) operation<Level + 1>(held + 1, shared, mine);
      }
    });
  }

  /// An atomic on a counter cell, as the cell's role allows.
  WARPVM_HD WARPVM_FUZZ_OUT_OF_LINE void counter_operation(Choices& shared, Choices& mine) {
    const std::uint32_t o = first_counter + static_cast<std::uint32_t>(shared.below(counter_objects));
    std::uint64_t i = shared.below(p_.elements[o]);
    if (mine.next() % 2 == 0) {  // look for a cell t owns
      const std::uint64_t slot = (t_ + p_.threads - p_.counter_owner(o, 0) % p_.threads) % p_.threads;
      const std::uint64_t own = i - i % p_.threads + slot;
      if (own < p_.elements[o]) i = own;
    }
    with_element_type(o, [&]<class T>() {
      if constexpr (std::is_integral_v<T>) {
        const T v = value_from<T>(mine.next());
        switch (p_.counter_role(o, i)) {
          case Program::CounterRole::sum:
            if (mine.next() % 2 == 0) x_.template fetch_add<T>(o, i, v);
            else x_.template fetch_sub<T>(o, i, v);
            break;
          case Program::CounterRole::min: x_.template fetch_min<T>(o, i, v); break;
          case Program::CounterRole::max: x_.template fetch_max<T>(o, i, v); break;
          case Program::CounterRole::owned:
            if (p_.counter_owner(o, i) == t_) owned_counter<T>(o, i, v, mine);
            break;
        }
      }
    });
  }

  template <class T>
  WARPVM_HD void owned_counter(std::uint32_t o, std::uint64_t i, T v, Choices& mine) {
    switch (mine.below(5)) {
      case 0: digest_ = fold(digest_, x_.template exchange<T>(o, i, v)); break;
      case 1: digest_ = fold(digest_, x_.template fetch_add<T>(o, i, v)); break;
      case 2: digest_ = fold(digest_, x_.template load<T>(o, i)); break;
      default: {
        // Half succeed (expected read first), half fail (and report what they saw).
        T expected = x_.template load<T>(o, i);
        if (mine.next() % 2 == 0) expected = static_cast<T>(expected ^ T{1});
        const bool swapped = x_.template compare_exchange<T>(o, i, expected, v);
        digest_ = fold(fold(digest_, expected), static_cast<std::uint64_t>(swapped));
        break;
      }
    }
  }

  /// The launch's first act: each warp overwrites the pages it owns, all lanes together.
  WARPVM_HD void overwrite_pages() {
    const std::uint32_t warp = t_ / warp_size;
    for (std::uint32_t o = 0; o < data_objects; ++o) {
      with_element_type(o, [&]<class T>() {
        const std::uint64_t last = p_.warps() < p_.pages(o) ? p_.warps() : p_.pages(o);
        for (std::uint64_t page = 0; page < last; ++page)
          if (p_.overwrite_page(o, page) && p_.overwrite_owner(o, page) == warp)
            x_.template overwrite<T>(o, page, t_ % warp_size,
                                     [this, o](std::uint64_t i) { return p_.template overwritten<T>(o, i); });
      });
    }
  }

  const Program& p_;
  std::uint32_t t_;
  X& x_;
  std::uint64_t digest_;
};

template <class X>
WARPVM_HD std::uint64_t run_thread(const Program& p, std::uint32_t t, X& x) {
  return Interpreter<X>(p, t, x).run();
}

}  // namespace warpvm::fuzz
