/* status.h - the thread-local error detail every failing path sets, and the status names.
 * The lowest layer of src/: it calls nothing else of the library but the log (env.h). */
#ifndef R35A_STATUS_H
#define R35A_STATUS_H

#include "rdna35attn.h"

#include <stddef.h>

/* Records "<detail>" for r35a_last_error_detail() and returns status. printf-style. */
r35a_status r35a_fail(r35a_status status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Clears the detail (called at the start of every public entry point). */
void r35a_clear_error(void);

/* Appends sep (only when text is not empty) and then the formatted string to the reason text of
 * capacity cap; a text cut at cap is still informative. Used for fallback and decline reasons. */
void r35a_text_append(char *text, size_t cap, const char *sep, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif
