/* env.h - the environment knobs (read once per process) and the decision log. The lowest layer of
 * src/ with status.h: it calls nothing else of the library. */
#ifndef R35A_ENV_H
#define R35A_ENV_H

#include <stdbool.h>

bool r35a_log_enabled(void);                 /* R35A_LOG=1 */
const char *r35a_forced_impl(void);          /* R35A_FORCE (test-only), or NULL */
int r35a_forced_decode_splits(void);         /* R35A_DECODE_SPLITS (measurement-only), or 0 */
int r35a_forced_decode_min_split_tiles(void); /* R35A_DECODE_MIN_SPLIT_TILES (measurement-only), or 0 */
/* Prints "[r35a] <line>" to stderr when R35A_LOG=1; nothing otherwise. */
void r35a_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
