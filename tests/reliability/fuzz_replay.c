/*
 * fuzz_replay.c - main() for the fuzz target without libFuzzer, so the ordinary test suite covers it.
 *
 *   fuzz_replay FILE|DIR...        runs every file given (directories: every file in them)
 *   fuzz_replay --random N [SEED]  also runs N pseudo-random inputs (after the files)
 *
 * A failing input aborts with the failing check and the decoded case; the file name is printed first.
 */
#define _DEFAULT_SOURCE
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

extern const char *rel_fuzz_input_label;
extern long rel_fuzz_counts[7];
static size_t g_runs;

static int run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "fuzz_replay: cannot open %s\n", path);
        return 1;
    }
    uint8_t *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len == cap) {
            cap = cap ? 2 * cap : 4096;
            buf = realloc(buf, cap);
            if (!buf)
                abort();
        }
        size_t got = fread(buf + len, 1, cap - len, f);
        if (got == 0)
            break;
        len += got;
    }
    fclose(f);
    rel_fuzz_input_label = path;
    /* an exact-size copy, so reads past the input's end are caught too */
    uint8_t *exact = malloc(len ? len : 1);
    memcpy(exact, buf, len);
    free(buf);
    LLVMFuzzerTestOneInput(exact, len);
    free(exact);
    g_runs++;
    return 0;
}

static int compare_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int run_path(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        fprintf(stderr, "fuzz_replay: %s does not exist\n", path);
        return 1;
    }
    if (!S_ISDIR(st.st_mode))
        return run_file(path);
    DIR *dir = opendir(path);
    if (!dir)
        return 1;
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *ent;
    while ((ent = readdir(dir)) != NULL) {
        if (ent->d_name[0] == '.')
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 256;
            names = realloc(names, cap * sizeof *names);
        }
        /* "<path>/<name>", sized exactly */
        size_t path_len = strlen(path), name_len = strlen(ent->d_name);
        names[n] = malloc(path_len + name_len + 2);
        memcpy(names[n], path, path_len);
        names[n][path_len] = '/';
        memcpy(names[n] + path_len + 1, ent->d_name, name_len + 1);
        n++;
    }
    closedir(dir);
    qsort(names, n, sizeof *names, compare_names); /* a stable order makes failures reproducible */
    int rc = 0;
    for (size_t i = 0; i < n; ++i) {
        rc |= run_path(names[i]);
        free(names[i]);
    }
    free(names);
    return rc;
}

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

int main(int argc, char **argv)
{
    setvbuf(stderr, NULL, _IONBF, 0);
    LLVMFuzzerInitialize(&argc, &argv);
    long random_runs = 0;
    uint64_t seed = 0x5EEDull;
    int rc = 0;
    for (int i = 1; i < argc; ++i) {
        if (strcmp(argv[i], "--random") == 0 && i + 1 < argc) {
            random_runs = strtol(argv[++i], NULL, 0);
            if (i + 1 < argc && argv[i + 1][0] != '-') {
                seed = strtoull(argv[++i], NULL, 0);
            }
            continue;
        }
        rc |= run_path(argv[i]);
    }
    printf("fuzz_replay: %zu corpus inputs replayed\n", g_runs);
    /* R35A_TEST_SCALE (the suites' knob, e.g. lowered under valgrind) scales the random inputs */
    const char *scale_env = getenv("R35A_TEST_SCALE");
    double scale = scale_env && *scale_env ? atof(scale_env) : 1.0;
    if (random_runs > 0 && scale > 0.0 && scale < 1.0)
        random_runs = (long)(random_runs * scale) > 0 ? (long)(random_runs * scale) : 1;
    uint8_t buf[512];
    for (long k = 0; k < random_runs; ++k) {
        uint64_t s = seed + (uint64_t)k * 0x1000193ull;
        size_t len = (size_t)(splitmix(&s) % sizeof buf);
        for (size_t b = 0; b < len; ++b) {
            uint64_t x = splitmix(&s);
            /* mostly ordinary bytes, now and then an escape byte */
            buf[b] = (uint8_t)((x >> 8) % 8 == 0 ? x : (x & 0xFF) % 0xB0);
        }
        char label[64];
        snprintf(label, sizeof label, "random input %ld (seed 0x%llx)", k, (unsigned long long)seed);
        rel_fuzz_input_label = label;
        uint8_t *exact = malloc(len ? len : 1);
        memcpy(exact, buf, len);
        LLVMFuzzerTestOneInput(exact, len);
        free(exact);
    }
    if (random_runs)
        printf("fuzz_replay: %ld random inputs (seed 0x%llx)\n", random_runs, (unsigned long long)seed);
    printf("fuzz_replay: plans rejected %ld, plans made %ld (too big to run %ld), runs rejected %ld, runs "
           "compared with the oracle %ld, runs too long for the oracle %ld, other API calls %ld\n",
           rel_fuzz_counts[0], rel_fuzz_counts[1], rel_fuzz_counts[2], rel_fuzz_counts[3], rel_fuzz_counts[4],
           rel_fuzz_counts[6], rel_fuzz_counts[5]);
    return rc;
}
