#pragma once
/// @file
/// N GPUs and the host modelled in host memory, driven by the placement policy code the fault
/// handlers will run (detail/policy/placement.hpp, capacity.hpp): a directory entry per page,
/// access counters per 64 KB group per GPU, an O-Table word per object, and per GPU a frame pool
/// that evicts as the device's does when it is smaller than what the GPU holds. Replays multi-GPU
/// access streams and counts what each policy does, plus a modelled time from a simple cost model
/// (a model, not a measurement: docs/placement.md). Used by `warpvm-sim --gpus N --placement ...`.

#include "warpvm/detail/multi_gpu/frame_pool.hpp"
#include "warpvm/detail/multi_gpu/space_view.hpp"
#include "warpvm/detail/policy/capacity.hpp"
#include "warpvm/detail/policy/placement.hpp"

#include <cuda/std/bit>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
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
  /// 1.9 us) with 8 faults in flight per GPU. An eviction (the victim's lock, plan and drain)
  /// costs the same; a dirty page it sends to the host is a host transfer on top.
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
  std::uint64_t host_bytes = 0;     ///< pages fetched from the host and dirty pages written back to it
  std::uint64_t evictions = 0;      ///< copies a full pool gave up (evict_copy)
  std::uint64_t writebacks = 0;     ///< evictions that sent a dirty page to the host
  [[nodiscard]] std::uint64_t faults() const { return first_touches + shared_faults; }
};

/// One GPU's frame pool as the device keeps it (detail/multi_gpu/frame_pool.hpp): frames handed
/// out by a bump counter, then the ones given back; a reverse map from frame to page; a clock
/// without referenced bits proposes victims round robin. Given-back frames are reused last first
/// (the device scans a window of its bitmap instead: the frames differ, so may the clock's next
/// victim, not how many are evicted).
class FramePoolModel {
 public:
  struct Held {
    std::uint32_t object;
    std::uint64_t page;
  };

  explicit FramePoolModel(std::uint32_t frames) : held_(frames) {}

  [[nodiscard]] std::uint32_t frames() const { return static_cast<std::uint32_t>(held_.size()); }
  [[nodiscard]] bool full() const { return bump_ == held_.size() && given_back_.empty(); }
  /// Frames holding a page now.
  [[nodiscard]] std::uint32_t in_use() const { return bump_ - static_cast<std::uint32_t>(given_back_.size()); }

  /// A frame for `page`; the pool must not be full.
  std::uint32_t take(Held page) {
    if (full()) throw std::logic_error("a frame taken from a full pool");
    std::uint32_t f = bump_;
    if (bump_ < held_.size()) {
      ++bump_;
    } else {
      f = given_back_.back();
      given_back_.pop_back();
    }
    held_[f] = page;
    return f;
  }

  void give_back(std::uint32_t f) {
    held_[f].reset();
    given_back_.push_back(f);
  }

  /// The clock's victim in a full pool (every frame then holds a page).
  [[nodiscard]] Held next_victim() {
    for (;;) {
      const std::uint32_t f = hand_;
      hand_ = (hand_ + 1) % frames();
      if (held_[f]) return *held_[f];
    }
  }

 private:
  std::vector<std::optional<Held>> held_;  ///< the reverse map
  std::vector<std::uint32_t> given_back_;
  std::uint32_t bump_ = 0, hand_ = 0;
};

struct PlacementModelConfig {
  unsigned gpus = 2;
  Placement placement = Placement::oasis;
  std::uint32_t page_bytes = 4096;
  std::uint32_t reset_threshold = detail::default_reset_threshold;
  std::uint32_t counter_threshold = detail::default_counter_threshold;
  /// Each GPU's frame pool as a fraction of the footprint (every object's pages, counted when the
  /// pools are made, at the first access or placement). 1 or more holds every page on every GPU:
  /// nothing is ever evicted (in core).
  double pool_fraction = 1;
  /// OASIS's capacity-aware controller (detail/policy/capacity.hpp): redundant copies of an
  /// object one GPU may evict in a phase before that GPU stops replicating it; 0 turns it off.
  std::uint32_t pressure_evictions = 0;
  PlacementCosts costs = {};
};

