// ZBOUND_CPU_TIMING: per-call stage times of the CPU pipelines (zb_stage_clock.h).
#include "zb_stage_clock.h"
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace zb {
namespace {

bool timing_enabled() {
    static const bool enabled = [] {
        const char *e = std::getenv("ZBOUND_CPU_TIMING");
        return e && *e && std::strcmp(e, "0") != 0;
    }();
    return enabled;
}

double now_ms() {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

thread_local StageClock *t_active = nullptr;

}  // namespace

StageClock::StageClock(const char *call) {
    if (!timing_enabled() || t_active) return;
    owner_ = true;
    call_ = call;
    start_ = last_ = now_ms();
    t_active = this;
}

StageClock::~StageClock() {
    if (!owner_) return;
    t_active = nullptr;
    // One fprintf per line, so that lines of calls on several threads do not interleave.
    char line[1024];
    int len = std::snprintf(line, sizeof line, "zbound cpu %s %d threads:", call_, threads_);
    for (int i = 0; i < count_ && len > 0 && len < (int)sizeof line; ++i)
        len += std::snprintf(line + len, sizeof line - (size_t)len, " %s %.2f", names_[i], ms_[i]);
    if (len > 0 && len < (int)sizeof line)
        std::snprintf(line + len, sizeof line - (size_t)len, " total %.2f\n", now_ms() - start_);
    std::fputs(line, stderr);
}

void StageClock::mark(const char *stage) {
    if (!owner_) {   // an inner call's clock: its marks go to the outer line
        if (t_active) t_active->mark(stage);
        return;
    }
    const double t = now_ms();
    // A stage marked twice (a loop) adds up under one name.
    int i = 0;
    while (i < count_ && std::strcmp(names_[i], stage) != 0) ++i;
    if (i == count_) {
        if (count_ == kMaxStages) return;
        names_[count_++] = stage;
        ms_[i] = 0;
    }
    ms_[i] += t - last_;
    last_ = t;
}

void stage_mark(const char *stage) {
    if (t_active) t_active->mark(stage);
}

StageMute::StageMute() : saved_(t_active) { t_active = nullptr; }
StageMute::~StageMute() { t_active = saved_; }

}  // namespace zb
