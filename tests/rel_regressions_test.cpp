// Regression tests of bugs in core/ found by the reliability work (fuzzing, sanitizers), kept small. The ones that
// need the allocation hook live in rel_alloc_test.cpp.
#include <gtest/gtest.h>
#include <cstring>
#include <vector>
#include "rel_util.h"

namespace {

// Found by fuzz/fuzz_filter.cpp (fixed in core, commit 5b66e2a). Invariant 2 (DESIGN.md): -0.0 comes back bit for
// bit. The interp predictor (format v2) accepted a negative non-zero reconstruction r of x = -0.0 as "regular"
// when |r| <= eb: its sign test compared signs only, which suffices for v1 (r = q * 2eb is +0 for q = 0) but not
// for r = prediction + q * 2e.
TEST(Regressions, InterpKeepsNegativeZeroBitExact) {
    std::vector<float> v(4096, -0.0004f);
    v[13] = -0.0f;   // neighbours reconstruct near -0.0005: prediction -0.0005, q = 0, r = -0.0005
    relt::Case c;
    c.dtype = ZB_F32;
    c.dims = {v.size()};
    c.data = relt::as_bytes(v);
    c.params.mode = ZB_MODE_ABS;
    c.params.bound = 1e-3;
    c.params.predictor = ZB_PRED_INTERP;
    const relt::Result r = relt::run(c, ZB_BACKEND_CPU, 1, ZB_BACKEND_CPU);
    ASSERT_EQ(r.status, ZB_OK) << zb_last_error();
    ASSERT_EQ(r.dstatus, ZB_OK) << zb_last_error();
    float back;
    std::memcpy(&back, &r.decoded[4 * 13], 4);
    EXPECT_EQ(zbt::bits(back), 0x80000000u) << "-0.0 decoded as " << back;
    EXPECT_EQ(relt::violations(c, r.decoded, relt::stream_eb(r.stream)), 0u);
}

}  // namespace
