// ZBOUND_CPU_TIMING=1: each CPU compression or decompression call prints the milliseconds of its stages on stderr,
// one line per call, e.g. `zbound cpu compress 16 threads: choice 4.1 range 2.7 predictor 19.3 ... total 54.2`.
// It is how the stage breakdowns of bench/NOTES.md are measured; off (one thread-local pointer test per mark) unless
// the variable is set.
//
// The API entry points open a StageClock for the call; the stages below them call stage_mark(name) on the calling
// thread (never inside a parallel region) when a stage ends: the time since the previous mark is that stage's.
#pragma once

namespace zb {

class StageClock {
public:
    // Active when ZBOUND_CPU_TIMING is set to something other than "" or "0" (read once per process) and no clock is
    // active on this thread already (an inner call, such as PW_REL's inner stream, adds its marks to the outer line).
    explicit StageClock(const char *call);
    ~StageClock();   // prints the line
    StageClock(const StageClock &) = delete;
    StageClock &operator=(const StageClock &) = delete;

    void mark(const char *stage);
    void set_threads(int threads) { threads_ = threads; }   // the call's CPU threads, printed with the line

private:
    static constexpr int kMaxStages = 32;
    bool owner_ = false;
    const char *call_ = nullptr;
    int threads_ = 0;
    double start_ = 0, last_ = 0;
    int count_ = 0;
    const char *names_[kMaxStages] = {};
    double ms_[kMaxStages] = {};
};

// Ends the stage `stage` on this thread's active clock; nothing when none is active.
void stage_mark(const char *stage);

// Silences the thread's clock while it lives: the samples that the pipeline choice and the interp tuning compress
// run the same stages, whose marks would otherwise split the enclosing stage.
class StageMute {
public:
    StageMute();
    ~StageMute();
    StageMute(const StageMute &) = delete;
    StageMute &operator=(const StageMute &) = delete;

private:
    StageClock *saved_;
};

}  // namespace zb