class PlacementModel {
 public:
  explicit PlacementModel(const PlacementModelConfig& config)
      : config_(config),
        pages_per_group_(std::max<std::uint32_t>(1, detail::counter_group_bytes / config.page_bytes)),
        gpu_ns_(config.gpus, 0.0) {
    if (config.gpus < 1 || config.gpus > detail::placement_max_gpus) throw std::invalid_argument("--gpus must be in [1, 64]");
    if (config.page_bytes < detail::remote_access_bytes || config.page_bytes % detail::remote_access_bytes != 0)
      throw std::invalid_argument("pages must be a multiple of 128 bytes");
    if (config.reset_threshold < 1 || config.reset_threshold > detail::otable::max_reset_threshold)
      throw std::invalid_argument("the reset threshold must be in [1, 255]");
    if (config.counter_threshold < 1) throw std::invalid_argument("the access-counter threshold must be at least 1");
    if (!(config.pool_fraction > 0)) throw std::invalid_argument("the pool fraction must be above 0");
  }

  std::uint32_t add_object(std::uint64_t pages) {
    if (!pools_.empty()) throw std::logic_error("objects are added before the first access (the pools count them)");
    const std::uint64_t groups = (pages + pages_per_group_ - 1) / pages_per_group_;
    const unsigned gpus = config_.gpus;
    objects_.push_back({std::vector<detail::DirectoryEntry>(pages), std::vector<std::uint32_t>(groups * gpus, 0), 0,
                        std::vector<std::uint32_t>(pages * gpus, detail::mg::no_frame), std::vector<std::uint8_t>(pages, 0),
                        std::vector<std::uint32_t>(gpus, 0)});
    return static_cast<std::uint32_t>(objects_.size() - 1);
  }

  /// MultiGpuSpace::place_on_gpus(): every page of `object` still on the host goes to the GPU
  /// `spread` names, placed, as warpvm-placement-bench --initial-placement does before its timed
  /// runs: uncounted and untimed, but for the evictions a full pool makes.
  void place_on_gpus(std::uint32_t object, Spread spread) {
    make_pools();
    std::vector<detail::DirectoryEntry>& pages = objects_.at(object).pages;
    for (std::uint64_t p = 0; p < pages.size(); ++p) {
      if (pages[p].owner != detail::owner_host) continue;
      const unsigned gpu = detail::mg::spread_gpu(spread, p, pages.size(), config_.gpus);
      make_room(gpu);
      (void)transition(object, p, gpu, detail::Action::fetch_from_host);
      detail::mark_placed(pages[p], gpu);
    }
  }

  /// An explicit phase boundary (a kernel launched through the runtime, rt.begin_phase()).
  void begin_phase() {
    for (Object& o : objects_) {
      detail::otable_begin_phase(o.otable);
      for (std::uint32_t& evicted : o.evicted_copies) detail::pressure_begin_phase(evicted);
    }
  }

  /// GPU `gpu` accesses `lines` 128 B lines of one page (one decision; the lines then go local
  /// or remote together).
  void access(unsigned gpu, std::uint32_t object, std::uint64_t page, bool write, std::uint32_t lines) {
    make_pools();
    Object& o = objects_.at(object);
    detail::DirectoryEntry& e = o.pages.at(page);
    counts_.accesses += lines;
    const detail::Action action = serve(o, e, gpu, write);
    account(gpu, action, transition(object, page, gpu, action), e);
    if (write) {
      detail::owner_write_ends_placement(e, gpu);
      o.dirty[page] = 1;  // on the device a writable mapping implies a dirty page
    }
    if (!detail::access_goes_remote(action)) {
      counts_.local += lines;
      gpu_ns_[gpu] += lines * config_.costs.local_access_ns;
      return;
    }
    counts_.remote += lines;
    counts_.nvlink_bytes += std::uint64_t{lines} * detail::remote_access_bytes;
    gpu_ns_[gpu] += lines * config_.costs.remote_access_ns;
    const std::uint64_t group = page / pages_per_group_;
    if (!detail::count_remote(o.counters[group * config_.gpus + gpu], lines, config_.counter_threshold)) return;
    // The group's count reached the threshold: every page of it this GPU maps remotely moves (or,
    // under the capacity controller, is replicated) here.
    const detail::Action counter_action = counter_fired_action(o, gpu);
    const std::uint64_t end = std::min<std::uint64_t>(o.pages.size(), (group + 1) * pages_per_group_);
    for (std::uint64_t q = group * pages_per_group_; q < end; ++q) {
      if (!o.pages[q].maps_remote(gpu)) continue;
      make_room(gpu);
      account(gpu, counter_action, transition(object, q, gpu, counter_action), o.pages[q], true);
    }
  }

  [[nodiscard]] const PlacementCounts& counts() const { return counts_; }
  /// The cost model's time: the busiest GPU's total.
  [[nodiscard]] double modelled_seconds() const { return *std::max_element(gpu_ns_.begin(), gpu_ns_.end()) * 1e-9; }
  [[nodiscard]] const detail::DirectoryEntry& entry(std::uint32_t object, std::uint64_t page) const {
    return objects_.at(object).pages.at(page);
  }
  /// Frames per GPU (0 before the first access or placement makes the pools).
  [[nodiscard]] std::uint32_t pool_frames() const { return pools_.empty() ? 0 : pools_.front().frames(); }
  /// Frames of GPU `gpu`'s pool holding a page now.
  [[nodiscard]] std::uint32_t frames_in_use(unsigned gpu) const { return pools_.empty() ? 0 : pools_.at(gpu).in_use(); }

