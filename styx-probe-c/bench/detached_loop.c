/*
 * The cost of styx_probe.h's check while nobody traces: a tight loop of one
 * STYX_MEM_READ an iteration, as styx-bench's Rust loop fires mem_read!,
 * built against the static library, the shared one (STYX_PROBE_SHARED)
 * and with the probes compiled out (STYX_PROBES_OFF) by `cargo xtask
 * bench`. Prints `ns_per_event=NS` for `n` iterations (argv[1]).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "styx_probe.h"

int main(int argc, char **argv) {
    uint64_t n = argc > 1 ? strtoull(argv[1], NULL, 10) : 100000000;
    uint64_t sum = 0;
    struct timespec start, end;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (uint64_t i = 0; i < n; i++) {
        uint64_t pc = 0x1000 + (i & 0xfff);
        uint64_t addr = 0x8000 + ((i * 13) & 0xffff);
        uint64_t val = i & 0xff;
        STYX_MEM_READ(pc, addr, val, 1);
        sum += val ^ addr;
        /* The loop's own work stays one iteration at a time in every build
         * (compiled out, it would otherwise be vectorized). */
        __asm__ volatile("" : "+r"(sum));
    }
    clock_gettime(CLOCK_MONOTONIC, &end);
    double ns = (double)(end.tv_sec - start.tv_sec) * 1e9 + (double)(end.tv_nsec - start.tv_nsec);
    printf("ns_per_event=%.4f sum=%llu\n", ns / (double)n, (unsigned long long)sum);
    return 0;
}
