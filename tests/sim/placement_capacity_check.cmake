# OASIS's capacity-aware controller end to end (issue #31): runs warpvm-sim's placement mode for one
# workload with OASIS as today (--pressure-evictions 0) and with the controller (32), and compares
# the two records. cmake -DSIM=<warpvm-sim> -DWORKLOAD=<name> -DBYTES=<size> -DGPUS=<n>
# -DPOOL=<fraction> -DEXPECT=same|fewer_host_bytes -P placement_capacity_check.cmake
#   same: in core the two runs are identical but for the pressure_evictions field, nothing evicted;
#   fewer_host_bytes: with capped pools both runs evict, make the same accesses, and the
#   controller moves fewer bytes over the host link and is faster in the cost model.

cmake_policy(SET CMP0007 NEW)

execute_process(
  COMMAND ${SIM} --gpus ${GPUS} --placement oasis --workloads ${WORKLOAD} --bytes ${BYTES} --pool-fraction ${POOL}
          --pressure-evictions 0,32
  OUTPUT_VARIABLE out RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "warpvm-sim failed (${rc})")
endif()
string(REPLACE "\n" ";" records "${out}")
list(FILTER records INCLUDE REGEX "placement_sim")
list(LENGTH records n)
if(NOT n EQUAL 2)
  message(FATAL_ERROR "expected two records, got ${n}:\n${out}")
endif()
list(GET records 0 today)
list(GET records 1 controlled)
string(JSON today_pressure GET "${today}" pressure_evictions)
string(JSON controlled_pressure GET "${controlled}" pressure_evictions)
if(NOT today_pressure EQUAL 0 OR NOT controlled_pressure EQUAL 32)
  message(FATAL_ERROR "records out of order:\n${out}")
endif()

# The fields a run produces (not the date, not the setting).
set(fields accesses local_accesses remote_accesses faults first_touches shared_faults migrations counter_migrations
           replications collapses remote_maps invalidations nvlink_bytes host_bytes evictions writebacks modelled_seconds)
foreach(field IN LISTS fields)
  string(JSON a GET "${today}" ${field})
  string(JSON b GET "${controlled}" ${field})
  set(today_${field} "${a}")
  set(controlled_${field} "${b}")
endforeach()

if(EXPECT STREQUAL "same")
  foreach(field IN LISTS fields)
    if(NOT today_${field} STREQUAL controlled_${field})
      message(FATAL_ERROR "in core the controller changed ${field}: ${today_${field}} -> ${controlled_${field}}")
    endif()
  endforeach()
  if(NOT today_evictions EQUAL 0)
    message(FATAL_ERROR "in core a pool evicted ${today_evictions} pages")
  endif()
elseif(EXPECT STREQUAL "fewer_host_bytes")
  if(today_evictions EQUAL 0 OR controlled_evictions EQUAL 0)
    message(FATAL_ERROR "the capped pools did not evict (${today_evictions}, ${controlled_evictions})")
  endif()
  if(NOT today_accesses EQUAL controlled_accesses)
    message(FATAL_ERROR "the two runs made different accesses")
  endif()
  if(NOT controlled_host_bytes LESS today_host_bytes)
    message(FATAL_ERROR "host bytes: controller ${controlled_host_bytes}, today ${today_host_bytes}")
  endif()
  # if(LESS) compares decimals as floating-point numbers.
  if(NOT controlled_modelled_seconds LESS today_modelled_seconds)
    message(FATAL_ERROR "modelled seconds: controller ${controlled_modelled_seconds}, today ${today_modelled_seconds}")
  endif()
else()
  message(FATAL_ERROR "EXPECT must be same or fewer_host_bytes")
endif()
message(STATUS "${WORKLOAD} on ${GPUS} GPUs, pools ${POOL}: host bytes ${today_host_bytes} -> ${controlled_host_bytes}, "
               "evictions ${today_evictions} -> ${controlled_evictions}, modelled ${today_modelled_seconds} -> "
               "${controlled_modelled_seconds} s")