 private:
  struct Object {
    std::vector<detail::DirectoryEntry> pages;
    std::vector<std::uint32_t> counters;  ///< [group][gpu]
    std::uint32_t otable;
    std::vector<std::uint32_t> frames;          ///< [page][gpu]: the GPU's frame holding its copy, or no_frame
    std::vector<std::uint8_t> dirty;            ///< per page: written since it last came from the host
    std::vector<std::uint32_t> evicted_copies;  ///< per GPU: the capacity signal's count this phase
  };

  /// Each GPU's pool, sized from the footprint once every object is made. A pool of the whole
  /// footprint can hold every page: it never evicts. The ideal bound always has one.
  void make_pools() {
    if (!pools_.empty()) return;
    std::uint64_t footprint = 0;
    for (const Object& o : objects_) footprint += o.pages.size();
    const bool capped = config_.pool_fraction < 1 && config_.placement != Placement::ideal;
    const auto frames =
        capped ? static_cast<std::uint64_t>(std::llround(config_.pool_fraction * static_cast<double>(footprint))) : footprint;
    if (capped && frames < detail::mg::min_pool_frames)
      throw std::invalid_argument("each GPU's pool needs at least 32 frames, as on the device: raise --bytes or the pool fraction");
    pools_.assign(config_.gpus, FramePoolModel(static_cast<std::uint32_t>(frames)));
  }

  /// The action serving GPU `gpu`'s access, decided as the device's fault path decides it: once,
  /// counted (the O-Table learns from it); then, while it would pull a page into a full pool, one
  /// page of that pool is evicted and the fault decided again on what it finds then, uncounted.
  detail::Action serve(Object& o, const detail::DirectoryEntry& e, unsigned gpu, bool write) {
    detail::Action action = choose(o, e, gpu, write, true);
    while (pulls_page(e, gpu, action) && pools_[gpu].full()) {
      evict_one(gpu);
      action = choose(o, e, gpu, write, false);
    }
    return action;
  }

  detail::Action choose(Object& o, const detail::DirectoryEntry& e, unsigned gpu, bool write, bool first_decision) {
    if (config_.placement == Placement::ideal) return ideal_action(e, gpu);
    const detail::Decision d =
        detail::decide(e, gpu, write, [&](bool w) { return shared_fault_policy(o, gpu, w, first_decision); });
    if (d.fault == detail::PlacementFault::shared && first_decision) ++counts_.shared_faults;
    return d.action;
  }

  /// The object's policy for a shared fault, as the device's shared_fault_policy (fault.cuh):
  /// `learns` for a fault seen the first time; OASIS then served through the capacity controller.
  detail::PagePolicy shared_fault_policy(Object& o, unsigned gpu, bool write, bool learns) {
    switch (config_.placement) {
      case Placement::access_counter: return detail::PagePolicy::access_counter;
      case Placement::duplication: return detail::PagePolicy::duplication;
      case Placement::oasis: {
        const detail::PagePolicy learned = learns ? detail::otable_shared_fault(o.otable, write, config_.reset_threshold)
                                                  : detail::otable_policy_for(o.otable, write);
        return detail::pressure_served_policy(learned, o.evicted_copies[gpu], config_.pressure_evictions);
      }
      case Placement::on_touch:
      case Placement::ideal: break;
    }
    return detail::PagePolicy::on_touch;
  }

  /// What GPU `gpu` does to the pages of a group it maps remotely when its counter fires.
  detail::Action counter_fired_action(Object& o, unsigned gpu) const {
    if (config_.placement != Placement::oasis) return detail::Action::counter_migrate;
    return detail::pressure_counter_action(o.otable, o.evicted_copies[gpu], config_.pressure_evictions);
  }

  /// The ideal bound: a GPU's first access to a page copies it there; later accesses are local.
  static detail::Action ideal_action(const detail::DirectoryEntry& e, unsigned gpu) {
    if (e.owner == detail::owner_host) return detail::Action::fetch_from_host;
    return e.has_copy(gpu) ? detail::Action::local : detail::Action::replicate;
  }

  /// Whether `action` copies the page into `gpu` (tried on a copy of the entry).
  static bool pulls_page(detail::DirectoryEntry e, unsigned gpu, detail::Action action) {
    return detail::apply(e, gpu, action).pulled;
  }

