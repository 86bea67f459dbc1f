#pragma once
/// @file
/// What the host executors (the reference model's, fuzz_model.cpp; the simulator's,
/// fuzz_sim.cpp) share: elements in byte arrays, and the element operations in terms of one
/// access primitive. Host code only: the GPU executor uses warpvm::array.

#include "fuzz_program.hpp"

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace warpvm::fuzz {

/// An element in a byte array, read and written as T (memcpy: the bytes need not be aligned for
/// T). What the host executors' spans and cursors return, as the GPU's return T&.
template <class T>
class ElementRef {
 public:
  explicit ElementRef(std::byte* at) : at_(at) {}
  operator T() const {  // NOLINT(google-explicit-constructor): reads like the element it names
    T v;
    std::memcpy(&v, at_, sizeof(T));
    return v;
  }
  ElementRef& operator=(const T& v) {
    std::memcpy(at_, &v, sizeof(T));
    return *this;
  }

 private:
  std::byte* at_;
};

/// The element operations of a host executor (the model's, the simulator's), in terms of the
/// executor's on_element<T>(o, i, write, op), which calls op on element i of object o as an
/// ElementRef<T> (holding its page around the call, in the simulator) and returns what op does,
/// and on its program() and with_span.
/// Each operation is whole: no other simulated thread runs during op.
template <class Executor>
class HostElementAccess {
 public:
  template <class T>
  T load(std::uint32_t o, std::uint64_t i) {
    return self().template on_element<T>(o, i, false, [](ElementRef<T> e) { return static_cast<T>(e); });
  }
  template <class T>
  void store(std::uint32_t o, std::uint64_t i, T v) {
    update<T>(o, i, [v](T) { return v; });
  }
  template <class T>
  T fetch_add(std::uint32_t o, std::uint64_t i, T v) {
    return update<T>(o, i, [v](T old) { return static_cast<T>(old + v); });
  }
  template <class T>
  T fetch_sub(std::uint32_t o, std::uint64_t i, T v) {
    return update<T>(o, i, [v](T old) { return static_cast<T>(old - v); });
  }
  template <class T>
  T fetch_min(std::uint32_t o, std::uint64_t i, T v) {
    return update<T>(o, i, [v](T old) { return old < v ? old : v; });
  }
  template <class T>
  T fetch_max(std::uint32_t o, std::uint64_t i, T v) {
    return update<T>(o, i, [v](T old) { return old < v ? v : old; });
  }
  template <class T>
  T exchange(std::uint32_t o, std::uint64_t i, T v) {
    return update<T>(o, i, [v](T) { return v; });
  }
  template <class T>
  bool compare_exchange(std::uint32_t o, std::uint64_t i, T& expected, T desired) {
    return self().template on_element<T>(o, i, true, [&](ElementRef<T> e) {
      const T old = e;
      if (!(old == expected)) {
        expected = old;
        return false;
      }
      e = desired;
      return true;
    });
  }

  /// The warp's overwrite of a page, done whole by its lane 0 under one overwrite span.
  template <class T, class ValueOf>
  void overwrite(std::uint32_t o, std::uint64_t page, std::uint32_t lane, ValueOf&& value_of) {
    if (lane != 0) return;
    const Program& p = self().program();
    const std::uint64_t first = page << p.element_shift[o];
    const std::uint64_t end = p.elements[o] - first < p.per_page(o) ? p.elements[o] : first + p.per_page(o);
    self().template with_span<T, access::overwrite>(o, first, [&](auto& s) {
      for (std::uint64_t i = first; i < end; ++i) s[static_cast<std::uint32_t>(i - first)] = value_of(i);
    });
  }

 private:
  /// Writes f(old) to the element; returns old.
  template <class T, class F>
  T update(std::uint32_t o, std::uint64_t i, F&& f) {
    return self().template on_element<T>(o, i, true, [&](ElementRef<T> e) {
      const T old = e;
      e = f(old);
      return old;
    });
  }
  Executor& self() { return static_cast<Executor&>(*this); }
};

}  // namespace warpvm::fuzz
