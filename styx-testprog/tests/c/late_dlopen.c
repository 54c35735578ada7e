/* Loads a library with probes after it has started, as QEMU loads its TCG
 * plugin (dlopen after exec), and fires them once a tracer following the
 * process has reached the library. Has no probes of its own.
 *
 *   late_dlopen WAIT LIB KIND N
 *
 * WAIT: "stdin" reads a line before the dlopen (a test attaches to the
 * running program meanwhile), or milliseconds to sleep first.
 * KIND: "styx" (styx-testlib: styx_testlib_fire(N, 0) once
 * styx_testlib_enabled() says a tracer raised its semaphore) or "sdt"
 * (sdt_lib.c built with PROVIDER=sdtdl: sdtdl_fire(i) for i < N once
 * sdtdl_fire_semaphore is raised).
 * Waits up to 10 s for the tracer (exit 3 if none comes), fires, prints
 * "fired E" on stderr and "done" on stdout; with WAIT "stdin", reads
 * another line (or the end of input) before exiting 0, the library still
 * mapped meanwhile. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void sleep_ms(long ms) {
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

int main(int argc, char **argv) {
    if (argc != 5)
        return 2;
    if (strcmp(argv[1], "stdin") == 0) {
        char line[64];
        if (!fgets(line, sizeof line, stdin))
            return 2;
    } else {
        sleep_ms(atol(argv[1]));
    }
    void *lib = dlopen(argv[2], RTLD_NOW);
    if (!lib) {
        fprintf(stderr, "%s\n", dlerror());
        return 1;
    }
    long n = atol(argv[4]);
    int styx = strcmp(argv[3], "styx") == 0;
    _Bool (*enabled)(void) = NULL;
    volatile unsigned short *semaphore = NULL;
    if (styx) {
        enabled = (_Bool (*)(void))dlsym(lib, "styx_testlib_enabled");
    } else {
        semaphore = (volatile unsigned short *)dlsym(lib, "sdtdl_fire_semaphore");
    }
    if (!enabled && !semaphore) {
        fprintf(stderr, "no enable check in %s\n", argv[2]);
        return 1;
    }
    int waited = 0;
    while (styx ? !enabled() : *semaphore == 0) {
        if (waited++ == 10000)
            return 3;
        sleep_ms(1);
    }
    /* The other sites of the library are attached in the same step, a
     * moment apart. */
    sleep_ms(100);
    uint64_t fired = 0;
    if (styx) {
        uint64_t (*fire)(uint64_t, uint64_t) =
            (uint64_t (*)(uint64_t, uint64_t))dlsym(lib, "styx_testlib_fire");
        if (!fire)
            return 1;
        fired = fire((uint64_t)n, 0);
    } else {
        void (*fire)(int) = (void (*)(int))dlsym(lib, "sdtdl_fire");
        if (!fire)
            return 1;
        for (long i = 0; i < n; i++)
            fire((int)i);
        fired = (uint64_t)n;
    }
    fprintf(stderr, "fired %llu\n", (unsigned long long)fired);
    printf("done\n");
    fflush(stdout);
    if (strcmp(argv[1], "stdin") == 0) {
        char line[64];
        (void)!fgets(line, sizeof line, stdin);
    }
    return 0;
}
