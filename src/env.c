/* env.c - environment knobs, read once per process, and the decision log (see env.h). */
#include "env.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct {
    bool log;
    char force[128];
    int decode_splits;
    int decode_min_split_tiles;
} knobs;
static pthread_once_t knobs_once = PTHREAD_ONCE_INIT;

/* A positive integer up to max from the environment variable name, or 0 (unset or not such a number). */
static int positive_knob(const char *name, long max)
{
    const char *text = getenv(name);
    if (!text)
        return 0;
    char *end = NULL;
    const long n = strtol(text, &end, 10);
    return end != text && *end == '\0' && n > 0 && n <= max ? (int)n : 0;
}

static void read_knobs(void)
{
    const char *log = getenv("R35A_LOG");
    knobs.log = log && log[0] && strcmp(log, "0") != 0;
    const char *force = getenv("R35A_FORCE");
    if (force)
        snprintf(knobs.force, sizeof knobs.force, "%s", force);
    knobs.decode_splits = positive_knob("R35A_DECODE_SPLITS", 1024);
    knobs.decode_min_split_tiles = positive_knob("R35A_DECODE_MIN_SPLIT_TILES", 1 << 20);
}

bool r35a_log_enabled(void)
{
    pthread_once(&knobs_once, read_knobs);
    return knobs.log;
}

const char *r35a_forced_impl(void)
{
    pthread_once(&knobs_once, read_knobs);
    return knobs.force[0] ? knobs.force : NULL;
}

int r35a_forced_decode_splits(void)
{
    pthread_once(&knobs_once, read_knobs);
    return knobs.decode_splits;
}

int r35a_forced_decode_min_split_tiles(void)
{
    pthread_once(&knobs_once, read_knobs);
    return knobs.decode_min_split_tiles;
}

void r35a_log(const char *fmt, ...)
{
    if (!r35a_log_enabled())
        return;
    char line[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fprintf(stderr, "[r35a] %s\n", line);
}
