#include "warpvm/config.hpp"

#include "warpvm/detail/core/geometry.hpp"
#include "warpvm/error.hpp"

#include <sstream>

namespace warpvm {

const char* to_string(EvictionPolicy policy) noexcept {
  return policy == EvictionPolicy::clock ? "clock" : "fifo";
}

const char* to_string(Placement placement) noexcept {
  switch (placement) {
    case Placement::remote: return "remote";
    case Placement::automatic: return "automatic";
    case Placement::resident: return "resident";
    default: return "migrate";
  }
}

const char* to_string(Transport transport) noexcept {
  return transport == Transport::gpu_initiated ? "gpu_initiated" : "host_batched";
}

const char* to_string(Preset preset) noexcept {
  switch (preset) {
    case Preset::dream: return "dream";
    case Preset::uvm: return "uvm";
    default: return "warpvm";
  }
}

Config Config::preset(Preset preset) {
  Config config;
  switch (preset) {
    case Preset::warpvm: break;
    case Preset::dream: config.eviction = EvictionPolicy::fifo; break;
    case Preset::uvm:
      config.transport = Transport::host_batched;
      config.page_bytes = 4096;
      config.fault_batch_size = 256;
      config.prefetch = true;
      break;
  }
  return config;
}

void Config::validate() const {
  WARPVM_EXPECTS(detail::is_power_of_two(page_bytes) && page_bytes >= detail::min_page_bytes &&
                     page_bytes <= detail::max_page_bytes,
                 ErrorKind::invalid_config,
                 "page_bytes = " + std::to_string(page_bytes) +
                     " must be a power of two between 512 B and 2 MiB");
  WARPVM_EXPECTS(cache_bytes != 0 || (cache_fraction_of_free > 0.0 && cache_fraction_of_free <= 0.95),
                 ErrorKind::invalid_config,
                 "cache_fraction_of_free = " + std::to_string(cache_fraction_of_free) +
                     " must be in (0, 0.95] (or set cache_bytes)");
  WARPVM_EXPECTS(cache_bytes == 0 || cache_bytes >= page_bytes, ErrorKind::invalid_config,
                 "cache_bytes = " + std::to_string(cache_bytes) +
                     " is smaller than one page of " + std::to_string(page_bytes) + " B");
  // Every frame (the cache's, the scratch frame, the resident ones) has a 32-bit number.
  WARPVM_EXPECTS(cache_bytes / page_bytes + (resident_bytes + page_bytes - 1) / page_bytes < (std::size_t{1} << 32) - 2,
                 ErrorKind::invalid_config,
                 "cache_bytes and resident_bytes come to 2^32 frames of page_bytes or more; use larger pages");
  WARPVM_EXPECTS(resident_bytes == 0 || transport == Transport::gpu_initiated, ErrorKind::invalid_config,
                 "resident_bytes needs the gpu_initiated transport: the host_batched one serves migrate objects only");
  WARPVM_EXPECTS(max_pages_held_per_thread >= 1, ErrorKind::invalid_config,
                 "max_pages_held_per_thread must be at least 1");
  WARPVM_EXPECTS(max_objects >= 1 && max_objects <= detail::max_object_count,
                 ErrorKind::invalid_config,
                 "max_objects = " + std::to_string(max_objects) + " must be in [1, " +
                     std::to_string(detail::max_object_count) + "]");
  WARPVM_EXPECTS(watchdog_seconds > 0.0 && watchdog_seconds <= 86400.0, ErrorKind::invalid_config,
                 "watchdog_seconds must be in (0, 86400]");
  WARPVM_EXPECTS(automatic_remote_share >= 0.0 && automatic_remote_share <= 1.0, ErrorKind::invalid_config,
                 "automatic_remote_share = " + std::to_string(automatic_remote_share) + " must be in [0, 1]");
  WARPVM_EXPECTS(automatic_remote_share_evicting >= 0.0 && automatic_remote_share_evicting <= 64.0,
                 ErrorKind::invalid_config,
                 "automatic_remote_share_evicting = " + std::to_string(automatic_remote_share_evicting) +
                     " must be in [0, 64]");
  WARPVM_EXPECTS(eviction == EvictionPolicy::clock || eviction == EvictionPolicy::fifo, ErrorKind::invalid_config,
                 "eviction must be EvictionPolicy::clock or EvictionPolicy::fifo");
  WARPVM_EXPECTS(transport == Transport::gpu_initiated || transport == Transport::host_batched,
                 ErrorKind::invalid_config, "transport must be Transport::gpu_initiated or Transport::host_batched");
  WARPVM_EXPECTS(transport != Transport::host_batched || page_bytes == 4096, ErrorKind::invalid_config,
                 "the host_batched transport serves 4 KB pages, as UVM does; page_bytes = " +
                     std::to_string(page_bytes));
  WARPVM_EXPECTS(fault_batch_size >= 1 && fault_batch_size <= 65536, ErrorKind::invalid_config,
                 "fault_batch_size = " + std::to_string(fault_batch_size) + " must be in [1, 65536]");
  WARPVM_EXPECTS(fault_event_capacity == 0 || WARPVM_FAULT_EVENTS, ErrorKind::invalid_config,
                 "fault_event_capacity needs the fault-event recorder, which this build leaves out: "
                 "configure with -DWARPVM_FAULT_EVENTS=ON");
  WARPVM_EXPECTS(fault_event_capacity <= (std::size_t{1} << 32), ErrorKind::invalid_config,
                 "fault_event_capacity = " + std::to_string(fault_event_capacity) +
                     " exceeds 2^32 events (160 GiB of device memory)");
  WARPVM_EXPECTS(device >= 0, ErrorKind::invalid_config, "device must be a CUDA ordinal >= 0");
}

std::string Config::describe() const {
  std::ostringstream out;
  out << "cache=";
  if (cache_bytes != 0)
    out << cache_bytes << " B";
  else
    out << cache_fraction_of_free * 100.0 << "% of free";
  if (resident_bytes != 0) out << " resident=" << resident_bytes << " B";
  out << " page=" << page_bytes << " B eviction=" << to_string(eviction)
      << " transport=" << to_string(transport);
  if (transport == Transport::host_batched)
    out << " batch=" << fault_batch_size << " prefetch=" << (prefetch ? "on" : "off");
  out << " checked=" << (checked ? "on" : "off") << " holds/thread=" << max_pages_held_per_thread;
  if (fault_event_capacity != 0) out << " fault events=" << fault_event_capacity;
  return out.str();
}

}  // namespace warpvm
