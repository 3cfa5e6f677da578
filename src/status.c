/* status.c - status names and the thread-local error detail (see status.h). */
#include "status.h"

#include "env.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

const char *r35a_status_string(r35a_status status)
{
    switch (status) {
    case R35A_OK: return "R35A_OK";
    case R35A_ERR_NULL_POINTER: return "R35A_ERR_NULL_POINTER";
    case R35A_ERR_INVALID_ARGUMENT: return "R35A_ERR_INVALID_ARGUMENT";
    case R35A_ERR_STRUCT_SIZE: return "R35A_ERR_STRUCT_SIZE";
    case R35A_ERR_UNKNOWN_DTYPE: return "R35A_ERR_UNKNOWN_DTYPE";
    case R35A_ERR_SIZE_OVERFLOW: return "R35A_ERR_SIZE_OVERFLOW";
    case R35A_ERR_UNSUPPORTED: return "R35A_ERR_UNSUPPORTED";
    case R35A_ERR_BACKEND_UNAVAILABLE: return "R35A_ERR_BACKEND_UNAVAILABLE";
    case R35A_ERR_WORKSPACE_TOO_SMALL: return "R35A_ERR_WORKSPACE_TOO_SMALL";
    case R35A_ERR_OUT_OF_MEMORY: return "R35A_ERR_OUT_OF_MEMORY";
    case R35A_ERR_DEVICE: return "R35A_ERR_DEVICE";
    case R35A_ERR_INVALID_DATA: return "R35A_ERR_INVALID_DATA";
    case R35A_ERR_PLAN_MISMATCH: return "R35A_ERR_PLAN_MISMATCH";
    case R35A_ERR_INTERNAL: return "R35A_ERR_INTERNAL";
    }
    return "R35A_ERR_UNKNOWN_STATUS";
}

static _Thread_local char tls_detail[512];

const char *r35a_last_error_detail(void) { return tls_detail; }

void r35a_clear_error(void) { tls_detail[0] = '\0'; }

r35a_status r35a_fail(r35a_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tls_detail, sizeof tls_detail, fmt, ap);
    va_end(ap);
    r35a_log("error %s: %s", r35a_status_string(status), tls_detail);
    return status;
}

void r35a_text_append(char *text, size_t cap, const char *sep, const char *fmt, ...)
{
    size_t used = strlen(text);
    size_t sep_len = used ? strlen(sep) : 0;
    if (used + sep_len + 1 >= cap)
        return;
    memcpy(text + used, sep, sep_len);
    used += sep_len;
    text[used] = '\0';
    va_list ap;
    va_start(ap, fmt);
    if (vsnprintf(text + used, cap - used, fmt, ap) < 0)
        text[used] = '\0';
    va_end(ap);
}
