// ZBOUND_STATS=1: per-process totals of what the filter function did, printed on stderr when the process exits
// (or the plugin is unloaded). One line per direction and backend: chunks, raw bytes, stored bytes, seconds spent
// inside the filter callback (allocation, byte swap and codec included) and the raw-data throughput that gives; with
// more than one chunk, also the first chunk's seconds and the throughput of the others (the first carries one-time
// costs such as the GPU's start-up).
#pragma once
#include <cstddef>
#include <string>
#include "zbound.h"

namespace zbound_h5 {

enum class Direction { Compress = 0, Decompress = 1 };

// True when ZBOUND_STATS is set to something other than "" or "0" (read once per process).
bool stats_enabled();

// Records one successful chunk: `raw` decompressed bytes, `stored` stream bytes, `seconds` in the callback, and
// the backend the codec ran on. Thread-safe, lock-free.
void stats_record(Direction dir, zb_backend backend, size_t raw, size_t stored, double seconds);

// Records a chunk the filter failed on (counted, not timed).
void stats_record_failure(Direction dir);

// The summary as printed at exit (empty when nothing was recorded). For tests.
std::string stats_summary();

}  // namespace zbound_h5
