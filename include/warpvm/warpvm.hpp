#pragma once
/// @file
/// Everything a warpvm user includes. In .cu files the device API (array element access,
/// page_span, cursor) is available; in plain C++ files only the host API.

#include "warpvm/array.hpp"
#include "warpvm/channel.hpp"
#include "warpvm/config.hpp"
#include "warpvm/error.hpp"
#include "warpvm/heap.hpp"
#include "warpvm/multi_gpu.hpp"
#include "warpvm/ops.hpp"
#include "warpvm/runtime.hpp"
#include "warpvm/stats.hpp"
