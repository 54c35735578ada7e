/* Fires USDT probes of its own provider "forms" (via <sys/sdt.h>), so the
 * compiler picks the argument forms: memory at -O0; registers, constants and
 * scale-index-base at -O2; %rip-relative globals at both. It prints each event it fired as a JSON line, in
 * styx-loader's jsonl shape, for the test to compare with what was traced.
 * Reads "go ROUNDS" on stdin, fires, prints "done". */
#define _SDT_HAS_SEMAPHORES 1
#include <stdio.h>
#include <sys/sdt.h>

/* Raised by the tracer (ref_ctr_offset); the gated probe fires only then,
 * the others always. */
#define SEMAPHORE(name) \
    unsigned short forms_##name##_semaphore __attribute__((unused, section(".probes")))
SEMAPHORE(mixed);
SEMAPHORE(consts);
SEMAPHORE(globals);
SEMAPHORE(gated);

static long table[4] = {10, -20, 30, -40};
/* Globals the compiler reads in place: `sym(%rip)` and `sym+8(%rip)` operands. */
volatile long forms_counter;
volatile int forms_pair[3];

__attribute__((noinline)) static void fire(int round, int a, short s, signed char c,
                                           unsigned long long big, int idx) {
    long t = table[idx & 3];
    DTRACE_PROBE6(forms, mixed, a, s, c, big, t, round);
    printf("{\"provider\":\"forms\",\"probe\":\"mixed\",\"args\":[%d,%d,%d,%llu,%ld,%d]}\n",
           a, s, c, big, t, round);
    forms_counter = 1000L * round;
    forms_pair[2] = -round;
    DTRACE_PROBE2(forms, globals, forms_counter, forms_pair[2]);
    printf("{\"provider\":\"forms\",\"probe\":\"globals\",\"args\":[%ld,%d]}\n",
           1000L * round, -round);
    DTRACE_PROBE2(forms, consts, 5, -1);
    printf("{\"provider\":\"forms\",\"probe\":\"consts\",\"args\":[5,-1]}\n");
    if (forms_gated_semaphore) {
        DTRACE_PROBE1(forms, gated, round);
        printf("{\"provider\":\"forms\",\"probe\":\"gated\",\"args\":[%d]}\n", round);
    }
}

int main(void) {
    int rounds;
    if (scanf("go %d", &rounds) != 1)
        return 2;
    for (int i = 0; i < rounds; i++)
        fire(i, i * 7 - 50, (short)(-3 * i), (signed char)(i - 64),
             0xfedcba9876543210ULL + (unsigned long long)i, i);
    printf("done\n");
    fflush(stdout);
    return 0;
}
