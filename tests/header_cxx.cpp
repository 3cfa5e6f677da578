// header_cxx.cpp - the public header compiles alone as C++11 (-Wpedantic), its extern "C" block
// links against the C library. No other include on purpose.
#include "rdna35attn.h"

int main()
{
    r35a_context_options opt;
    r35a_context_options_init(&opt);
    opt.backend = R35A_BACKEND_REFERENCE;
    r35a_context *ctx = nullptr;
    if (r35a_context_create(&opt, &ctx) != R35A_OK || ctx == nullptr) {
        return 1;
    }
    r35a_paged_attention_desc desc;
    r35a_paged_attention_desc_init(&desc, R35A_DTYPE_F16, 1, 1, 1, 1, 1, 1, 64, 16, 1);
    r35a_plan *plan = nullptr;
    r35a_status st = r35a_paged_attention_plan(ctx, &desc, &plan);
    r35a_plan_destroy(plan);
    r35a_context_destroy(ctx);
    if (st != R35A_OK) {
        return 2;
    }
    return r35a_version_number() == static_cast<unsigned>(R35A_VERSION_NUMBER) ? 0 : 3;
}
