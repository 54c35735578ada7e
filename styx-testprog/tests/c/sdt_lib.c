/* A shared library with USDT probes of its own, gated by a semaphore. Built
 * twice: as the library the test program links (-DPROVIDER=sdtlib) and as
 * one it dlopens (-DPROVIDER=sdtdl). Prints each event it fired as a JSON
 * line in styx-loader's jsonl shape. */
#define _SDT_HAS_SEMAPHORES 1
#include <stdio.h>
#include <sys/sdt.h>

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define STR_(a) #a
#define STR(a) STR_(a)

unsigned short CAT(PROVIDER, _fire_semaphore) __attribute__((unused, section(".probes")));

/* Named after the provider, so both builds can be loaded at once. */
__attribute__((noinline)) void CAT(PROVIDER, _fire)(int round) {
    long value = round * 3L - 7;
    if (CAT(PROVIDER, _fire_semaphore)) {
        DTRACE_PROBE2(PROVIDER, fire, round, value);
        printf("{\"provider\":\"" STR(PROVIDER) "\",\"probe\":\"fire\",\"args\":[%d,%ld]}\n",
               round, value);
    }
}
