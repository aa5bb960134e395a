// Independent tasks on OpenMP threads, taken in turn, with exceptions carried out of the parallel region.
#pragma once
#include <atomic>
#include <cstdint>
#include <exception>
#include <omp.h>
#include "zb_cpu.h"

namespace zb {

// Runs task(k, thread) for every k in [0, count) on the team_threads(nt, count) threads (thread: 0 .. nt-1, for
// per-thread scratch), each thread taking the next task when it is done with one: threads that run slower take
// fewer. The first exception a task throws stops the others from starting tasks and is rethrown here (an exception
// must not leave a parallel region: std::terminate). Results that tasks store by k do not depend on the thread count.
template <typename F> void parallel_tasks(int64_t count, int nt, F task) {
    const int threads = team_threads(nt, count > 0 ? (uint64_t)count : 0);
    if (threads <= 1) {
        for (int64_t k = 0; k < count; ++k) task(k, 0);
        return;
    }
    std::atomic<int64_t> next{0};
    std::atomic<bool> failed{false};
    std::exception_ptr failure;
#pragma omp parallel num_threads(threads)
    {
        const int thread = omp_get_thread_num();
        try {
            for (int64_t k; !failed.load(std::memory_order_relaxed) &&
                            (k = next.fetch_add(1, std::memory_order_relaxed)) < count;)
                task(k, thread);
        } catch (...) {
#pragma omp critical(zb_parallel_tasks_failure)
            if (!failure) failure = std::current_exception();
            failed = true;
        }
    }
    if (failure) std::rethrow_exception(failure);
}

}  // namespace zb
