/*
 * group_sync.h - the barrier of a group of GW waves that stream one K/V sequence (encoder_cfg.h GW):
 * the workgroup's barrier, or for a one-wave group only the wave's ordering of its LDS accesses.
 */
#ifndef R35A_ENCODER_GROUP_SYNC_H
#define R35A_ENCODER_GROUP_SYNC_H

#include "common/device.h"

namespace r35a {
namespace {   /* internal linkage, as the kernel body's lambdas have */
template <int GW>
__device__ inline void group_sync() {
    if constexpr (GW == 1)
        wave_lds_sync();
    else
        block_sync();
}
} /* namespace */
} /* namespace r35a */

#endif /* R35A_ENCODER_GROUP_SYNC_H */
