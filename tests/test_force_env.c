/*
 * test_force_env.c - the test-only knob R35A_FORCE=reference selects the reference implementation.
 * The library reads the knob once, so it is set before the first library call, and changing it
 * afterwards must change nothing. Linked against the static library.
 */
#define _POSIX_C_SOURCE 200809L

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "test_util.h"

static void expect_reference(r35a_context *ctx, const char *what)
{
    r35a_paged_attention_desc pd;
    r35a_paged_attention_desc_init(&pd, R35A_DTYPE_F16, 4, 4, 1, 2048, 32, 8, 128, 16, 600);
    r35a_varlen_attention_desc vd;
    r35a_varlen_attention_desc_init(&vd, R35A_DTYPE_BF16, 2, 400, 200, 16, 16, 64);
    r35a_plan *plan = NULL;
    r35a_plan_info info;

    assert_int_equal(r35a_paged_attention_plan(ctx, &pd, &plan), R35A_OK);
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    assert_int_equal(r35a_plan_get_info(plan, &info), R35A_OK);
    printf("%s: paged plan implementation \"%s\"\n", what, info.implementation);
    assert_string_equal(info.implementation, "reference");
    r35a_plan_destroy(plan);

    assert_int_equal(r35a_varlen_attention_plan(ctx, &vd, &plan), R35A_OK);
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    assert_int_equal(r35a_plan_get_info(plan, &info), R35A_OK);
    printf("%s: varlen plan implementation \"%s\"\n", what, info.implementation);
    assert_string_equal(info.implementation, "reference");
    r35a_plan_destroy(plan);
}

static void test_force_reference(void **state)
{
    (void)state;
    r35a_context *ctx = NULL;
    assert_int_equal(r35a_context_create(NULL, &ctx), R35A_OK); /* AUTO */
    expect_reference(ctx, "R35A_FORCE=reference, AUTO context");

    /* read once: a later change is ignored */
    setenv("R35A_FORCE", "no-such-implementation", 1);
    expect_reference(ctx, "R35A_FORCE changed after first use");

    /* and the forced path computes the right thing */
    tu_rng rng;
    tu_rng_init(&rng, tu_case_seed("force", 0));
    paged_spec s;
    paged_spec_init(&s, R35A_DTYPE_F16, 8, 2, 128, 16);
    paged_spec_add_seq(&s, 300, 1);
    paged_spec_add_seq(&s, 77, 4);
    r35a_context_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    assert_int_equal(r35a_context_get_info(ctx, &info), R35A_OK);
    if (info.backend == R35A_BACKEND_REFERENCE) {
        assert_true(paged_run_case(ctx, &s, &rng, "force", 0));
    }
    r35a_context_destroy(ctx);
}

int main(void)
{
    /* before any library call */
    setenv("R35A_FORCE", "reference", 1);
    tu_begin("test_force_env");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_force_reference),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    tu_stats_print("test_force_env");
    return rc;
}