  /// Evicts pages of `gpu`'s pool until it has a free frame.
  void make_room(unsigned gpu) {
    while (pools_[gpu].full()) evict_one(gpu);
  }

  /// `apply` on the page's entry, with every GPU's frames following its copies.
  detail::Effects transition(std::uint32_t object, std::uint64_t page, unsigned gpu, detail::Action action) {
    detail::DirectoryEntry& e = objects_[object].pages[page];
    const detail::DirectoryEntry before = e;
    const detail::Effects fx = detail::apply(e, gpu, action);
    follow_copies(object, page, before, e);
    return fx;
  }

  /// A GPU that lost its copy gives its frame back; one that gained one takes a frame.
  void follow_copies(std::uint32_t object, std::uint64_t page, const detail::DirectoryEntry& before,
                     const detail::DirectoryEntry& after) {
    for (unsigned g = 0; g < config_.gpus; ++g) {
      std::uint32_t& frame = objects_[object].frames[page * config_.gpus + g];
      if (before.has_copy(g) && !after.has_copy(g)) {
        pools_[g].give_back(frame);
        frame = detail::mg::no_frame;
      } else if (!before.has_copy(g) && after.has_copy(g)) {
        frame = pools_[g].take({object, page});
      }
    }
  }

  /// The clock's victim in `gpu`'s full pool gives up its copy (evict_copy): a dirty page going to
  /// the host is written back; the capacity signal counts a redundant copy.
  void evict_one(unsigned gpu) {
    const FramePoolModel::Held victim = pools_[gpu].next_victim();
    Object& o = objects_[victim.object];
    detail::DirectoryEntry& e = o.pages[victim.page];
    const detail::DirectoryEntry before = e;
    const detail::EvictEffects fx = detail::evict_copy(e, gpu);
    follow_copies(victim.object, victim.page, before, e);
    detail::pressure_count_eviction(o.evicted_copies[gpu], fx);
    ++counts_.evictions;
    gpu_ns_[gpu] += config_.costs.fault_ns;
    // Remote mappers of a page whose owner changed (to the host or to a replica) are shot down.
    charge_invalidations(gpu, before.owner != e.owner ? static_cast<unsigned>(cuda::std::popcount(before.remote)) : 0);
    if (!fx.to_host || o.dirty[victim.page] == 0) return;
    o.dirty[victim.page] = 0;
    ++counts_.writebacks;
    charge_page_copy(gpu, detail::owner_host);
  }

  void charge_invalidations(unsigned gpu, unsigned mappings) {
    counts_.invalidations += mappings;
    gpu_ns_[gpu] += mappings * config_.costs.invalidate_ns;
  }

  /// A page crossing the link between `gpu` and `peer` (the host, or another GPU), either way.
  void charge_page_copy(unsigned gpu, unsigned peer) {
    const bool host = peer == detail::owner_host;
    (host ? counts_.host_bytes : counts_.nvlink_bytes) += config_.page_bytes;
    gpu_ns_[gpu] += config_.page_bytes / (host ? config_.costs.host_gbps : config_.costs.peer_gbps);
  }

  /// Counts and times a transition; `after` is the page's entry after it, `by_counter` whether an
  /// access counter rather than a fault started it.
  void account(unsigned gpu, detail::Action action, const detail::Effects& fx, const detail::DirectoryEntry& after,
               bool by_counter = false) {
    using detail::Action;
    switch (action) {
      case Action::local:
      case Action::remote: break;
      case Action::fetch_from_host:
        // An evicted page that was shared comes back through a shared fault: counted there.
        if (after.shared == 0) ++counts_.first_touches;
        break;
      case Action::take_placed: ++counts_.first_touches; break;
      case Action::migrate: ++counts_.migrations; break;
      case Action::counter_migrate: ++counts_.counter_migrations; break;
      case Action::map_remote: ++counts_.remote_maps; break;
      case Action::replicate: ++counts_.replications; break;
      case Action::collapse_and_own:
      case Action::collapse_and_map_remote: ++counts_.collapses; break;
    }
    // Every action but the two fault-free accesses and the counters' is a fault.
    if (action != Action::local && action != Action::remote && !by_counter) gpu_ns_[gpu] += config_.costs.fault_ns;
    charge_invalidations(gpu, fx.invalidated);
    if (fx.pulled) charge_page_copy(gpu, fx.source);
  }

  PlacementModelConfig config_;
  std::uint32_t pages_per_group_;
  std::vector<Object> objects_;
  std::vector<FramePoolModel> pools_;
  std::vector<double> gpu_ns_;
  PlacementCounts counts_;
};

}  // namespace warpvm::sim
