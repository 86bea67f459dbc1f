#pragma once
/// @file
/// N GPUs and the host modelled in host memory, driven by the placement policy code the fault
/// handlers will run (detail/policy/placement.hpp): a directory entry per page, access counters
/// per 64 KB group per GPU, an O-Table word per object. Replays multi-GPU access streams and
/// counts what each policy does, plus a modelled time from a simple cost model (a model, not a
/// measurement: docs/placement.md). Used by `warpvm-sim --gpus N --placement ...`.

#include "warpvm/detail/multi_gpu/space_view.hpp"
#include "warpvm/detail/policy/placement.hpp"

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace warpvm::sim {

/// How objects are placed: one page policy for every object, OASIS's controller per object, or
/// the ideal bound (every GPU gets its own copy of a page on first access and keeps it, reads
/// and writes alike, with no coherence cost; not a correct memory model, only a bound).
enum class Placement : std::uint8_t { on_touch, access_counter, duplication, oasis, ideal };

inline const char* to_string(Placement p) {
  switch (p) {
    case Placement::on_touch: return "on_touch";
    case Placement::access_counter: return "access_counter";
    case Placement::duplication: return "duplication";
    case Placement::oasis: return "oasis";
    case Placement::ideal: return "ideal";
  }
  return "?";
}

/// Throws std::invalid_argument for an unknown name.
inline Placement placement_from_string(const std::string& name) {
  for (const Placement p : {Placement::on_touch, Placement::access_counter, Placement::duplication, Placement::oasis,
                            Placement::ideal})
    if (name == to_string(p)) return p;
  throw std::invalid_argument("unknown placement '" + name + "' (on_touch, access_counter, duplication, oasis, ideal)");
}

/// Costs in nanoseconds, charged to the GPU that makes the access or takes the fault; the
/// modelled time is the largest per-GPU total (the GPUs run side by side). Measured on the lent
/// 2 x H200 (shared/DESIGN.md) where marked; the fault and invalidation costs are assumptions.
struct PlacementCosts {
  double local_access_ns = 1.0 / 37.6;  ///< measured: 37.6 G random loads/s from local HBM
  double remote_access_ns = 1.0 / 6.5;  ///< measured: 6.5 G random loads/s from the NVLink peer
  double peer_gbps = 374;               ///< measured: warps pulling random 4 KB pages from the peer
  double host_gbps = 51;                ///< measured: warps pulling random 4 KB pages from pinned host memory
  /// Assumed: a fault's directory lock and update, one cross-GPU atomic round trip (measured
  /// 1.9 us) with 8 faults in flight per GPU.
  double fault_ns = 1900.0 / 8;
  double invalidate_ns = 1900.0 / 8;  ///< assumed: one mapping of another GPU shot down, the same way
};

struct PlacementCounts {
  std::uint64_t accesses = 0;  ///< 128 B line accesses
  std::uint64_t local = 0;     ///< line accesses served from the GPU's own memory
  std::uint64_t remote = 0;    ///< line accesses over NVLink to another GPU's frame
  std::uint64_t first_touches = 0;
  std::uint64_t shared_faults = 0;
  std::uint64_t migrations = 0;          ///< fault-driven: on-touch, or duplication's write to an unshared page
  std::uint64_t counter_migrations = 0;  ///< pages moved because an access counter reached its threshold
  std::uint64_t replications = 0;
  std::uint64_t collapses = 0;
  std::uint64_t remote_maps = 0;
  std::uint64_t invalidations = 0;  ///< other GPUs' mappings dropped
  std::uint64_t nvlink_bytes = 0;   ///< pages pulled from peers and remote line accesses
  std::uint64_t host_bytes = 0;     ///< pages fetched from the host
  [[nodiscard]] std::uint64_t faults() const { return first_touches + shared_faults; }
};

class PlacementModel {
 public:
  PlacementModel(unsigned gpus, Placement placement, std::uint32_t page_bytes,
                 std::uint32_t reset_threshold = detail::default_reset_threshold,
                 std::uint32_t counter_threshold = detail::default_counter_threshold, PlacementCosts costs = {})
      : gpus_(gpus),
        placement_(placement),
        page_bytes_(page_bytes),
        pages_per_group_(std::max<std::uint32_t>(1, detail::counter_group_bytes / page_bytes)),
        reset_threshold_(reset_threshold),
        counter_threshold_(counter_threshold),
        costs_(costs),
        gpu_ns_(gpus, 0.0) {
    if (gpus < 1 || gpus > detail::placement_max_gpus) throw std::invalid_argument("--gpus must be in [1, 64]");
    if (page_bytes < detail::remote_access_bytes || page_bytes % detail::remote_access_bytes != 0)
      throw std::invalid_argument("pages must be a multiple of 128 bytes");
    if (reset_threshold < 1 || reset_threshold > detail::otable::max_reset_threshold)
      throw std::invalid_argument("the reset threshold must be in [1, 255]");
    if (counter_threshold < 1) throw std::invalid_argument("the access-counter threshold must be at least 1");
  }

  std::uint32_t add_object(std::uint64_t pages) {
    const std::uint64_t groups = (pages + pages_per_group_ - 1) / pages_per_group_;
    objects_.push_back({std::vector<detail::DirectoryEntry>(pages), std::vector<std::uint32_t>(groups * gpus_, 0), 0});
    return static_cast<std::uint32_t>(objects_.size() - 1);
  }

  /// MultiGpuSpace::place_on_gpus(): every page of `object` still on the host goes to the GPU
  /// `spread` names, placed, as warpvm-placement-bench --initial-placement does before its timed
  /// runs: uncounted and untimed.
  void place_on_gpus(std::uint32_t object, Spread spread) {
    std::vector<detail::DirectoryEntry>& pages = objects_.at(object).pages;
    for (std::uint64_t p = 0; p < pages.size(); ++p) {
      detail::DirectoryEntry& e = pages[p];
      if (e.owner != detail::owner_host) continue;
      const unsigned gpu = detail::mg::spread_gpu(spread, p, pages.size(), gpus_);
      (void)detail::apply(e, gpu, detail::Action::fetch_from_host);
      detail::mark_placed(e, gpu);
    }
  }

  /// An explicit phase boundary (a kernel launched through the runtime, rt.begin_phase()).
  void begin_phase() {
    for (Object& o : objects_) detail::otable_begin_phase(o.otable);
  }

  /// GPU `gpu` accesses `lines` 128 B lines of one page (one decision; the lines then go local
  /// or remote together).
  void access(unsigned gpu, std::uint32_t object, std::uint64_t page, bool write, std::uint32_t lines) {
    Object& o = objects_.at(object);
    detail::DirectoryEntry& e = o.pages.at(page);
    counts_.accesses += lines;
    const detail::Action action = placement_ == Placement::ideal ? ideal_action(e, gpu) : decide_action(o, e, gpu, write);
    const detail::Effects fx = detail::apply(e, gpu, action);
    if (write) detail::owner_write_ends_placement(e, gpu);
    account(gpu, action, fx);
    if (!detail::access_goes_remote(action)) {
      counts_.local += lines;
      gpu_ns_[gpu] += lines * costs_.local_access_ns;
      return;
    }
    counts_.remote += lines;
    counts_.nvlink_bytes += std::uint64_t{lines} * detail::remote_access_bytes;
    gpu_ns_[gpu] += lines * costs_.remote_access_ns;
    const std::uint64_t group = page / pages_per_group_;
    if (!detail::count_remote(o.counters[group * gpus_ + gpu], lines, counter_threshold_)) return;
    // The group's count reached the threshold: every page of it this GPU maps remotely moves here.
    const std::uint64_t end = std::min<std::uint64_t>(o.pages.size(), (group + 1) * pages_per_group_);
    for (std::uint64_t q = group * pages_per_group_; q < end; ++q) {
      if (!o.pages[q].maps_remote(gpu)) continue;
      account(gpu, detail::Action::counter_migrate, detail::apply(o.pages[q], gpu, detail::Action::counter_migrate));
    }
  }

  [[nodiscard]] const PlacementCounts& counts() const { return counts_; }
  /// The cost model's time: the busiest GPU's total.
  [[nodiscard]] double modelled_seconds() const { return *std::max_element(gpu_ns_.begin(), gpu_ns_.end()) * 1e-9; }
  [[nodiscard]] const detail::DirectoryEntry& entry(std::uint32_t object, std::uint64_t page) const {
    return objects_.at(object).pages.at(page);
  }

 private:
  struct Object {
    std::vector<detail::DirectoryEntry> pages;
    std::vector<std::uint32_t> counters;  ///< [group][gpu]
    std::uint32_t otable;
  };

  detail::Action decide_action(Object& o, const detail::DirectoryEntry& e, unsigned gpu, bool write) {
    const detail::Decision d = detail::decide(e, gpu, write, [&](bool w) {
      switch (placement_) {
        case Placement::access_counter: return detail::PagePolicy::access_counter;
        case Placement::duplication: return detail::PagePolicy::duplication;
        case Placement::oasis: return detail::otable_shared_fault(o.otable, w, reset_threshold_);
        case Placement::on_touch:
        case Placement::ideal: break;
      }
      return detail::PagePolicy::on_touch;
    });
    if (d.fault == detail::PlacementFault::shared) ++counts_.shared_faults;
    return d.action;
  }

  /// The ideal bound: a GPU's first access to a page copies it there; later accesses are local.
  static detail::Action ideal_action(const detail::DirectoryEntry& e, unsigned gpu) {
    if (e.owner == detail::owner_host) return detail::Action::fetch_from_host;
    return e.has_copy(gpu) ? detail::Action::local : detail::Action::replicate;
  }

  void account(unsigned gpu, detail::Action action, const detail::Effects& fx) {
    using detail::Action;
    double& ns = gpu_ns_[gpu];
    switch (action) {
      case Action::local:
      case Action::remote: break;
      case Action::fetch_from_host:
      case Action::take_placed: ++counts_.first_touches; break;
      case Action::migrate: ++counts_.migrations; break;
      case Action::counter_migrate: ++counts_.counter_migrations; break;
      case Action::map_remote: ++counts_.remote_maps; break;
      case Action::replicate: ++counts_.replications; break;
      case Action::collapse_and_own:
      case Action::collapse_and_map_remote: ++counts_.collapses; break;
    }
    // Every action but the two fault-free accesses and a counter migration is a fault.
    if (action != Action::local && action != Action::remote && action != Action::counter_migrate) ns += costs_.fault_ns;
    counts_.invalidations += fx.invalidated;
    ns += fx.invalidated * costs_.invalidate_ns;
    if (!fx.pulled) return;
    if (fx.source == detail::owner_host) {
      counts_.host_bytes += page_bytes_;
      ns += page_bytes_ / costs_.host_gbps;
    } else {
      counts_.nvlink_bytes += page_bytes_;
      ns += page_bytes_ / costs_.peer_gbps;
    }
  }

  unsigned gpus_;
  Placement placement_;
  std::uint32_t page_bytes_, pages_per_group_, reset_threshold_, counter_threshold_;
  PlacementCosts costs_;
  std::vector<Object> objects_;
  std::vector<double> gpu_ns_;
  PlacementCounts counts_;
};

}  // namespace warpvm::sim
