/* lse_merge_cases.h - the LSE output and merge op cases a device test program runs (lse_merge_cases.c). */
#ifndef R35A_TEST_LSE_MERGE_CASES_H
#define R35A_TEST_LSE_MERGE_CASES_H

#include "harness.h"

/* Runs every case on ctx (a GPU context) with device buffers from mem; returns the failures. */
int lse_merge_cases(r35a_context *ctx, const tu_mem *mem);

#endif
